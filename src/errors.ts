/**
 * Typed errors. Every failure a caller can see is a `TickpoolError` with a stable `code`; messages say what was
 * expected and what was received. Errors cross thread boundaries as plain objects (`toWire`/`fromWire`), because
 * structured clone drops the prototype and with it `instanceof`.
 */

/**
 * Every code a `TickpoolError` can carry: `code` is this literal union, so a `switch` over it is checked. A
 * scheduler's or handler's own error code travels as `RemoteError.remoteCode`, never as `code`.
 */
export const errorCodes = Object.freeze([
  'ERR_TICKPOOL',
  'ERR_INVALID_ARGUMENT',
  'ERR_INVALID_OPTION',
  'ERR_INVALID_EVALUATION',
  'ERR_INVALID_TASK',
  'ERR_INVALID_PLAN',
  'ERR_BROKER_DISABLED',
  'ERR_EVAL_NOT_OUTSTANDING',
  'ERR_TOKEN_MISMATCH',
  'ERR_NACK_TIMEOUT_REACHED',
  'ERR_ABORTED',
  'ERR_DELIVERY_LIMIT',
  'ERR_SUPERSEDED',
  'ERR_UNKNOWN_SCHEDULER',
  'ERR_UNKNOWN_HANDLER',
  'ERR_SYNC_LIMIT',
  'ERR_PLAN_ATTEMPTS_EXHAUSTED',
  'ERR_UNKNOWN_TABLE',
  'ERR_USER_CODE',
  'ERR_MODULE_LOAD',
  'ERR_THREAD_EXITED',
  'ERR_RESOURCE_LIMIT',
  'ERR_PAYLOAD_TOO_LARGE',
  'ERR_CANCELED',
  'ERR_RUN_CANCELED',
  'ERR_INVALID_STATE',
  'ERR_TASK_ALREADY_CLAIMED',
  'ERR_TASK_NOT_CLAIMED',
  'ERR_TASK_NOT_FOUND',
  'ERR_RUN_NOT_FOUND',
  'ERR_RUN_NOT_YET_DUE',
  'ERR_DUPLICATE_RUN',
  'ERR_REPLICA_GAP',
  'ERR_BACKEND_UNAVAILABLE',
  'ERR_SCHEMA_VERSION',
] as const);
export type ErrorCode = (typeof errorCodes)[number];

const codeSet: ReadonlySet<string> = new Set(errorCodes);

/** `value` is one of tickpool's error codes. */
export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && codeSet.has(value);
}

export class TickpoolError extends Error {
  /** Stable, documented identifier of the failure kind. */
  readonly code: ErrorCode = 'ERR_TICKPOOL';
  /** Extra structured facts (ids, limits) for logs and callers. */
  readonly details: Readonly<Record<string, unknown>> | undefined;

  constructor(message: string, options?: { cause?: unknown; details?: Record<string, unknown> }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.details = options?.details;
  }
}

/** Short, safe description of any value for "expected …, got …" messages. */
export function describeValue(value: unknown): string {
  if (value === null) return '`null`';
  if (value === undefined) return '`undefined`';
  const kind = Array.isArray(value) ? 'array' : typeof value;
  let text: string;
  try {
    if (typeof value === 'string') text = JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
    else if (typeof value === 'function') text = `[function ${value.name || 'anonymous'}]`;
    else if (typeof value === 'symbol' || typeof value === 'bigint' || typeof value === 'number') text = String(value);
    else if (typeof value === 'object') {
      const json = JSON.stringify(value);
      text = json === undefined ? Object.prototype.toString.call(value) : json.length > 60 ? `${json.slice(0, 57)}...` : json;
    } else text = String(value);
  } catch {
    text = Object.prototype.toString.call(value);
  }
  return `\`${text}\` (${kind})`;
}

/**
 * An id or name for a message: a string in JSON quotes, anything else described. Ids reach these constructors from
 * callers (`releaseTask(42n)`), and building the error must never throw (`JSON.stringify` does for a BigInt).
 */
function quote(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : describeValue(value);
}

/** Bad input at a public entry point: a value of the wrong type or range. */
export class InvalidArgumentError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_INVALID_ARGUMENT';
  constructor(name: string, expected: string, received: unknown) {
    super(`Expected \`${name}\` to be ${expected}, got ${describeValue(received)}`, { details: { name, expected } });
  }
}

