import { describeValue, InvalidPlanError, UnknownTableError, UserCodeError } from '../errors.js';
import { assertKey } from '../storable-key.js';
import type { EvaluatePlan, Plan, PlanWrite, Snapshot } from './types.js';
import { planWrite, sealedOf } from './sealed.js';
import { ownValue } from './values.js';

export const planDefaults = Object.freeze({ priority: 50, minPriority: 1, maxPriority: 100 });

/** One write as validated. */
export interface CheckedWrite {
  /**
   * A frozen copy with every field read exactly once from the caller's object and the value owned by the store:
   * what commits, and what `evaluatePlan` is shown, whatever the caller does with its plan after `submit()`.
   */
  readonly write: PlanWrite;
  /** The caller's write object, which `PlanResult.rejected` reports. */
  readonly original: PlanWrite;
}

/** A plan after validation: frozen copies of everything the applier reads, priority resolved. */
export interface CheckedPlan {
  readonly evalId: string | undefined;
  readonly priority: number;
  readonly allAtOnce: boolean;
  readonly writes: readonly CheckedWrite[];
}

/**
 * Validates a submitted plan completely before it is queued, so that applying it cannot fail on bad input halfway
 * through a transaction. Each field is read once, into frozen copies that the applier uses from then on (values are
 * copied too, which also proves they are structured-cloneable): a scheduler that mutates its plan after submitting
 * (its writes, their fields, the array) cannot change what gets committed, nor make a checked write fail later.
 */
export function checkPlan(plan: unknown, tables: readonly string[]): CheckedPlan {
  if (plan === null || typeof plan !== 'object' || Array.isArray(plan)) {
    throw new InvalidPlanError('plan', 'an object `{ writes, priority?, allAtOnce?, evalId? }`', plan);
  }
  const p = plan as Plan;
  const evalId: unknown = p.evalId;
  if (evalId !== undefined && typeof evalId !== 'string') throw new InvalidPlanError('plan.evalId', 'a string', evalId);
  const givenPriority: unknown = p.priority;
  const priority = givenPriority ?? planDefaults.priority;
  if (!Number.isInteger(priority) || (priority as number) < planDefaults.minPriority || (priority as number) > planDefaults.maxPriority) {
    throw new InvalidPlanError('plan.priority', `an integer from ${planDefaults.minPriority} to ${planDefaults.maxPriority}`, givenPriority);
  }
  const allAtOnce: unknown = p.allAtOnce;
  if (allAtOnce !== undefined && typeof allAtOnce !== 'boolean') throw new InvalidPlanError('plan.allAtOnce', 'a boolean', allAtOnce);
  const given: unknown = p.writes;
  if (!Array.isArray(given)) throw new InvalidPlanError('plan.writes', 'an array of writes', given);
  // A copy of the array first: its length and elements are read once, whatever getters or later pushes do.
  const originals = Array.from(given as readonly unknown[]);
  const seen = new Map<string, Set<string>>();
  const writes: CheckedWrite[] = [];
  for (let i = 0; i < originals.length; i++) {
    const write = originals[i];
    const name = `plan.writes[${i}]`;
    if (write === null || typeof write !== 'object') {
      throw new InvalidPlanError(name, 'a write `{ table, key, value | delete: true, readIndex }`', write);
    }
    const w = write as PlanWrite;
    const table: unknown = w.table;
    const key: unknown = w.key;
    const readIndex: unknown = w.readIndex;
    const del: unknown = w.delete;
    // A sealed value (a plan's, from a pool thread) is read from its bytes only where someone reads it.
    const sealed = sealedOf(w);
    const value: unknown = sealed ?? w.value;
    if (typeof table !== 'string' || !tables.includes(table)) throw new UnknownTableError(table, tables);
    // A key either backend can hold exactly (storable-key.ts): checked here, so that one bad write refuses its own
    // plan at submit and never reaches a commit batch that other plans share.
    assertKey(`${name}.key`, key, InvalidPlanError);
    if (!Number.isSafeInteger(readIndex) || (readIndex as number) < 0) {
      throw new InvalidPlanError(`${name}.readIndex`, 'the modifyIndex that was read (an integer >= 0, 0 for "absent")', readIndex);
    }
    if (del !== undefined && typeof del !== 'boolean') throw new InvalidPlanError(`${name}.delete`, 'a boolean', del);
    let copy: PlanWrite;
    if (del === true) {
      if (value !== undefined) throw new InvalidPlanError(`${name}.value`, '`undefined` in a delete', value);
      copy = { table, key, delete: true, readIndex: readIndex as number };
    } else {
      copy = planWrite(table, key, sealed ?? ownValue(value, `${name}.value`, InvalidPlanError), readIndex as number);
    }
    let keys = seen.get(table);
    if (keys === undefined) seen.set(table, (keys = new Set()));
    if (keys.has(key)) {
      throw new InvalidPlanError(name, `the only write of ${table}/${key} in the plan (one write per record)`, write);
    }
    keys.add(key);
    writes.push(Object.freeze({ write: Object.freeze(copy), original: w }));
  }
  return Object.freeze({
    evalId: evalId as string | undefined,
    priority: priority as number,
    allAtOnce: allAtOnce === true,
    writes: Object.freeze(writes),
  });
}

