import type { Logger } from './observability/logger.js';

type Listener<A> = (payload: A) => void;

/**
 * Typed events with `namespace:verb` names. Emitting is safe: a throwing listener is logged and cannot break the
 * engine. With no listener for a name, `emit` costs one map lookup, so hot paths emit unconditionally.
 */
export class TypedEmitter<Events extends { [K in keyof Events]: unknown }> {
  readonly #listeners = new Map<keyof Events, Listener<never>[]>();
  readonly #logger: () => Logger;

  constructor(logger: () => Logger) {
    this.#logger = logger;
  }

  on<K extends keyof Events>(name: K, listener: Listener<Events[K]>): () => void {
    const list = this.#listeners.get(name);
    // Copy on write: a listener that removes itself during emit does not disturb the loop.
    this.#listeners.set(name, list === undefined ? [listener as Listener<never>] : [...list, listener as Listener<never>]);
    return () => this.off(name, listener);
  }

  once<K extends keyof Events>(name: K, listener: Listener<Events[K]>): () => void {
    const off = this.on(name, (payload) => {
      off();
      listener(payload);
    });
    return off;
  }

  off<K extends keyof Events>(name: K, listener: Listener<Events[K]>): void {
    const list = this.#listeners.get(name);
    if (list === undefined) return;
    const next = list.filter((l) => l !== (listener as Listener<never>));
    if (next.length === 0) this.#listeners.delete(name);
    else this.#listeners.set(name, next);
  }

  hasListeners(name: keyof Events): boolean {
    return this.#listeners.has(name);
  }

  emit<K extends keyof Events>(name: K, payload: Events[K]): void {
    const list = this.#listeners.get(name) as Listener<Events[K]>[] | undefined;
    if (list === undefined) return;
    for (const listener of list) {
      try {
        listener(payload);
      } catch (error) {
        this.#logger().error({ err: error, event: String(name) }, 'event listener threw');
      }
    }
  }
}
