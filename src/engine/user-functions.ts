/**
 * The types of the functions a user writes for the pool threads: a scheduler (one per evaluation type) and a task
 * handler (one per handler name), each the default (or named) export of a module registered in `createEngine`'s
 * `schedulers` / `handlers`. Generic in the payload they receive and the value they hand back, so that
 *
 *     export default (async (evaluation, ctx) => { … }) satisfies Scheduler<MyPayload, MyValue>;
 *
 * types `evaluation.payload` and `ctx`, and checks what the function returns. The engine cannot check the payload's
 * type at run time: `Payload` is a promise the enqueuing code keeps.
 */
import type { Evaluation } from '../broker/evaluation.js';
import type { Plan } from '../state/types.js';
import type { QueuedRun, RunResult } from '../tasks/types.js';
import type { WorkContext } from '../thread/context.js';

/** The evaluation a scheduler receives: what was enqueued (a structured clone of it), its `payload` typed. */
export type SchedulerEvaluation<Payload = unknown> = Omit<Evaluation, 'payload'> & { readonly payload: Payload };

/**
 * What a scheduler returns: a plan, with a `value` that reaches the caller once the plan has committed, or nothing
 * (nothing to write: the evaluation is acked).
 */
export type SchedulerResult<Value = unknown> = (Plan & { readonly value?: Value }) | undefined | void;

/** A scheduler: runs on a pool thread for each evaluation of its type, against `ctx.snapshot`. */
export type Scheduler<Payload = unknown, Value = unknown> = (
  evaluation: SchedulerEvaluation<Payload>,
  ctx: WorkContext,
) => SchedulerResult<Value> | Promise<SchedulerResult<Value>>;

/** What a task handler receives: the run (`taskId`, `runId`, `scheduledFor`, `runAt`) and the task's payload. */
export type TaskRunInput<Payload = unknown> = QueuedRun & { readonly payload: Payload };

/**
 * A task handler: runs on a pool thread for each attempt of a run. It returns the run's value, or a `RunResult`
 * (`{ error, retryable?, value? }` with an `Error` as `error` is a failure, retried when `retryable` is true).
 */
export type TaskHandler<Payload = unknown, Value = unknown> = (
  run: TaskRunInput<Payload>,
  ctx: WorkContext,
) => Value | RunResult | Promise<Value | RunResult>;
