import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { PlanApplier } from '../../src/state/plan-applier.js';
import { Replica } from '../../src/state/replica.js';
import { StateStore } from '../../src/state/state-store.js';
import type { PlanResult, PlanWrite, Snapshot } from '../../src/state/types.js';
import { captureLogger, dump } from './helpers.js';

/**
 * Random interleavings of plans and direct writes, checked against a model of the optimistic-concurrency rule:
 * a plan write commits only if the record's modifyIndex at apply time equals the write's readIndex (no lost update),
 * plans of one tick are applied by priority then arrival, and a replica fed by the change stream equals the store
 * at every index.
 */

const tables = ['nodes', 'allocs'] as const;
const keys = ['a', 'b', 'c', 'd'] as const;

type Op = { readonly table: (typeof tables)[number]; readonly key: (typeof keys)[number]; readonly value: number | undefined };
type ReadFrom = { kind: 'now' } | { kind: 'tickStart' } | { kind: 'fixed'; index: number };
type Action =
  | { readonly kind: 'direct'; readonly ops: readonly Op[] }
  | {
      readonly kind: 'plan';
      readonly priority: number;
      readonly allAtOnce: boolean;
      readonly writes: ReadonlyArray<Op & { readonly read: ReadFrom }>;
    };

const opArb = fc.record({
  table: fc.constantFrom(...tables),
  key: fc.constantFrom(...keys),
  // undefined = delete
  value: fc.option(fc.integer({ min: 0, max: 30 }), { nil: undefined, freq: 4 }),
});
const readArb: fc.Arbitrary<ReadFrom> = fc.oneof(
  { weight: 5, arbitrary: fc.constant({ kind: 'now' as const }) },
  { weight: 3, arbitrary: fc.constant({ kind: 'tickStart' as const }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 6 }).map((index) => ({ kind: 'fixed' as const, index })) },
);
const recordKey = (op: { table: string; key: string }): string => `${op.table}/${op.key}`;
const actionArb: fc.Arbitrary<Action> = fc.oneof(
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('direct' as const), ops: fc.array(opArb, { minLength: 1, maxLength: 3 }) }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('plan' as const),
      priority: fc.constantFrom(10, 50, 50, 90),
      allAtOnce: fc.boolean(),
      writes: fc.uniqueArray(fc.record({ table: fc.constantFrom(...tables), key: fc.constantFrom(...keys), value: opArb.map((o) => o.value), read: readArb }), {
        maxLength: 4,
        selector: recordKey,
      }),
    }),
  },
);

interface ModelRecord {
  readonly value: number;
  readonly createIndex: number;
  readonly modifyIndex: number;
}

/** The reference: a plain Map and the rules written out the simplest way. */
class Model {
  index = 0;
  readonly records = new Map<string, ModelRecord>();

  modifyIndex(op: { table: string; key: string }): number {
    return this.records.get(recordKey(op))?.modifyIndex ?? 0;
  }

  /**
   * Applies ops in order as one transaction; returns the commit index, or 0 if nothing changed. A record deleted
   * and put again within the transaction is a new record (new createIndex), as in the store.
   */
  commit(ops: readonly Op[]): number {
    const next = this.index + 1;
    const working = new Map(this.records);
    const touched = new Set<string>();
    for (const op of ops) {
      const id = recordKey(op);
      touched.add(id);
      if (op.value === undefined) working.delete(id);
      else working.set(id, { value: op.value, createIndex: working.get(id)?.createIndex ?? next, modifyIndex: next });
    }
    const changed = [...touched].some((id) => working.has(id) || this.records.has(id));
    if (!changed) return 0;
    this.index = next;
    this.records.clear();
    for (const [id, r] of working) this.records.set(id, r);
    return next;
  }
}

/** The fit check used on both sides: values divisible by 7 "do not fit". Deletes always fit. */
const unfit = (value: unknown): boolean => typeof value === 'number' && value % 7 === 0;

function modelContents(model: Model): unknown[] {
  return [...model.records]
    .map(([id, r]) => {
      const [table, key] = id.split('/') as [string, string];
      return { table, key, value: r.value, createIndex: r.createIndex, modifyIndex: r.modifyIndex };
    })
    .sort((a, b) => (a.table === b.table ? (a.key < b.key ? -1 : a.key > b.key ? 1 : 0) : a.table < b.table ? -1 : 1));
}

