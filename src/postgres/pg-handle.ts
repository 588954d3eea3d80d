/**
 * The handle `enqueue` returns with the PostgreSQL backend. `accepted` settles when the admitting transaction has
 * committed (or failed); `done` with the outcome, wherever the evaluation ran. Reading `done` is what asks for the
 * outcome: a handle nobody reads costs no query, and one that is read is watched (`OutcomeWatch`) until it settles.
 * Neither promise is made before it is read, and reading one without awaiting it is safe (no unhandled rejection).
 */
import type { Evaluation } from '../broker/evaluation.js';
import type { EvaluationHandle, EvaluationOutcome } from '../broker/outcome-waiters.js';

const ignore = (): void => undefined;

const Phase = { PENDING: 0, OK: 1, FAILED: 2 } as const;
type PhaseValue = (typeof Phase)[keyof typeof Phase];

/** A lazily made promise with its state kept outside it until someone reads it. */
class LazyOutcome<T> {
  phase: PhaseValue = Phase.PENDING;
  #data: T | Error | (() => Error) | undefined;
  #promise: Promise<T> | undefined;
  #resolve: ((value: T) => void) | undefined;
  #reject: ((error: Error) => void) | undefined;

  get promise(): Promise<T> {
    if (this.#promise === undefined) {
      if (this.phase === Phase.OK) this.#promise = Promise.resolve(this.#data as T);
      else if (this.phase === Phase.FAILED) this.#promise = Promise.reject(this.#error());
      else this.#promise = new Promise<T>((resolve, reject) => ((this.#resolve = resolve), (this.#reject = reject)));
      this.#promise.catch(ignore);
    }
    return this.#promise;
  }

  get read(): boolean {
    return this.#promise !== undefined;
  }

  resolve(value: T): boolean {
    if (this.phase !== Phase.PENDING) return false;
    this.phase = Phase.OK;
    this.#data = value;
    this.#resolve?.(value);
    this.#resolve = this.#reject = undefined;
    return true;
  }

  reject(error: Error | (() => Error)): boolean {
    if (this.phase !== Phase.PENDING) return false;
    this.phase = Phase.FAILED;
    this.#data = error;
    if (this.#reject !== undefined) this.#reject(this.#error());
    this.#resolve = this.#reject = undefined;
    return true;
  }

  #error(): Error {
    const data = this.#data as Error | (() => Error);
    if (typeof data !== 'function') return data;
    const error = data();
    this.#data = error;
    return error;
  }
}

export class PgHandle implements EvaluationHandle {
  readonly id: string;
  /** The evaluation as this process enqueued it (for `rejectOutcomes`' reason). */
  readonly evaluation: Evaluation;
  readonly #accepted = new LazyOutcome<void>();
  #done = new LazyOutcome<EvaluationOutcome>();
  readonly #onRead: (handle: PgHandle) => void;

  constructor(evaluation: Evaluation, onRead: (handle: PgHandle) => void) {
    this.id = evaluation.id;
    this.evaluation = evaluation;
    this.#onRead = onRead;
  }

  get accepted(): Promise<void> {
    return this.#accepted.promise;
  }

  get done(): Promise<EvaluationOutcome> {
    const first = !this.#done.read;
    const promise = this.#done.promise;
    if (first && this.#done.phase === Phase.PENDING) this.#onRead(this);
    return promise;
  }

  /** Whether someone read `done` (and so waits for the outcome). */
  get watched(): boolean {
    return this.#done.read;
  }

  get settled(): boolean {
    return this.#done.phase !== Phase.PENDING;
  }

  /** The admitting transaction committed (or the id was already held). */
  admitted(): void {
    this.#accepted.resolve(undefined);
  }

  /** The admission failed: nothing was admitted, so there will be no outcome either. */
  refused(error: Error): void {
    this.#accepted.reject(error);
    this.#done.reject(error);
  }

  acked(value: unknown, index: number, attempts: number, deliveries: number): boolean {
    this.#accepted.resolve(undefined);
    return this.#done.resolve({ id: this.id, status: 'acked', value, index, attempts, deliveries });
  }

  rejected(error: Error | (() => Error)): boolean {
    this.#accepted.resolve(undefined);
    return this.#done.reject(error);
  }

  /**
   * The evaluation runs again (a failed one replayed): `done` read from now on settles with its new outcome; a `done`
   * read before keeps the old one.
   */
  reopen(): void {
    this.#done = new LazyOutcome<EvaluationOutcome>();
  }

  /** Gives up waiting without an outcome (the engine stopped): the evaluation itself stays where it is. */
  abandoned(error: () => Error): boolean {
    return this.#done.reject(error);
  }
}
