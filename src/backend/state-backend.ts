/**
 * The state seams: the versioned state store as this process sees it (`StateBackend`, whose change stream feeds the
 * pool threads' replicas through `ChangeFeed`), and its one committer of plans (`PlanBackend`). `StateStore` and
 * `PlanApplier` are the in-memory implementations; a shared store (PostgreSQL) keeps the tables and the change log
 * in its database and a replica of them in each process, which every read here comes from.
 *
 * Invariants every implementation keeps:
 * - Indexes are gap-free and in commit order: every commit that changes something gets the next index, and the
 *   change stream delivers each change set once, in index order.
 * - Reads (`index`, `snapshot()`, `full()`) are this process's replica and synchronous: a snapshot is immutable and
 *   at one index; a replica may be behind the store (`waitForIndex` waits for it to catch up).
 * - A plan write commits only if its record still has the `modifyIndex` the scheduler read (optimistic
 *   concurrency), checked in the commit itself; a plan of a delivery commits only while that delivery is current.
 */
import type { DeliveryRef } from './broker-backend.js';
import type { AckResult } from '../broker/outcome-waiters.js';
import type { ChangeSet, Plan, PlanResult, Snapshot, WriteTxn } from '../state/types.js';
import type { MaybePromise } from '../tasks/maybe-promise.js';

/**
 * The change stream the pool threads' replicas are fed from. Synchronous throughout: it is this process's replica.
 * `index` moves only with a change set delivered to the listeners (the pool publishes each one's index to the
 * threads, which is how a thread knows its replica is behind). A feed may jump (skip indexes) when its replica was
 * reloaded: it then delivers one change set at the new index, and a consumer whose copy has a gap reseeds itself
 * from `full()` (the pool does: the thread's replica reports the gap and is reset).
 */
export interface ChangeFeed {
  /** Index of the last change set this process's replica applied (0 for an empty store). */
  readonly index: number;
  /**
   * Every change set the replica applies from now on, in index order, synchronously after it applied it. A throwing
   * listener is logged and affects neither the commit nor other listeners. Returns the unsubscribe.
   */
  onChange(listener: (change: ChangeSet) => void): () => void;
  /** The whole replica at `index` as one change set of puts (seeds a thread's replica). */
  full(): ChangeSet;
}

export interface StateBackend extends ChangeFeed {
  /** The replica as of now: immutable, at `index`. */
  snapshot(): Snapshot;
  /** The table names, fixed for the store's lifetime. */
  tables(): readonly string[];
  /**
   * Runs `fn` (synchronous; reads see the replica plus the transaction's own writes) as one transaction and answers
   * with the committed change set: `index` is its commit index, or the current index with no `changes` when `fn`
   * changed nothing. A direct write is not version-checked (last writer wins); plans are. Throws what `fn` throws
   * and commits nothing; `InvalidArgumentError` for a non-function or an async `fn`; `InvalidStateError` when
   * nested. In memory it commits and reaches change listeners before it returns; a shared store resolves after its
   * commit and the replica then shows it (`waitForIndex(result.index)` has already resolved).
   */
  write(fn: (txn: WriteTxn) => void): MaybePromise<ChangeSet>;
  /**
   * Resolves once this process's replica is at `index` or beyond (at once when it is already). Rejects with
   * `AbortedError` when `signal` aborts, `InvalidArgumentError` for an index that is not an integer >= 0.
   */
  waitForIndex(index: number, signal?: AbortSignal): MaybePromise<void>;
}

/**
 * A plan from the scheduler of a delivery. The commit is fenced by the delivery: it commits only while `token` is
 * the evaluation's current delivery, checked in the commit (a process cut off past its lease commits nothing after
 * the redelivery started). `ack`, when given, asks the backend to ack the delivery with it in the same commit when
 * every write commits (`PlanOutcome.acked`); a backend that does not is free to leave the ack to the caller.
 */
export interface PlanDelivery extends DeliveryRef {
  readonly ack?: Omit<AckResult, 'index'>;
}

/** What was committed; `acked` is true when the backend acked the delivery in the commit (see `PlanDelivery.ack`). */
export interface PlanOutcome extends PlanResult {
  readonly acked?: boolean;
}

export interface PlanBackend {
  /** Plans queued and not yet applied (this process's). */
  readonly depth: number;
  /**
   * Queues a plan and resolves with what was committed: plans are applied one at a time in priority order (equal
   * priorities in arrival order), each write checked against the committed record's `modifyIndex` and the optional
   * `evaluatePlan` in the same commit. A malformed plan (`InvalidPlanError`, `UnknownTableError`) or a stopped
   * backend (`InvalidStateError`) rejects and queues nothing; a throwing `evaluatePlan` rejects this one plan with
   * `UserCodeError`. With `delivery`, a delivery that is no longer current rejects with the broker's token refusal
   * (`NackTimeoutReachedError`, `TokenMismatchError`, `EvalNotOutstandingError`) and commits nothing. A shared store
   * resolves a cut-off commit by the plan's identity (did it land?), never by committing it twice.
   */
  submit(plan: Plan, delivery?: PlanDelivery): Promise<PlanOutcome>;
}