test('no lost update, priority order, and replicas equal to the store, under random interleavings', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(fc.array(actionArb, { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 8 }), async (ticks) => {
      const state = new StateStore({ tables: [...tables], historyLimit: 3 });
      const applier = new PlanApplier({
        state,
        logger: captureLogger().logger,
        evaluatePlan: (_snapshot, plan) => plan.writes.filter((w) => unfit(w.value)),
      });
      const model = new Model();

      // Replica 1 follows the stream as it happens and must equal the store at every index.
      const live = new Replica();
      state.onChange((change) => {
        live.apply(structuredClone(change));
        assert.equal(live.appliedIndex, state.index);
        assert.deepEqual(dump(live.snapshot(), tables), dump(state.snapshot()));
      });
      // Replica 2 only catches up at the end of each tick: from history when it reaches back, else from a full copy.
      const lagging = new Replica();

      for (const actions of ticks) {
        const tickStart: Snapshot = state.snapshot();
        const liveAtTickStart = live.snapshot();
        const frozenView = dump(tickStart);
        const submitted: Array<{ seq: number; priority: number; allAtOnce: boolean; writes: PlanWrite[]; result: Promise<PlanResult> }> = [];

        for (const action of actions) {
          if (action.kind === 'direct') {
            const change = state.write((txn) => {
              for (const op of action.ops) {
                if (op.value === undefined) txn.delete(op.table, op.key);
                else txn.put(op.table, op.key, op.value);
              }
            });
            // A direct write may touch a record twice: the model replays the ops in order as one transaction.
            const expected = model.commit(action.ops);
            assert.equal(change.changes.length === 0 ? 0 : change.index, expected);
            continue;
          }
          const now = state.snapshot();
          const writes: PlanWrite[] = action.writes.map((w) => {
            const read = w.read.kind === 'now' ? now : w.read.kind === 'tickStart' ? tickStart : undefined;
            const readIndex = read === undefined ? (w.read as { index: number }).index : (read.get(w.table, w.key)?.modifyIndex ?? 0);
            return w.value === undefined ? { table: w.table, key: w.key, delete: true, readIndex } : { table: w.table, key: w.key, value: w.value, readIndex };
          });
          const result = applier.submit({ priority: action.priority, allAtOnce: action.allAtOnce, writes });
          submitted.push({ seq: submitted.length, priority: action.priority, allAtOnce: action.allAtOnce, writes, result });
        }

        // The model applies the tick's plans in the order the applier must use: priority, then arrival.
        const order = [...submitted].sort((x, y) => y.priority - x.priority || x.seq - y.seq);
        const expected = new Map<number, { index: number; rejected: PlanWrite[]; refreshIndex: number }>();
        for (const plan of order) {
          let rejected = plan.writes.filter((w) => w.readIndex !== model.modifyIndex(w));
          if (!(plan.allAtOnce && rejected.length > 0)) rejected = plan.writes.filter((w) => rejected.includes(w) || unfit(w.value));
          if (plan.allAtOnce && rejected.length > 0) rejected = [...plan.writes];
          const accepted = plan.writes.filter((w) => !rejected.includes(w));
          // No lost update: everything the model lets through was read at the record's current version.
          for (const w of accepted) assert.equal(w.readIndex, model.modifyIndex(w));
          const index = model.commit(accepted.map((w) => ({ table: w.table as Op['table'], key: w.key as Op['key'], value: w.value as number | undefined })));
          expected.set(plan.seq, { index, rejected, refreshIndex: rejected.length > 0 ? model.index : 0 });
        }
        for (const plan of submitted) {
          const actual = await plan.result;
          assert.deepEqual({ index: actual.index, rejected: [...actual.rejected], refreshIndex: actual.refreshIndex }, expected.get(plan.seq));
        }

        assert.equal(state.index, model.index);
        assert.deepEqual(dump(state.snapshot()), modelContents(model));
        // Snapshots taken at the start of the tick did not move.
        assert.deepEqual(dump(tickStart), frozenView);
        assert.deepEqual(dump(liveAtTickStart, tables), frozenView);

        const missed = state.changesSince(lagging.appliedIndex);
        if (missed === undefined) lagging.reset(structuredClone(state.full()));
        else for (const change of missed) lagging.apply(structuredClone(change));
        assert.equal(lagging.appliedIndex, state.index);
        assert.deepEqual(dump(lagging.snapshot(), tables), dump(state.snapshot()));
      }
      applier.stop();
    }),
    { numRuns: 200 },
  );
});