/** An option of `createEngine`, `EvalBroker`, `Backoff`, … is invalid. */
export class InvalidOptionError extends InvalidArgumentError {
  override readonly code: ErrorCode = 'ERR_INVALID_OPTION';
}

/** An evaluation handed to `enqueue` is malformed. */
export class InvalidEvaluationError extends InvalidArgumentError {
  override readonly code: ErrorCode = 'ERR_INVALID_EVALUATION';
}

/** A task handed to `claimTask`/`putTask` is malformed (including its `cron`/`every` schedule). */
export class InvalidTaskError extends InvalidArgumentError {
  override readonly code: ErrorCode = 'ERR_INVALID_TASK';
}

/** A plan submitted to the plan applier is malformed. */
export class InvalidPlanError extends InvalidArgumentError {
  override readonly code: ErrorCode = 'ERR_INVALID_PLAN';
}

/** The broker is disabled: enqueue throws, dequeue rejects, waiters are woken with this. */
export class BrokerDisabledError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_BROKER_DISABLED';
  constructor(operation: string) {
    super(`Expected the eval broker to be enabled for ${operation}, but it is disabled`);
  }
}

/** ack/nack/heartbeat for an evaluation that is not outstanding (never dequeued, already acked, or flushed). */
export class EvalNotOutstandingError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_EVAL_NOT_OUTSTANDING';
  constructor(evalId: string) {
    super(`Expected evaluation ${quote(evalId)} to be outstanding (dequeued and not yet acked), but it is not`, {
      details: { evalId },
    });
  }
}

/** ack/nack/heartbeat with a token that is not the one of the current delivery. */
export class TokenMismatchError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_TOKEN_MISMATCH';
  constructor(evalId: string, received: unknown) {
    super(
      `Expected the token of the current delivery of evaluation ${quote(evalId)}, got ${describeValue(received)}`,
      { details: { evalId } },
    );
  }
}

/** An ack arrived after the nack deadline fired: the nack won and the evaluation was redelivered or failed. */
export class NackTimeoutReachedError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_NACK_TIMEOUT_REACHED';
  constructor(evalId: string) {
    super(`Expected an ack of evaluation ${quote(evalId)} before its nack deadline, but the deadline had passed`, {
      details: { evalId },
    });
  }
}

/** A dequeue, a wait or an evaluation was aborted by its caller's `AbortSignal`; `cause` is the signal's reason. */
export class AbortedError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_ABORTED';
  constructor(operation: string, options?: { cause?: unknown }) {
    super(`Expected ${operation} to complete, but it was aborted by its signal`, options?.cause === undefined ? undefined : { cause: options.cause });
  }
}

/** An evaluation exceeded the delivery limit and was moved to the `_failed` queue. */
export class DeliveryLimitError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_DELIVERY_LIMIT';
  constructor(evalId: string, deliveries: number, limit: number) {
    super(
      `Expected evaluation ${quote(evalId)} to succeed within ${limit} deliveries, but it was delivered ${deliveries} times`,
      { details: { evalId, deliveries, limit } },
    );
  }
}

/**
 * A newer evaluation of the same job superseded this one before it ran (Nomad's cancelable evaluations): when the
 * job's evaluation in hand was acked, the best pending one was promoted and the others will never run.
 */
export class SupersededError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_SUPERSEDED';
  readonly evalId: string;
  /** The evaluation of the same job that was promoted instead. */
  readonly supersededBy: string;
  constructor(evalId: string, supersededBy: string) {
    super(`Expected evaluation ${quote(evalId)} to run, but evaluation ${quote(supersededBy)} of the same job superseded it`, {
      details: { evalId, supersededBy },
    });
    this.evalId = evalId;
    this.supersededBy = supersededBy;
  }
}

/** An evaluation's `type` has no registered scheduler; it is never executed. */
export class UnknownSchedulerError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_UNKNOWN_SCHEDULER';
  constructor(type: string, known: readonly string[]) {
    super(`Expected an evaluation type with a registered scheduler (${known.join(', ') || 'none registered'}), got ${quote(type)}`, {
      details: { type },
    });
  }
}

/** A task's `handler` names no registered handler module. */
export class UnknownHandlerError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_UNKNOWN_HANDLER';
  constructor(handler: string, known: readonly string[]) {
    super(`Expected a registered task handler (${known.join(', ') || 'none registered'}), got ${quote(handler)}`, {
      details: { handler },
    });
  }
}

