/**
 * Numbers for the shared memory that travels in items (a payload's `SharedArrayBuffer`, or a view over one): the
 * byte codec writes a buffer as its number, so main and every thread must agree on them. Main numbers a buffer the
 * first time an item holds it and tells every thread (`share`), before the item can be taken; once main no longer
 * holds the buffer anywhere (it was collected), no item can hold it any more and the threads forget it (`unshare`).
 * Imported by both sides; the main side holds buffers only weakly.
 */
import type { SharedBuffers } from './byte-codec.js';

/** Main's registry. */
export class MainSharedRegistry implements SharedBuffers {
  readonly #ids = new WeakMap<SharedArrayBuffer, number>();
  readonly #buffers = new Map<number, WeakRef<SharedArrayBuffer>>();
  readonly #collected: FinalizationRegistry<number>;
  readonly #onShare: (id: number, buffer: SharedArrayBuffer) => void;
  #next = 1;

  /** `onShare` tells the threads of a new number; `onForget` that a number is free. */
  constructor(onShare: (id: number, buffer: SharedArrayBuffer) => void, onForget: (id: number) => void) {
    this.#onShare = onShare;
    this.#collected = new FinalizationRegistry((id: number) => {
      this.#buffers.delete(id);
      onForget(id);
    });
  }

  idOf(buffer: SharedArrayBuffer): number {
    let id = this.#ids.get(buffer);
    if (id === undefined) {
      id = this.#next++;
      this.#ids.set(buffer, id);
      this.#buffers.set(id, new WeakRef(buffer));
      this.#collected.register(buffer, id);
      this.#onShare(id, buffer);
    }
    return id;
  }

  bufferOf(id: number): SharedArrayBuffer | undefined {
    return this.#buffers.get(id)?.deref();
  }

  /** Every buffer still numbered, for a thread that starts now. */
  live(): Array<readonly [number, SharedArrayBuffer]> {
    const out: Array<readonly [number, SharedArrayBuffer]> = [];
    for (const [id, ref] of this.#buffers) {
      const buffer = ref.deref();
      if (buffer !== undefined) out.push([id, buffer]);
    }
    return out;
  }
}

/** A thread's registry: the buffers main told it of. A buffer main never numbered has no number here either. */
export class ThreadSharedRegistry implements SharedBuffers {
  readonly #buffers = new Map<number, SharedArrayBuffer>();
  readonly #ids = new WeakMap<SharedArrayBuffer, number>();

  share(id: number, buffer: SharedArrayBuffer): void {
    this.#buffers.set(id, buffer);
    this.#ids.set(buffer, id);
  }

  forget(id: number): void {
    this.#buffers.delete(id);
  }

  idOf(buffer: SharedArrayBuffer): number | undefined {
    const id = this.#ids.get(buffer);
    return id !== undefined && this.#buffers.get(id) === buffer ? id : undefined;
  }

  bufferOf(id: number): SharedArrayBuffer | undefined {
    return this.#buffers.get(id);
  }
}
