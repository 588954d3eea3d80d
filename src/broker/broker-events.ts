import type { Evaluation, EvaluationState } from './evaluation.js';

/**
 * Events of `EvalBroker.events`, named `broker:<verb>`. Payloads are built only when someone listens, so the hot
 * path pays one map lookup per event when nobody does. Listeners run synchronously after the broker's state is
 * consistent; a throwing listener is logged and ignored.
 */
export interface BrokerEvents {
  /** A new evaluation was accepted (not emitted for a duplicate id). `delayedUntil` is set for wait/waitUntil. */
  'broker:enqueue': { readonly evaluation: Evaluation; readonly delayedUntil: number | undefined };
  /** An evaluation was delivered. `queue` is its type or `_failed`; `deliveries` counts scheduler deliveries. */
  'broker:dequeue': { readonly evaluation: Evaluation; readonly token: string; readonly queue: string; readonly deliveries: number };
  'broker:ack': { readonly evaluation: Evaluation; readonly token: string };
  /**
   * A delivery was nacked, explicitly (`timedOut: false`) or by its deadline. `delayMs` is the re-enqueue delay;
   * `failed` is true when it went to `_failed` instead.
   */
  'broker:nack': {
    readonly evaluation: Evaluation;
    readonly token: string;
    readonly timedOut: boolean;
    readonly deliveries: number;
    readonly delayMs: number;
    readonly failed: boolean;
    readonly reason: Error | undefined;
  };
  /**
   * A delivery was given back (`giveBack`: its work was canceled on request, or the engine is stopping): the
   * evaluation is ready again at once, and `deliveries` no longer counts that delivery.
   */
  'broker:give-back': { readonly evaluation: Evaluation; readonly token: string; readonly deliveries: number; readonly reason: Error | undefined };
  /** A nack deadline was extended by `extendNackDeadline` instead of firing. */
  'broker:extend': { readonly evaluation: Evaluation; readonly token: string; readonly deadline: number };
  /** An evaluation entered the `_failed` queue. */
  'broker:failed': { readonly evaluation: Evaluation; readonly reason: Error };
  /** `remove()` took the evaluation out of the broker from `state` (its outcome rejects with `AbortedError`). */
  'broker:remove': { readonly evaluation: Evaluation; readonly state: EvaluationState };
  /** An ack superseded these pending evaluations of the same job; collect them with `drainCancelable()`. */
  'broker:cancelable': { readonly evaluations: readonly Evaluation[] };
  /** `setEnabled` changed the state; `flushed` is what a disable removed. */
  'broker:enabled': { readonly enabled: boolean; readonly flushed: readonly Evaluation[] };
  /** `pause()` / `resume()` changed the state. */
  'broker:paused': { readonly paused: boolean };
}