/** `waitForIndex` gave up: the replica did not reach the index within the sync limit. */
export class SyncLimitError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_SYNC_LIMIT';
  constructor(index: number, applied: number, limitMs: number) {
    super(`Expected the replica to reach index ${index} within ${limitMs} ms, but it stayed at ${applied}`, {
      details: { index, applied, limitMs },
    });
  }
}

/** A plan's writes kept conflicting: the scheduler was re-run `maxPlanAttempts` times without a full commit. */
export class PlanAttemptsExhaustedError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_PLAN_ATTEMPTS_EXHAUSTED';
  constructor(evalId: string, attempts: number, reason: string) {
    super(`Expected the plan of evaluation ${quote(evalId)} to commit within ${attempts} attempts, but: ${reason}`, {
      details: { evalId, attempts },
    });
  }
}

/** A plan or a store write names a table that the state store does not have. */
export class UnknownTableError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_UNKNOWN_TABLE';
  constructor(table: unknown, known: readonly string[]) {
    super(`Expected a table of the state store (${known.join(', ') || 'none defined'}), got ${describeValue(table)}`, {
      details: { known },
    });
  }
}

/** User code (a scheduler or a task handler) threw or rejected; `cause` holds what it threw. */
export class UserCodeError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_USER_CODE';
}

/**
 * A registered scheduler or task handler module could not be loaded on a pool thread: importing it failed (a syntax
 * error, a missing dependency, a file type the thread cannot load, a throw at its top level) or it does not export a
 * function under its export name. `cause` holds the load error; `details` names the module.
 */
export class ModuleLoadError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_MODULE_LOAD';
  constructor(module: { kind: 'scheduler' | 'handler'; name: string; url: string; exportName: string; threadIndex: number }, cause: unknown) {
    const reason = cause instanceof Error ? cause.message : describeValue(cause);
    super(
      `Expected the ${module.kind} module of ${quote(module.name)} (${module.url}, export \`${module.exportName}\`) to load on pool thread ${module.threadIndex}, but it failed: ${reason}`,
      { cause, details: { ...module } },
    );
  }
}

/** A pool thread exited or was terminated while it held work. */
export class ThreadExitedError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_THREAD_EXITED';
}

/** A thread exceeded a `resourceLimits` bound and was stopped. */
export class ResourceLimitError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_RESOURCE_LIMIT';
}

/** An evaluation payload is larger than `maxPayloadBytes`. */
export class PayloadTooLargeError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_PAYLOAD_TOO_LARGE';
  constructor(bytes: number, limit: number) {
    super(`Expected a payload of at most ${limit} bytes, got ${bytes} bytes`, { details: { bytes, limit } });
  }
}

/** Work canceled on request (cooperatively or by terminating its thread). */
export class CanceledError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_CANCELED';
}

/** A task run was canceled; `RunPromise.wait()` rejects with this after `cancel()`. */
export class RunCanceledError extends CanceledError {
  override readonly code: ErrorCode = 'ERR_RUN_CANCELED';
  constructor(taskId: string, runId: string) {
    super(`Run ${quote(runId)} of task ${quote(taskId)} was canceled`, { details: { taskId, runId } });
  }
}

/** The engine (or a component) is not in a state that allows the call. */
export class InvalidStateError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_INVALID_STATE';
}

/** `claimTask` of a task id that is already claimed. */
export class TaskAlreadyClaimedError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_TASK_ALREADY_CLAIMED';
  constructor(taskId: string) {
    super(`Expected task ${quote(taskId)} to be unclaimed, but it is already claimed`, { details: { taskId } });
  }
}

/** `releaseTask` (or a manual run) of a task id that is not claimed. */
export class TaskNotClaimedError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_TASK_NOT_CLAIMED';
  constructor(taskId: string) {
    super(`Expected task ${quote(taskId)} to be claimed, but it is not`, { details: { taskId } });
  }
}

/** A task id that the desired state does not know. */
export class TaskNotFoundError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_TASK_NOT_FOUND';
  constructor(taskId: string) {
    super(`Expected a known task id, got ${quote(taskId)}`, { details: { taskId } });
  }
}

/** A run id that the run log does not know. */
export class RunNotFoundError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_RUN_NOT_FOUND';
  constructor(taskId: string, runId: string) {
    super(`Expected a known run of task ${quote(taskId)}, got run id ${quote(runId)}`, {
      details: { taskId, runId },
    });
  }
}

