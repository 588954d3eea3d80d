/**
 * What `enqueue` hands back for an evaluation, and how its outcome reaches whoever waits for it.
 *
 * The broker settles a handle where it settles the evaluation: ack (resolved), `_failed`, superseded, removed, or
 * given up by a stopping engine (rejected). The cost is one small object per evaluation, made at enqueue, with no
 * promise in it: `done` makes its promise on first read, and an outcome that comes before anyone read `done` stays
 * in the handle's fields. The handle is referenced by the caller and by the broker's entry only, so once the
 * evaluation has left the broker and the caller dropped the handle, nothing of it is left. Errors nobody may ever
 * see (a superseded evaluation, one the engine gave up at stop) are made only when `done` is read.
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

const HandleState = { PENDING: 0, ACKED: 1, REJECTED: 2 } as const;
type HandleStateValue = (typeof HandleState)[keyof typeof HandleState];

interface Deferred {
  readonly resolve: (outcome: EvaluationOutcome) => void;
  readonly reject: (error: Error) => void;
}

/**
 * The broker's handle. Not exported from the package: callers see `EvaluationHandle`. Few fields on purpose: one
 * lives per evaluation the broker holds.
 */
export class OutcomeHandle implements EvaluationHandle {
  readonly id: string;
  #state: HandleStateValue = HandleState.PENDING;
  /** ACKED: the outcome. REJECTED: the error, or the function that makes it once someone looks. */
  #data: EvaluationOutcome | Error | (() => Error) | undefined = undefined;
  #done: Promise<EvaluationOutcome> | undefined = undefined;
  /** Settles `#done` while PENDING, once someone read it. */
  #deferred: Deferred | undefined = undefined;

  constructor(id: string) {
    this.id = id;
  }

  get accepted(): Promise<void> {
    return ACCEPTED;
  }

  get done(): Promise<EvaluationOutcome> {
    if (this.#done === undefined) {
      if (this.#state === HandleState.ACKED) this.#done = Promise.resolve(this.#data as EvaluationOutcome);
      else if (this.#state === HandleState.REJECTED) this.#done = Promise.reject(this.#rejection());
      else this.#done = new Promise<EvaluationOutcome>((resolve, reject) => (this.#deferred = { resolve, reject }));
      // Reading `done` (destructuring the handle, say) is not a promise to await it.
      this.#done.catch(ignore);
    }
    return this.#done;
  }

  /** Whether the outcome is known (the first settlement wins; later ones change nothing). */
  get settled(): boolean {
    return this.#state !== HandleState.PENDING;
  }

  acked(value: unknown, index: number, attempts: number, deliveries: number): void {
    if (this.#state !== HandleState.PENDING) return;
    this.#state = HandleState.ACKED;
    const outcome: EvaluationOutcome = { id: this.id, status: 'acked', value, index, attempts, deliveries };
    this.#data = outcome;
    const deferred = this.#deferred;
    if (deferred !== undefined) {
      this.#deferred = undefined;
      deferred.resolve(outcome);
    }
  }

  rejected(error: Error): void {
    this.#reject(error);
  }

  /** Rejects with the error `make` returns, made only if someone reads `done` (now or later). */
  rejectedWith(make: () => Error): void {
    this.#reject(make);
  }

  #reject(reason: Error | (() => Error)): void {
    if (this.#state !== HandleState.PENDING) return;
    this.#state = HandleState.REJECTED;
    this.#data = reason;
    const deferred = this.#deferred;
    if (deferred !== undefined) {
      this.#deferred = undefined;
      deferred.reject(this.#rejection());
    }
  }

  #rejection(): Error {
    const data = this.#data as Error | (() => Error);
    if (typeof data !== 'function') return data;
    const error = data();
    this.#data = error;
    return error;
  }
}
