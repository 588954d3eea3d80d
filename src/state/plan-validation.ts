import { InvalidPlanError, UnknownTableError } from '../errors.js';
import type { Plan, PlanWrite } from './types.js';
import { cloneableHint, ownValue } from './values.js';

export const planDefaults = Object.freeze({ priority: 50, minPriority: 1, maxPriority: 100 });

/** A plan after validation: values owned by the store, priority resolved. `writes` are the caller's objects. */
export interface CheckedPlan {
  readonly plan: Plan;
  readonly priority: number;
  readonly writes: readonly PlanWrite[];
  /** Owned values, parallel to `writes` (undefined for deletes). */
  readonly values: readonly unknown[];
}

/**
 * Validates a submitted plan completely before it is queued, so that applying it cannot fail on bad input halfway
 * through a transaction. Values are copied here (proving they are structured-cloneable), which also means a
 * scheduler that mutates its plan after submitting cannot change what gets committed.
 */
export function checkPlan(plan: unknown, tables: readonly string[]): CheckedPlan {
  if (plan === null || typeof plan !== 'object' || Array.isArray(plan)) {
    throw new InvalidPlanError('plan', 'an object `{ writes, priority?, allAtOnce?, evalId? }`', plan);
  }
  const p = plan as Plan;
  if (p.evalId !== undefined && typeof p.evalId !== 'string') throw new InvalidPlanError('plan.evalId', 'a string', p.evalId);
  const priority = p.priority ?? planDefaults.priority;
  if (!Number.isInteger(priority) || priority < planDefaults.minPriority || priority > planDefaults.maxPriority) {
    throw new InvalidPlanError('plan.priority', `an integer from ${planDefaults.minPriority} to ${planDefaults.maxPriority}`, p.priority);
  }
  if (p.allAtOnce !== undefined && typeof p.allAtOnce !== 'boolean') {
    throw new InvalidPlanError('plan.allAtOnce', 'a boolean', p.allAtOnce);
  }
  if (!Array.isArray(p.writes)) throw new InvalidPlanError('plan.writes', 'an array of writes', p.writes);
  const seen = new Map<string, Set<string>>();
  const values: unknown[] = [];
  for (let i = 0; i < p.writes.length; i++) {
    const write: unknown = p.writes[i];
    const name = `plan.writes[${i}]`;
    if (write === null || typeof write !== 'object') {
      throw new InvalidPlanError(name, 'a write `{ table, key, value | delete: true, readIndex }`', write);
    }
    const w = write as PlanWrite;
    if (!tables.includes(w.table)) throw new UnknownTableError(w.table, tables);
    if (typeof w.key !== 'string' || w.key.length === 0) throw new InvalidPlanError(`${name}.key`, 'a non-empty string', w.key);
    if (!Number.isSafeInteger(w.readIndex) || w.readIndex < 0) {
      throw new InvalidPlanError(`${name}.readIndex`, 'the modifyIndex that was read (an integer >= 0, 0 for "absent")', w.readIndex);
    }
    if (w.delete !== undefined && typeof w.delete !== 'boolean') throw new InvalidPlanError(`${name}.delete`, 'a boolean', w.delete);
    if (w.delete === true) {
      if (w.value !== undefined) throw new InvalidPlanError(`${name}.value`, '`undefined` in a delete', w.value);
      values.push(undefined);
    } else {
      try {
        values.push(ownValue(w.value, `${name}.value`));
      } catch {
        throw new InvalidPlanError(`${name}.value`, cloneableHint, w.value);
      }
    }
    let keys = seen.get(w.table);
    if (keys === undefined) seen.set(w.table, (keys = new Set()));
    if (keys.has(w.key)) {
      throw new InvalidPlanError(name, `the only write of ${w.table}/${w.key} in the plan (one write per record)`, write);
    }
    keys.add(w.key);
  }
  return { plan: p, priority, writes: p.writes, values };
}