/** `createNextRun` found no run due yet; `dueAt` is when the next one is. */
export class RunNotYetDueError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_RUN_NOT_YET_DUE';
  readonly dueAt: number;
  constructor(dueAt: number) {
    super(`Expected a run to be due, but the next one is due at ${RunNotYetDueError.#when(dueAt)}`, { details: { dueAt } });
    this.dueAt = dueAt;
  }

  /** ISO time, or the number itself beyond what a `Date` holds (±8.64e15 ms), where `toISOString` throws. */
  static #when(dueAt: number): string {
    const date = new Date(dueAt);
    return Number.isNaN(date.getTime()) ? String(dueAt) : date.toISOString();
  }
}

/** A run for the same task and `scheduledFor` already exists. */
export class DuplicateRunError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_DUPLICATE_RUN';
  constructor(taskId: string, scheduledFor: number) {
    super(`Expected one run per scheduled time, but task ${quote(taskId)} already has a run for ${scheduledFor}`, {
      details: { taskId, scheduledFor },
    });
  }
}

/** Plain, structured-cloneable form of an error, for messages between threads. */
export interface WireError {
  readonly name: string;
  readonly code: string | undefined;
  readonly message: string;
  readonly stack: string | undefined;
  readonly details: Record<string, unknown> | undefined;
}

export function toWire(error: unknown): WireError {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    const details = (error as { details?: unknown }).details;
    return {
      name: error.name,
      code: typeof code === 'string' ? code : undefined,
      message: error.message,
      stack: error.stack,
      details: details !== null && typeof details === 'object' ? (details as Record<string, unknown>) : undefined,
    };
  }
  return { name: 'Error', code: undefined, message: describeValue(error), stack: undefined, details: undefined };
}

/**
 * An error rebuilt from its wire form: keeps name, message and the remote stack. `code` is the remote error's code
 * when it is a tickpool code (a `CanceledError` or `SyncLimitError` thrown on a thread), `ERR_USER_CODE` otherwise;
 * `remoteCode` is the thrower's own `code`, whatever it was (`ENOENT`, `E_MY_APP`), or `undefined`.
 */
export class RemoteError extends TickpoolError {
  override readonly code: ErrorCode;
  readonly remoteCode: string | undefined;
  constructor(wire: WireError) {
    super(wire.message, wire.details === undefined ? undefined : { details: wire.details });
    this.name = wire.name;
    this.code = isErrorCode(wire.code) ? wire.code : 'ERR_USER_CODE';
    this.remoteCode = wire.code;
    if (wire.stack !== undefined) this.stack = wire.stack;
  }
}

export function fromWire(wire: WireError): TickpoolError {
  return new RemoteError(wire);
}

/**
 * A replica received a change set that does not follow the last one it applied: it missed at least one and must be
 * reset from a full copy of the state (`StateStore.full()`), or caught up with `StateStore.changesSince()`.
 */
export class ReplicaGapError extends InvalidStateError {
  override readonly code: ErrorCode = 'ERR_REPLICA_GAP';
  constructor(appliedIndex: number, received: number) {
    super(`Expected the change set at index ${appliedIndex + 1} (the replica is at ${appliedIndex}), got index ${received}`, {
      details: { appliedIndex, received },
    });
  }
}

/**
 * A shared backend could not reach its store: the database refused or dropped the connection, or did not answer.
 * `cause` is the driver's error. A call that rejects with it was not applied twice; whether it was applied at all is
 * said by its own contract (an enqueue's `accepted` rejects: not admitted; an ack is resolved by re-reading).
 */
export class BackendUnavailableError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_BACKEND_UNAVAILABLE';
}

/**
 * The database's schema is one this code must not touch: migrated by newer code (`reason: 'newer'`), or made by the
 * migrations of a pre-release tickpool, which recorded no migration names (`reason: 'pre-release'`), whose schema
 * can only be dropped and made again.
 */
export class SchemaVersionError extends TickpoolError {
  override readonly code: ErrorCode = 'ERR_SCHEMA_VERSION';
  constructor(schema: string, found: number, supported: number, reason: 'newer' | 'pre-release' = 'newer') {
    super(
      reason === 'newer'
        ? `Expected schema ${JSON.stringify(schema)} at version ${supported} or older, got version ${found} (migrated by newer code)`
        : `Expected schema ${JSON.stringify(schema)} made by this release's migrations (version ${supported}), got a schema at version ${found} made by a pre-release tickpool: drop it (DROP SCHEMA "${schema}" CASCADE) and start again`,
      { details: { schema, found, supported, reason } },
    );
  }
}