/**
 * The optimistic-concurrency check of a plan's writes against the state they would commit on: a write whose record
 * no longer has the `modifyIndex` the scheduler read (0: absent) conflicts. `rejected` has one flag per write, true
 * for each conflict; `conflicts` counts them. Both committers run it first, before `evaluatePlan` and all-at-once.
 */
export function checkVersions(state: Pick<Snapshot, 'get'>, writes: readonly PlanWrite[]): { rejected: boolean[]; conflicts: number } {
  const rejected = new Array<boolean>(writes.length).fill(false);
  let conflicts = 0;
  for (let i = 0; i < writes.length; i++) {
    const w = writes[i]!;
    if ((state.get(w.table, w.key)?.modifyIndex ?? 0) !== w.readIndex) {
      rejected[i] = true;
      conflicts++;
    }
  }
  return { rejected, conflicts };
}

/**
 * Runs the user's `evaluatePlan` on the writes that survived the version check (`rejected[i]` false), marks the ones
 * it rejects and answers how many it newly rejected. The plan it is shown is built from the checked copies, never
 * from the caller's plan object, which may have changed since. Writes are matched by record (table and key), so a
 * check may return copies, and a write it names twice is rejected once. `afterCall` runs once the check returned,
 * before its answer is read. Throws `UserCodeError` when the check throws, answers something other than an array
 * or nothing, or names a write that is not in the plan it was shown.
 */
export function runEvaluatePlan(
  evaluate: EvaluatePlan,
  snapshot: Snapshot,
  checked: CheckedPlan,
  writes: readonly PlanWrite[],
  rejected: boolean[],
  afterCall?: () => void,
): number {
  const { evalId } = checked;
  const plan: Plan = Object.freeze({
    ...(evalId === undefined ? {} : { evalId }),
    priority: checked.priority,
    allAtOnce: checked.allAtOnce,
    writes: Object.freeze(writes.filter((_, i) => !rejected[i])),
  });
  let verdict: unknown;
  try {
    verdict = evaluate(snapshot, plan);
  } catch (error) {
    throw new UserCodeError(`Expected evaluatePlan to return the writes to reject, but it threw: ${error instanceof Error ? error.message : describeValue(error)}`, {
      cause: error,
      details: { evalId },
    });
  }
  afterCall?.();
  if (verdict === undefined) return 0;
  if (!Array.isArray(verdict)) {
    throw new UserCodeError(`Expected evaluatePlan to return an array of writes to reject or nothing, got ${describeValue(verdict)}`, {
      details: { evalId },
    });
  }
  const positions = new Map<string, Map<string, number>>();
  for (let i = 0; i < writes.length; i++) {
    if (rejected[i]) continue;
    const w = writes[i]!;
    let keys = positions.get(w.table);
    if (keys === undefined) positions.set(w.table, (keys = new Map()));
    keys.set(w.key, i);
  }
  let count = 0;
  for (const reject of verdict as unknown[]) {
    const r = reject as Partial<PlanWrite> | null;
    const i = r === null || typeof r !== 'object' ? undefined : positions.get(r.table as string)?.get(r.key as string);
    if (i === undefined) {
      throw new UserCodeError(`Expected evaluatePlan to return writes of the plan it was given, got ${describeValue(reject)}`, {
        details: { evalId },
      });
    }
    if (!rejected[i]) {
      rejected[i] = true;
      count++;
    }
  }
  return count;
}
