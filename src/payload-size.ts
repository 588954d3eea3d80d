/**
 * Size of a payload as it crosses to a thread: the bytes of its structured-clone serialization. Shared memory
 * (`SharedArrayBuffer`, and views over it) is shared, not copied, so it counts as zero bytes — and must not make
 * the measurement throw, which Node's default serializer does (an exception per enqueue is also slow).
 */
import { Serializer } from 'node:v8';

class SizeSerializer extends Serializer {
  #shared = 0;
  _getSharedArrayBufferId(_buffer: SharedArrayBuffer): number {
    return this.#shared++;
  }
}

/** Bytes of `payload`'s serialization, or `undefined` when it cannot be structured-cloned. */
export function payloadBytes(payload: unknown): number | undefined {
  if (payload === undefined || payload === null || typeof payload !== 'object') return 0;
  try {
    const serializer = new SizeSerializer();
    serializer.writeHeader();
    serializer.writeValue(payload);
    return serializer.releaseBuffer().byteLength;
  } catch {
    return undefined;
  }
}
