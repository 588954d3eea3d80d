import type { PlanBackend, PlanDelivery, PlanOutcome } from '../backend/state-backend.js';
import type { Clock } from '../clock.js';
import { InvalidArgumentError, InvalidOptionError, InvalidStateError, UserCodeError } from '../errors.js';
import { createDefaultLogger, isLogger, type Logger } from '../observability/logger.js';
import { isRegistry, Registry } from '../observability/metrics.js';
import { planMetrics, type PlanMetrics } from './plan-metrics.js';
import { PlanQueue, type Queued } from './plan-queue.js';
import { checkPlan, checkVersions, runEvaluatePlan, type CheckedPlan } from './plan-validation.js';
import { storedValue } from './sealed.js';
import { StateStore } from './state-store.js';
import type { EvaluatePlan, Plan, PlanResult, PlanWrite, Snapshot } from './types.js';

export interface PlanApplierOptions {
  readonly state: StateStore;
  /** Extra check after the version check (Nomad's per-node fit check); returns the writes to reject. */
  readonly evaluatePlan?: EvaluatePlan;
  /** Where the `tickpool_plan_*` metrics go. Default: a private registry. */
  readonly registry?: Registry;
  readonly logger?: Logger;
  /**
   * Times the evaluate and apply histograms. Default: `performance.now()`, because plans take microseconds and a
   * millisecond clock would record zeros; inject a `ManualClock` to make the observed durations deterministic.
   */
  readonly clock?: Clock;
  /**
   * Who says whether a plan's delivery is still current (the broker: `EvalBroker.assertCurrent`). A plan submitted
   * with its delivery is checked here right before its version check, in the same synchronous apply: one whose
   * delivery is no longer current commits nothing. Without a fence, a plan's delivery is not checked.
   */
  readonly fence?: DeliveryFence;
}

/** Throws the broker's typed refusal unless `token` is the evaluation's current delivery. */
export interface DeliveryFence {
  assertCurrent(evaluationId: string, token: string): void;
}

