/**
 * The dequeues waiting in this process, in arrival order, and how each is answered: exactly once, with an error,
 * nothing (its timeout) or a delivery. A waiter leaves the list as it is answered, its timer and abort listener with
 * it; a callback that throws is logged and cannot break the call that answered it.
 */
import type { DequeueCallback } from '../../backend/broker-backend.js';
import type { Delivery } from '../../broker/broker-types.js';
import type { Evaluation } from '../../broker/evaluation.js';
import { AbortedError } from '../../errors.js';
import type { TimerHandle } from '../../clock.js';
import type { Held } from './leases.js';
import type { BrokerParts } from './parts.js';

export interface Waiter {
  readonly types: readonly string[];
  /** Its distinct types joined: waiters with the same key are served by one fetch. */
  readonly key: string;
  readonly callback: DequeueCallback;
  timer: TimerHandle | undefined;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  answered: boolean;
}

export class Waiters {
  readonly #parts: Pick<BrokerParts, 'clock' | 'logger' | 'events'>;
  /** Told of each delivery handed over (the backend's hook, read at each hand-over). */
  readonly #onDelivery: () => ((evaluation: Evaluation) => void) | undefined;
  readonly #waiters: Waiter[] = [];

  constructor(parts: Pick<BrokerParts, 'clock' | 'logger' | 'events'>, onDelivery: () => ((evaluation: Evaluation) => void) | undefined) {
    this.#parts = parts;
    this.#onDelivery = onDelivery;
  }

  get length(): number {
    return this.#waiters.length;
  }

  /** Whether every waiter's key is one `quiet` says a fetch would find nothing for. */
  allQuiet(quiet: (key: string) => boolean): boolean {
    return this.#waiters.every((w) => quiet(w.key));
  }

  /** The distinct keys waiting, in arrival order. */
  keys(): string[] {
    return [...new Set(this.#waiters.map((w) => w.key))];
  }

  withKey(key: string): Waiter[] {
    return this.#waiters.filter((w) => w.key === key);
  }

  firstWithKey(key: string): Waiter | undefined {
    return this.#waiters.find((w) => w.key === key);
  }

  /** The first waiter that takes `queue`. */
  forQueue(queue: string): Waiter | undefined {
    return this.#waiters.find((w) => w.types.includes(queue));
  }

  /** A dequeue with checked arguments starts waiting: `timeoutMs` (0 waits forever) and `signal` end its wait. */
  add(types: readonly string[], timeoutMs: number, signal: AbortSignal | undefined, callback: DequeueCallback): void {
    const unique = [...new Set(types)];
    const waiter: Waiter = { types: unique, key: unique.join('\u0000'), callback, timer: undefined, signal, onAbort: undefined, answered: false };
    if (timeoutMs > 0) {
      waiter.timer = this.#parts.clock.setTimer(() => this.settle(waiter, undefined, undefined), timeoutMs);
    }
    if (signal !== undefined) {
      waiter.onAbort = () => this.settle(waiter, new AbortedError('dequeue'), undefined);
      signal.addEventListener('abort', waiter.onAbort, { once: true });
    }
    this.#waiters.push(waiter);
  }

  /** Every waiting dequeue ends with `error`. */
  endAll(error: () => Error): void {
    for (const waiter of [...this.#waiters]) this.settle(waiter, error(), undefined);
  }

  answer(callback: DequeueCallback, error: Error | undefined, delivery: Delivery | undefined): void {
    try {
      callback(error, delivery);
    } catch (thrown) {
      this.#parts.logger.error({ err: thrown, evalId: delivery?.evaluation.id }, 'dequeue callback threw');
    }
  }

  settle(waiter: Waiter, error: Error | undefined, delivery: Delivery | undefined): void {
    if (waiter.answered) return;
    waiter.answered = true;
    const at = this.#waiters.indexOf(waiter);
    if (at >= 0) this.#waiters.splice(at, 1);
    if (waiter.timer !== undefined) this.#parts.clock.clearTimer(waiter.timer);
    if (waiter.onAbort !== undefined) waiter.signal?.removeEventListener('abort', waiter.onAbort);
    this.answer(waiter.callback, error, delivery);
  }

  /** `held` answers `waiter`. */
  serve(waiter: Waiter, held: Held): void {
    this.settle(waiter, undefined, this.handOver(held));
  }

  /** A held delivery as a dequeue receives it: the backend's hook and `broker:dequeue` are told. */
  handOver(held: Held): Delivery {
    const delivery: Delivery = { evaluation: held.evaluation, token: held.token };
    this.#onDelivery()?.(held.evaluation);
    const events = this.#parts.events;
    if (events.hasListeners('broker:dequeue')) {
      events.emit('broker:dequeue', { evaluation: held.evaluation, token: held.token, queue: held.queue, deliveries: held.deliveries });
    }
    return delivery;
  }
}
