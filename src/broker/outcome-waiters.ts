/**
 * What `enqueue` hands back for an evaluation, and how its outcome reaches whoever waits for it.
 *
 * The broker settles an evaluation's outcome where it settles the evaluation: ack (resolved), `_failed`,
 * superseded, removed, or given up by a stopping engine (rejected). The cost is two fields in the broker's record of
 * the evaluation: the handle is a view of that record that the broker does not keep, `done` makes its promise on
 * first read, and an outcome that comes before anyone read `done` stays in the record. Once the evaluation has left
 * the broker and the caller dropped the handle, nothing of it is left. Errors nobody may ever see (a superseded
 * evaluation, one the engine gave up at stop) are made only when `done` is read.
 */

/** How an evaluation ended, when it was acked. */
export interface EvaluationOutcome<V = unknown> {
  readonly id: string;
  readonly status: 'acked';
  /** The scheduler's `value`, returned with its plan and released once the plan committed. */
  readonly value: V;
  /** The state index its plan committed at (the store's index at ack when it wrote nothing). */
  readonly index: number;
  /** Scheduler runs in the acked delivery: 1, plus one per plan refresh. */
  readonly attempts: number;
  /** Deliveries of the evaluation, the acked one included. */
  readonly deliveries: number;
}

/**
 * One evaluation the broker holds. `done` resolves with its outcome when it is acked and rejects with a typed error
 * when it is not (`DeliveryLimitError`, `PlanAttemptsExhaustedError`, `UnknownSchedulerError`, `SupersededError`,
 * `AbortedError`, `InvalidStateError` when the engine stopped with it still in the broker). Reading `done` and never
 * awaiting it is safe: its rejection is not reported as unhandled.
 */
export interface EvaluationHandle<V = unknown> {
  readonly id: string;
  /** Resolves once the backend holds the evaluation (in memory: at once; a durable backend after its commit). */
  readonly accepted: Promise<void>;
  readonly done: Promise<EvaluationOutcome<V>>;
}

/** What an ack may report about the delivery it completes (`EvalBroker.ack`). */
export interface AckResult {
  /** The value for `done`; default `undefined`. */
  readonly value?: unknown;
  /** The state index the delivery's plan committed at; default 0. */
  readonly index?: number;
  /** Scheduler runs in the delivery; default 1. */
  readonly attempts?: number;
}

const ACCEPTED: Promise<void> = Promise.resolve();
const ignore = (): void => undefined;

/** The promise of `done` and, while the outcome is unknown, what settles it. */
interface Waiter {
  readonly promise: Promise<EvaluationOutcome>;
  resolve: ((outcome: EvaluationOutcome) => void) | undefined;
  reject: ((error: Error) => void) | undefined;
}

/**
 * How one evaluation the broker holds came out, kept in the broker's own record of it (its entry extends this):
 * two fields, and no object until there is something to keep. The handle `enqueue` returns is a view of it, so a
 * caller who drops the handle leaves nothing behind per evaluation but these fields.
 *
 * `outcome`: undefined while unknown; then the acked outcome, or the rejection (the error, or the function that makes
 * it once someone looks). `waiter`: made when `done` is first read. The first settlement wins.
 */
export abstract class OutcomeRecord {
  readonly id: string;
  /** The evaluation's deliveries so far (its entry's count): an acked outcome's `deliveries`. */
  abstract readonly deliveries: number;
  #outcome: EvaluationOutcome | Error | (() => Error) | typeof PLAIN_ACK | undefined = undefined;
  /** The waiter; or, after a plain ack nobody waited for (`PLAIN_ACK`), the index it was acked at. */
  #waiter: Waiter | number | undefined = undefined;

  constructor(id: string) {
    this.id = id;
  }

  /** Whether the outcome is known. */
  get outcomeKnown(): boolean {
    return this.#outcome !== undefined;
  }