interface Pending extends Queued {
  readonly checked: CheckedPlan;
  readonly delivery: PlanDelivery | undefined;
  readonly resolve: (result: PlanResult) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * The single, serialized committer of plans (Nomad's plan queue and plan applier in one).
 *
 * Plans wait in a queue ordered by priority, then arrival, and are applied one at a time in a microtask after the
 * submitting code yields: plans submitted in the same tick are therefore ordered by priority, not by call order.
 * Applying a plan is synchronous (version check, `evaluatePlan`, one transaction), so no other write can slip in
 * between the check of a plan and its commit. This is what makes the optimistic concurrency of the schedulers safe:
 * a write commits only if the record still has the `modifyIndex` the scheduler read. The in-memory `PlanBackend`;
 * it never acks in the commit (`PlanOutcome.acked` is absent): the worker acks once the plan has committed.
 */
export class PlanApplier implements PlanBackend {
  readonly #state: StateStore;
  readonly #evaluate: EvaluatePlan | undefined;
  readonly #fence: DeliveryFence | undefined;
  readonly #metrics: PlanMetrics;
  readonly #logger: Logger;
  readonly #seconds: () => number;
  readonly #queue = new PlanQueue<Pending>();
  #seq = 0;
  #scheduled = false;
  #stopped = false;

  constructor(options: PlanApplierOptions) {
    if (options === null || typeof options !== 'object') throw new InvalidOptionError('options', 'an object with `state`', options);
    const { state, evaluatePlan, registry, logger, clock, fence } = options;
    if (!(state instanceof StateStore)) throw new InvalidOptionError('state', 'a StateStore', state);
    if (evaluatePlan !== undefined && typeof evaluatePlan !== 'function') {
      throw new InvalidOptionError('evaluatePlan', 'a function `(snapshot, plan) => writesToReject | undefined`', evaluatePlan);
    }
    if (registry !== undefined && !isRegistry(registry)) throw new InvalidOptionError('registry', 'a prom-client Registry', registry);
    if (logger !== undefined && !isLogger(logger)) throw new InvalidOptionError('logger', 'a pino-compatible logger', logger);
    if (clock !== undefined && (clock === null || typeof clock !== 'object' || typeof clock.now !== 'function')) {
      throw new InvalidOptionError('clock', 'a Clock', clock);
    }
    if (fence !== undefined && (fence === null || typeof fence !== 'object' || typeof fence.assertCurrent !== 'function')) {
      throw new InvalidOptionError('fence', 'a DeliveryFence { assertCurrent(evaluationId, token) } or undefined', fence);
    }
    this.#state = state;
    this.#evaluate = evaluatePlan;
    this.#fence = fence;
    this.#logger = logger ?? createDefaultLogger('tickpool:plan-applier');
    this.#seconds = clock === undefined ? () => performance.now() / 1000 : () => clock.now() / 1000;
    this.#metrics = planMetrics(registry ?? new Registry());
    this.#metrics.trackDepth(this);
  }

  /** Plans queued and not yet applied. */
  get depth(): number {
    return this.#queue.size;
  }

  /**
   * Queues a plan and resolves with what was committed. A malformed plan (`InvalidPlanError`, `UnknownTableError`)
   * or a stopped applier (`InvalidStateError`) gives an already rejected promise and queues nothing. A throwing
   * `evaluatePlan` rejects this submission with `UserCodeError`, commits nothing, and the applier carries on. With
   * `delivery`, the fence checks it at apply time: one no longer current rejects with the broker's refusal.
   */
  submit(plan: Plan, delivery?: PlanDelivery): Promise<PlanOutcome> {
    if (this.#stopped) return Promise.reject(stoppedError());
    let checked: CheckedPlan;
    try {
      checked = checkPlan(plan, this.#state.tables());
      if (delivery !== undefined) checkDelivery(delivery);
    } catch (error) {
      return Promise.reject(error);
    }
    this.#metrics.submitted.inc();
    return new Promise<PlanResult>((resolve, reject) => {
      this.#queue.push({ priority: checked.priority, seq: this.#seq++, checked, delivery, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        queueMicrotask(() => this.#drain());
      }
    });
  }

  /** Stops accepting plans and rejects every queued one with `InvalidStateError`. A plan being applied completes. */
  stop(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const pending of this.#queue.drain()) pending.reject(stoppedError());
  }

  #drain(): void {
    try {
      // Plans submitted while draining (from evaluatePlan or a change listener) join this same loop in order.
      while (!this.#stopped) {
        const next = this.#queue.pop();
        if (next === undefined) break;
        try {
          if (next.delivery !== undefined) this.#fence?.assertCurrent(next.delivery.evaluationId, next.delivery.token);
        } catch (error) {
          // The evaluation belongs to its redelivery now: not a failure of the applier.
          this.#logger.debug({ err: error, evalId: next.delivery!.evaluationId }, 'plan of a stale delivery not applied');
          next.reject(error);
          continue;
        }
        try {
          next.resolve(this.#apply(next.checked));
        } catch (error) {
          this.#logger.warn({ err: error, evalId: next.checked.evalId }, 'plan not applied');
          next.reject(error);
        }
      }
    } finally {
      this.#scheduled = false;
    }
  }

  #apply(checked: CheckedPlan): PlanResult {
    const { evalId, allAtOnce } = checked;
    const writes = checked.writes.map((c) => c.write);
    const started = this.#seconds();
    const snapshot = this.#state.snapshot();
    const { rejected, conflicts } = checkVersions(snapshot, writes);
    let evaluated = 0;
    const survivors = writes.length - conflicts;
    if (this.#evaluate !== undefined && survivors > 0 && !(allAtOnce && conflicts > 0)) {
      evaluated = this.#runEvaluate(snapshot, checked, writes, rejected);
    }
    let gang = 0;
    if (allAtOnce && conflicts + evaluated > 0) {
      gang = writes.length - conflicts - evaluated;
      rejected.fill(true);
    }
    const evaluatedAt = this.#seconds();
    this.#metrics.evaluateSeconds.observe(evaluatedAt - started);

    let index = 0;
    if (conflicts + evaluated + gang < writes.length) {
      const committed = this.#state.write((txn) => {
        for (let i = 0; i < writes.length; i++) {
          if (rejected[i]) continue;
          const w = writes[i]!;
          if (w.delete === true) txn.delete(w.table, w.key);
          else txn.put(w.table, w.key, storedValue(w));
        }
      });
      // Deleting records that were already absent commits nothing: report 0, there is no index to wait for.
      if (committed.changes.length > 0) index = committed.index;
      this.#metrics.applySeconds.observe(this.#seconds() - evaluatedAt);
    }

    if (conflicts > 0) this.#metrics.rejectedWrites.inc({ reason: 'conflict' }, conflicts);
    if (evaluated > 0) this.#metrics.rejectedWrites.inc({ reason: 'evaluate' }, evaluated);
    if (gang > 0) this.#metrics.rejectedWrites.inc({ reason: 'all_at_once' }, gang);
    // The caller's own write objects, as documented; what was checked and applied are the copies.
    const rejectedWrites = checked.writes.filter((_, i) => rejected[i]).map((c) => c.original);
    // After a rejection the scheduler must re-plan against a state that includes this commit and whatever made its
    // writes conflict: the store index now covers both (Nomad: max of the refresh index and the commit index).
    const refreshIndex = rejectedWrites.length > 0 ? this.#state.index : 0;
    if (rejectedWrites.length > 0) {
      this.#logger.debug({ evalId, index, refreshIndex, conflicts, evaluated, gang }, 'plan partially rejected');
    }
    return Object.freeze({ index, rejected: Object.freeze(rejectedWrites), refreshIndex });
  }

  /** `runEvaluatePlan`, refusing a check that wrote to the store: the version check ran against the state before it. */
  #runEvaluate(snapshot: Snapshot, checked: CheckedPlan, writes: readonly PlanWrite[], rejected: boolean[]): number {
    const indexBefore = this.#state.index;
    return runEvaluatePlan(this.#evaluate!, snapshot, checked, writes, rejected, () => {
      if (this.#state.index === indexBefore) return;
      // Committing now could lose an update.
      throw new UserCodeError(
        `Expected evaluatePlan to only read the state, but the store moved from index ${indexBefore} to ${this.#state.index} while it ran`,
        { details: { evalId: checked.evalId } },
      );
    });
  }
}

function checkDelivery(delivery: unknown): void {
  const d = delivery as Partial<PlanDelivery> | null;
  if (d === null || typeof d !== 'object' || typeof d.evaluationId !== 'string' || d.evaluationId === '' || typeof d.token !== 'string') {
    throw new InvalidArgumentError('delivery', 'a delivery { evaluationId, token } or undefined', delivery);
  }
}

function stoppedError(): InvalidStateError {
  return new InvalidStateError('Expected a running plan applier, but it was stopped');
}
