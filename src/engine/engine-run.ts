/**
 * `engine.run()`'s abort wiring: an evaluation awaited with a signal is given up when the signal aborts. Many runs
 * may share one signal (one per request, say), so a signal gets one listener for all of its runs, added once, and
 * each run leaves the signal's set when its outcome is known: nothing is kept for a run that is over.
 */
import type { BrokerBackend } from '../backend/broker-backend.js';
import { FAILED_QUEUE } from '../broker/evaluation.js';
import type { EvaluationHandle, EvaluationOutcome } from '../broker/outcome-waiters.js';
import { InvalidArgumentError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import { settle, type MaybePromise } from '../tasks/maybe-promise.js';
import type { WorkerSet } from './worker-set.js';

export interface RunOptions {
  /** Aborting it gives the evaluation up: removed from the broker if not yet dequeued, canceled if in flight. */
  readonly signal?: AbortSignal;
}

/** `run()`'s options, validated: the signal, if any. */
export function runSignal(options: unknown): AbortSignal | undefined {
  if (options === undefined) return undefined;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidArgumentError('options', 'an object like { signal } or undefined', options);
  }
  for (const key of Object.keys(options)) {
    if (key !== 'signal') throw new InvalidArgumentError(`options.${key}`, 'no such option (run takes { signal })', (options as Record<string, unknown>)[key]);
  }
  const signal = (options as { signal?: unknown }).signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new InvalidArgumentError('options.signal', 'an AbortSignal or undefined', signal);
  return signal;
}

/** The runs waiting with one signal, and the signal's one listener. */
interface Watched {
  readonly ids: Set<string>;
  readonly onAbort: () => void;
}

/** Runs that wait with each signal, and what to do with one when its signal aborts. */
export class AbortWatch {
  readonly #bySignal = new WeakMap<AbortSignal, Watched>();
  readonly #abort: (evaluationId: string, cause: unknown) => void;

  constructor(abort: (evaluationId: string, cause: unknown) => void) {
    this.#abort = abort;
  }

  /** `handle.done`, with the evaluation given up when `signal` aborts before it settles. */
  watch<V>(handle: EvaluationHandle<V>, signal: AbortSignal): Promise<EvaluationOutcome<V>> {
    const done = handle.done;
    let watched = this.#bySignal.get(signal);
    if (watched === undefined) {
      const ids = new Set<string>();
      const onAbort = (): void => {
        this.#bySignal.delete(signal);
        for (const id of [...ids]) this.#abort(id, signal.reason);
      };
      watched = { ids, onAbort };
      this.#bySignal.set(signal, watched);
      signal.addEventListener('abort', onAbort, { once: true });
    }
    const mine = watched;
    mine.ids.add(handle.id);
    const leave = (): void => {
      mine.ids.delete(handle.id);
      if (mine.ids.size === 0 && this.#bySignal.get(signal) === mine) {
        this.#bySignal.delete(signal);
        signal.removeEventListener('abort', mine.onAbort);
      }
    };
    // Both callbacks: the derived promise never rejects, so it cannot become an unhandled rejection.
    done.then(leave, leave);
    return done;
  }
}

/**
 * Gives up an evaluation whose caller aborted: removed if not in flight, canceled through its slot (and removed
 * when its thread lets go) if a worker here holds it. One whose outcome is known (failed, superseded) is left
 * alone. The broker's answers may be promises; a refusal (the evaluation moved on meanwhile) is logged.
 */
export function giveUpEvaluation(broker: BrokerBackend, workers: WorkerSet, logger: Logger, evaluationId: string, cause: unknown): void {
  const failed = (error: unknown): void => logger.debug({ err: error, evalId: evaluationId }, 'abort of an evaluation refused');
  const step = <T>(value: () => MaybePromise<T>, next: (value: T) => void): void => {
    let answer: MaybePromise<T>;
    try {
      answer = value();
    } catch (error) {
      failed(error);
      return;
    }
    settle(answer, next, failed, failed);
  };
  step(
    () => broker.inspect(evaluationId),
    (info) => {
      if (info === undefined || info.queue === FAILED_QUEUE || info.state === 'failed' || info.state === 'cancelable') return;
      if (info.state !== 'unacked') {
        step(() => broker.remove(evaluationId, undefined, cause), () => undefined);
        return;
      }
      // No worker holding it: a caller of `engine.broker` dequeued it, and decides with the token it holds.
      step(
        () => broker.outstanding(evaluationId),
        (token) => {
          if (token !== undefined) workers.abort(evaluationId, token, cause);
        },
      );
    },
  );
}