  /** The promise of `done` (one per evaluation, however many handles read it). */
  outcomePromise(): Promise<EvaluationOutcome> {
    let waiter = this.#waiter;
    if (typeof waiter !== 'object') {
      if (this.#outcome === PLAIN_ACK) {
        this.#outcome = { id: this.id, status: 'acked', value: undefined, index: waiter ?? 0, attempts: 1, deliveries: this.deliveries };
      }
      const outcome = this.#outcome;
      let promise: Promise<EvaluationOutcome>;
      let resolve: Waiter['resolve'];
      let reject: Waiter['reject'];
      if (outcome === undefined) {
        promise = new Promise<EvaluationOutcome>((res, rej) => {
          resolve = res;
          reject = rej;
        });
      } else if (isAcked(outcome)) promise = Promise.resolve(outcome);
      else promise = Promise.reject(this.#rejection());
      // Reading `done` (destructuring the handle, say) is not a promise to await it.
      promise.catch(ignore);
      waiter = this.#waiter = { promise, resolve, reject };
    }
    return waiter.promise;
  }

  acked(value: unknown, index: number, attempts: number, deliveries: number): void {
    if (this.#outcome !== undefined) return;
    const waiter = this.#waiter;
    if (waiter === undefined && value === undefined && attempts === 1 && deliveries === this.deliveries) {
      // The common ack that nobody waits for: kept as its index, the outcome made only if someone looks.
      this.#outcome = PLAIN_ACK;
      this.#waiter = index;
      return;
    }
    const outcome: EvaluationOutcome = { id: this.id, status: 'acked', value, index, attempts, deliveries };
    this.#outcome = outcome;
    if (typeof waiter === 'object' && waiter.resolve !== undefined) {
      const resolve = waiter.resolve;
      waiter.resolve = waiter.reject = undefined;
      resolve(outcome);
    }
  }

  rejected(error: Error): void {
    this.#reject(error);
  }

  /**
   * The evaluation runs again (a failed one replayed): its outcome is unknown once more, and `done` read from now
   * on settles with the new one. A `done` read before has settled with the old outcome and keeps it.
   */
  reopen(): void {
    this.#outcome = undefined;
    this.#waiter = undefined;
  }

  /** Rejects with the error `make` returns, made only if someone reads `done` (now or later). */
  rejectedWith(make: () => Error): void {
    this.#reject(make);
  }

  #reject(reason: Error | (() => Error)): void {
    if (this.#outcome !== undefined) return;
    this.#outcome = reason;
    const waiter = this.#waiter;
    if (typeof waiter === 'object' && waiter.reject !== undefined) {
      const reject = waiter.reject;
      waiter.resolve = waiter.reject = undefined;
      reject(this.#rejection());
    }
  }

  #rejection(): Error {
    const data = this.#outcome as Error | (() => Error);
    if (typeof data !== 'function') return data;
    const error = data();
    this.#outcome = error;
    return error;
  }
}

/** `#outcome` of an ack with no value after one attempt, made while nobody waited: see `acked`. */
const PLAIN_ACK = Symbol('plain ack');

function isAcked(outcome: EvaluationOutcome | Error | (() => Error)): outcome is EvaluationOutcome {
  return typeof outcome === 'object' && !(outcome instanceof Error);
}

/**
 * The broker's handle: a view of its record of the evaluation. Not exported from the package: callers see
 * `EvaluationHandle`. Every `enqueue` of an id makes a new view of the same record: `done` is the same promise.
 */
export class OutcomeHandle implements EvaluationHandle {
  readonly id: string;
  readonly #record: OutcomeRecord;

  constructor(record: OutcomeRecord) {
    this.id = record.id;
    this.#record = record;
  }

  get accepted(): Promise<void> {
    return ACCEPTED;
  }

  get done(): Promise<EvaluationOutcome> {
    return this.#record.outcomePromise();
  }

  /** Whether the outcome is known (the first settlement wins; later ones change nothing). */
  get settled(): boolean {
    return this.#record.outcomeKnown;
  }
}
