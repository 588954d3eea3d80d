/**
 * One state-store suite, two backends: writes, the change stream, plans checked against the committed versions and
 * fenced by their delivery, run against the in-memory store and applier and against PostgreSQL.
 */
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';
import type { ChangeSet, PlanWrite, WriteTxn } from '../../../src/state/types.js';
import { TickpoolError } from '../../../src/errors.js';
import { requireDatabaseInCI } from '../helpers.js';
import { subjects, type Subject } from './subjects.js';

requireDatabaseInCI();

const code = (expected: string) => (error: unknown) => error instanceof TickpoolError && error.code === expected;

for (const factory of subjects) {
  describe(`state contract: ${factory.name}`, { skip: factory.skip }, () => {
    let subject: Subject;
    afterEach(async () => subject?.close());
    const open = async (evaluatePlan?: Parameters<typeof factory.make>[0] extends infer O ? (O extends { evaluatePlan?: infer E } ? E : never) : never) => {
      subject = await factory.make({ tables: ['allocs', 'nodes'], ...(evaluatePlan === undefined ? {} : { evaluatePlan }) });
      return subject.backend;
    };

    test('a write commits at the next index, reaches the change stream in order, and the replica shows it', async () => {
      const { state } = await open();
      const seen: ChangeSet[] = [];
      state.onChange((c) => seen.push(c));
      const first = await state.write((txn) => {
        txn.put('allocs', 'a1', { node: 'n1' });
        txn.put('nodes', 'n1', { free: 3 });
      });
      assert.equal(first.index, 1);
      assert.deepEqual(first.changes.map((c) => [c.table, c.key, c.createIndex, c.modifyIndex]), [['allocs', 'a1', 1, 1], ['nodes', 'n1', 1, 1]]);
      const second = await state.write((txn) => {
        assert.deepEqual(txn.get('nodes', 'n1')?.value, { free: 3 }, 'reads see the committed state');
        txn.put('nodes', 'n1', { free: 2 });
        txn.delete('allocs', 'a1');
      });
      assert.equal(second.index, 2);
      assert.equal(state.index, 2);
      await state.waitForIndex(2);
      const snap = state.snapshot();
      assert.deepEqual(snap.get('nodes', 'n1'), { table: 'nodes', key: 'n1', value: { free: 2 }, createIndex: 1, modifyIndex: 2 });
      assert.equal(snap.get('allocs', 'a1'), undefined);
      assert.deepEqual(seen.map((c) => c.index), [1, 2]);
      assert.deepEqual(seen[1]!.changes.map((c) => [c.key, c.value === undefined]), [['n1', false], ['a1', true]]);
    });

    test('a write that changes nothing commits nothing; one that throws commits nothing and throws', async () => {
      const { state } = await open();
      const none = await state.write((txn) => txn.delete('allocs', 'never-there'));
      assert.deepEqual(none, { index: 0, changes: [] });
      assert.throws(() => state.write(() => {
        throw new Error('no');
      }), /no/);
      assert.throws(() => state.write((txn) => txn.put('no-such-table', 'k', 1)), code('ERR_UNKNOWN_TABLE'));
      assert.equal(state.index, 0);
    });

    test('an async fn is refused and commits nothing; a transaction that escaped its callback refuses use', async () => {
      const { state } = await open();
      assert.throws(() => state.write((async (txn: WriteTxn) => txn.put('allocs', 'a', 1)) as never), code('ERR_INVALID_ARGUMENT'));
      let escaped: WriteTxn | undefined;
      await state.write((txn) => {
        escaped = txn;
        txn.put('allocs', 'b', 1);
      });
      assert.throws(() => escaped!.put('allocs', 'c', 1), code('ERR_INVALID_STATE'));
      assert.throws(() => escaped!.get('allocs', 'b'), code('ERR_INVALID_STATE'));
      assert.equal(state.index, 1);
      assert.equal(state.snapshot().get('allocs', 'a'), undefined);
      assert.deepEqual(state.snapshot().get('allocs', 'b')?.value, 1);
    });

    test('a plan commits the writes whose readIndex is still the committed version, and reports the others', async () => {
      const { state, plans } = await open();
      await state.write((txn) => txn.put('allocs', 'taken', 1));
      const stale: PlanWrite = { table: 'allocs', key: 'taken', value: 2, readIndex: 0 };
      const fresh: PlanWrite = { table: 'allocs', key: 'free', value: 3, readIndex: 0 };
      const result = await plans.submit({ writes: [stale, fresh] });
      assert.equal(result.index, 2);
      assert.deepEqual(result.rejected, [stale]);
      assert.equal(result.refreshIndex, 2);
      assert.equal(state.snapshot().get('allocs', 'free')?.value, 3);
      const gang = await plans.submit({ writes: [{ ...stale, readIndex: 0 }, { table: 'allocs', key: 'other', value: 4, readIndex: 0 }], allAtOnce: true });
      assert.equal(gang.index, 0);
      assert.equal(gang.rejected.length, 2);
      assert.equal(state.snapshot().get('allocs', 'other'), undefined);
      const updated = await plans.submit({ writes: [{ table: 'allocs', key: 'taken', value: 5, readIndex: 1 }] });
      assert.deepEqual([updated.index, updated.rejected.length], [3, 0]);
    });

    test('plans of one turn commit one index each, in priority order', async () => {
      const { state, plans } = await open();
      const results = await Promise.all([
        plans.submit({ priority: 10, writes: [{ table: 'allocs', key: 'low', value: 1, readIndex: 0 }] }),
        plans.submit({ priority: 90, writes: [{ table: 'allocs', key: 'high', value: 1, readIndex: 0 }] }),
        plans.submit({ priority: 50, writes: [{ table: 'allocs', key: 'mid', value: 1, readIndex: 0 }] }),
      ]);
      assert.deepEqual(results.map((r) => r.index), [3, 1, 2]);
      assert.equal(state.index, 3);
    });

    test('evaluatePlan rejects writes after the version check; a malformed plan is refused and queues nothing', async () => {
      const { plans, state } = await open((_snapshot, plan) => plan.writes.filter((w) => w.key.startsWith('bad')));
      const result = await plans.submit({ writes: [{ table: 'allocs', key: 'bad-1', value: 1, readIndex: 0 }, { table: 'allocs', key: 'ok', value: 1, readIndex: 0 }] });
      assert.deepEqual(result.rejected.map((w) => w.key), ['bad-1']);
      await assert.rejects(plans.submit({ writes: [{ table: 'nope', key: 'k', value: 1, readIndex: 0 }] }), code('ERR_UNKNOWN_TABLE'));
      await assert.rejects(plans.submit({ writes: [{ table: 'allocs', key: 'k', value: 1, readIndex: -1 }] }), code('ERR_INVALID_PLAN'));
      assert.equal(state.index, 1);
    });

    test('evaluatePlan matches writes by record: a copy, or the same write named twice, rejects it once', async () => {
      const { plans } = await open((_snapshot, plan) => {
        const bad = plan.writes.find((w) => w.key === 'bad')!;
        return [bad, { ...bad }];
      });
      const result = await plans.submit({ writes: [{ table: 'allocs', key: 'bad', value: 1, readIndex: 0 }, { table: 'allocs', key: 'ok', value: 1, readIndex: 0 }] });
      assert.deepEqual(result.rejected.map((w) => w.key), ['bad']);
      assert.ok(result.index > 0, 'the other write committed');
    });

    test('a plan fenced by a delivery commits only while that delivery is current', async () => {
      const { broker, plans, state } = await open();
      await broker.enqueue({ id: 'e', jobId: 'j', type: 'service' }).accepted;
      const d = (await broker.dequeue(['service'], 0))!;
      const ok = await plans.submit({ writes: [{ table: 'allocs', key: 'mine', value: 1, readIndex: 0 }] }, { evaluationId: 'e', token: d.token });
      assert.equal(ok.index, 1);
      await broker.nack('e', d.token, new Error('let it go'));
      await assert.rejects(
        plans.submit({ writes: [{ table: 'allocs', key: 'late', value: 1, readIndex: 0 }] }, { evaluationId: 'e', token: d.token }),
        code('ERR_EVAL_NOT_OUTSTANDING'),
      );
      await assert.rejects(
        plans.submit({ writes: [{ table: 'allocs', key: 'forged', value: 1, readIndex: 0 }] }, { evaluationId: 'e', token: 'forged' }),
        (e: unknown) => e instanceof TickpoolError && ['ERR_TOKEN_MISMATCH', 'ERR_EVAL_NOT_OUTSTANDING'].includes(e.code),
      );
      assert.equal(state.index, 1);
      assert.equal(state.snapshot().get('allocs', 'late'), undefined);
    });

    test('waitForIndex resolves at once for a reached index, later for one to come, and refuses bad input', async () => {
      const { state } = await open();
      await state.waitForIndex(0);
      const later = state.waitForIndex(1);
      await state.write((txn) => txn.put('allocs', 'x', 1));
      await later;
      assert.throws(() => state.waitForIndex(-1), code('ERR_INVALID_ARGUMENT'));
    });
  });
}
