import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { InvalidOptionError, InvalidPlanError, InvalidStateError, UnknownTableError, UserCodeError } from '../../src/errors.js';
import { Registry } from '../../src/observability/metrics.js';
import { PlanApplier } from '../../src/state/plan-applier.js';
import { StateStore } from '../../src/state/state-store.js';
import type { EvaluatePlan, Plan, PlanWrite } from '../../src/state/types.js';
import { captureLogger } from './helpers.js';

function setup(evaluatePlan?: EvaluatePlan, extra: { registry?: Registry; clock?: ManualClock } = {}) {
  const state = new StateStore({ tables: ['nodes', 'allocs'] });
  const { logger, entries } = captureLogger();
  const applier = new PlanApplier({ state, logger, ...(evaluatePlan ? { evaluatePlan } : {}), ...extra });
  return { state, applier, entries };
}

test('options are validated with typed errors', () => {
  const state = new StateStore({ tables: ['t'] });
  assert.throws(() => new PlanApplier(undefined as never), InvalidOptionError);
  assert.throws(() => new PlanApplier({ state: {} as never }), (e: unknown) => e instanceof InvalidOptionError && /`state` to be a StateStore/.test(e.message));
  assert.throws(() => new PlanApplier({ state, evaluatePlan: 1 as never }), InvalidOptionError);
  assert.throws(() => new PlanApplier({ state, registry: {} as never }), InvalidOptionError);
  assert.throws(() => new PlanApplier({ state, logger: console as never }), InvalidOptionError);
  assert.throws(() => new PlanApplier({ state, clock: {} as never }), InvalidOptionError);
});

test('a write commits only if the record still has the modifyIndex that was read', async () => {
  const { state, applier } = setup();
  state.write((txn) => {
    txn.put('nodes', 'n1', 'v1');
    txn.put('nodes', 'n2', 'v1');
  });
  state.write((txn) => txn.put('nodes', 'n2', 'v2')); // n1 at 1, n2 at 2, store at 2
  const writes: PlanWrite[] = [
    { table: 'nodes', key: 'n1', value: 'mine', readIndex: 1 }, // fresh: accepted
    { table: 'nodes', key: 'n2', value: 'mine', readIndex: 1 }, // stale: rejected
    { table: 'nodes', key: 'n3', value: 'new', readIndex: 0 }, // expected absent, is absent: accepted
    { table: 'nodes', key: 'n1x', value: 'x', readIndex: 2 }, // read a record that no longer exists: rejected
    { table: 'allocs', key: 'a1', value: 'x', readIndex: 0 },
  ];
  const result = await applier.submit({ writes });
  assert.equal(result.index, 3);
  assert.deepEqual(result.rejected, [writes[1], writes[3]]);
  assert.equal(result.rejected[0], writes[1], 'rejected writes are the submitted objects');
  assert.equal(result.refreshIndex, 3);
  const snap = state.snapshot();
  assert.equal(snap.get('nodes', 'n1')?.value, 'mine');
  assert.equal(snap.get('nodes', 'n2')?.value, 'v2');
  assert.equal(snap.get('nodes', 'n3')?.value, 'new');
  assert.equal(snap.get('allocs', 'a1')?.modifyIndex, 3);

  const again = await applier.submit({ writes: [{ table: 'nodes', key: 'n3', value: 'dup', readIndex: 0 }] });
  assert.deepEqual({ ...again }, { index: 0, rejected: again.rejected, refreshIndex: 3 }, 'creating an existing record conflicts');
  assert.equal(again.rejected.length, 1);
});

test('a fully accepted plan reports its commit index and no refresh; deletes and empty plans work', async () => {
  const { state, applier } = setup();
  state.write((txn) => txn.put('allocs', 'a1', 1));
  const ok = await applier.submit({ writes: [{ table: 'allocs', key: 'a1', delete: true, readIndex: 1 }] });
  assert.deepEqual({ ...ok, rejected: [...ok.rejected] }, { index: 2, rejected: [], refreshIndex: 0 });
  assert.equal(state.snapshot().get('allocs', 'a1'), undefined);
  const noop = await applier.submit({ writes: [{ table: 'allocs', key: 'gone', delete: true, readIndex: 0 }] });
  assert.deepEqual({ ...noop, rejected: [...noop.rejected] }, { index: 0, rejected: [], refreshIndex: 0 });
  const empty = await applier.submit({ writes: [] });
  assert.deepEqual({ ...empty, rejected: [...empty.rejected] }, { index: 0, rejected: [], refreshIndex: 0 });
  assert.equal(state.index, 2);
});

test('evaluatePlan sees the current state and only the surviving writes, and may reject some of them', async () => {
  const calls: Array<{ index: number; keys: string[] }> = [];
  const { state, applier } = setup((snapshot, plan) => {
    calls.push({ index: snapshot.index, keys: plan.writes.map((w) => w.key) });
    // Reject by returning a copy: matching is by record, not identity.
    return plan.writes.filter((w) => (w.value as { cpu: number }).cpu > (snapshot.get<number>('nodes', 'cap')?.value ?? 0)).map((w) => ({ ...w }));
  });
  state.write((txn) => {
    txn.put('nodes', 'cap', 4);
    txn.put('allocs', 'old', { cpu: 1 });
  });
  state.write((txn) => txn.put('allocs', 'old', { cpu: 2 }));
  const writes: PlanWrite[] = [
    { table: 'allocs', key: 'small', value: { cpu: 2 }, readIndex: 0 },
    { table: 'allocs', key: 'big', value: { cpu: 8 }, readIndex: 0 },
    { table: 'allocs', key: 'old', value: { cpu: 1 }, readIndex: 1 }, // conflict: never shown to evaluatePlan
  ];
  const result = await applier.submit({ evalId: 'e1', writes });
  assert.deepEqual(calls, [{ index: 2, keys: ['small', 'big'] }]);
  assert.deepEqual(result.rejected, [writes[1], writes[2]], 'in plan order');
  assert.equal(result.index, 3);
  assert.equal(result.refreshIndex, 3);
  assert.deepEqual(state.snapshot().get('allocs', 'small')?.value, { cpu: 2 });
  assert.equal(state.snapshot().get('allocs', 'big'), undefined);
});

test('allAtOnce: any rejection rejects the whole plan and commits nothing', async () => {
  let evaluated = 0;
  const { state, applier } = setup((_snapshot, plan) => {
    evaluated++;
    return plan.writes.filter((w) => w.key === 'unfit');
  });
  state.write((txn) => txn.put('nodes', 'n1', 1));
  const conflict: Plan = {
    allAtOnce: true,
    writes: [
      { table: 'allocs', key: 'a', value: 1, readIndex: 0 },
      { table: 'nodes', key: 'n1', value: 2, readIndex: 0 },
    ],
  };
  const r1 = await applier.submit(conflict);
  assert.deepEqual({ ...r1, rejected: [...r1.rejected] }, { index: 0, rejected: [...conflict.writes], refreshIndex: 1 });
  assert.equal(evaluated, 0, 'no point in evaluating a gang plan that already failed');

  const unfit: Plan = {
    allAtOnce: true,
    writes: [
      { table: 'allocs', key: 'a', value: 1, readIndex: 0 },
      { table: 'allocs', key: 'unfit', value: 1, readIndex: 0 },
    ],
  };
  const r2 = await applier.submit(unfit);
  assert.deepEqual(r2.rejected, [...unfit.writes]);
  assert.equal(r2.index, 0);
  assert.equal(evaluated, 1);
  assert.equal(state.index, 1);
  assert.equal(state.snapshot().get('allocs', 'a'), undefined);

  const fine = await applier.submit({ ...unfit, writes: [unfit.writes[0]!] });
  assert.equal(fine.index, 2);
  assert.equal(fine.refreshIndex, 0);
});

test('plans submitted in the same tick are applied by priority, then arrival', async () => {
  const { state, applier } = setup();
  const order: string[] = [];
  state.onChange((c) => order.push(c.changes[0]!.key));
  const submit = (key: string, priority?: number) =>
    applier.submit({ ...(priority === undefined ? {} : { priority }), writes: [{ table: 'allocs', key, value: key, readIndex: 0 }] });
  const results = [submit('low', 10), submit('high-1', 90), submit('default', undefined), submit('high-2', 90), submit('mid', 60)];
  assert.equal(applier.depth, 5, 'queued, not applied, until the submitting code yields');
  assert.equal(state.index, 0);
  const indexes = (await Promise.all(results)).map((r) => r.index);
  assert.deepEqual(order, ['high-1', 'high-2', 'mid', 'default', 'low']);
  assert.deepEqual(indexes, [5, 1, 4, 2, 3]);
  assert.equal(applier.depth, 0);
});

test('conflicts between plans of one tick: the higher priority one wins', async () => {
  const { state, applier } = setup();
  state.write((txn) => txn.put('nodes', 'n1', 'base'));
  const low = applier.submit({ priority: 20, writes: [{ table: 'nodes', key: 'n1', value: 'low', readIndex: 1 }] });
  const high = applier.submit({ priority: 80, writes: [{ table: 'nodes', key: 'n1', value: 'high', readIndex: 1 }] });
  const [l, h] = await Promise.all([low, high]);
  assert.equal(h.index, 2);
  assert.equal(l.index, 0);
  assert.equal(l.rejected.length, 1);
  assert.equal(l.refreshIndex, 2);
  assert.equal(state.snapshot().get('nodes', 'n1')?.value, 'high');
});

test('a throwing or misbehaving evaluatePlan rejects only its submission', async () => {
  const boom = new Error('fit check crashed');
  let state!: StateStore;
  const behaviour: Record<string, () => unknown> = {
    throws: () => {
      throw boom;
    },
    garbage: () => 'reject everything',
    stranger: () => [{ table: 'allocs', key: 'not-in-plan', readIndex: 0 }],
    writes: () => state.write((txn) => txn.put('nodes', 'sneaky', 1)),
    fine: () => undefined,
  };
  const setupResult = setup((_s, plan) => behaviour[plan.evalId!]!() as never);
  state = setupResult.state;
  const { applier, entries } = setupResult;
  const plan = (evalId: string): Plan => ({ evalId, writes: [{ table: 'allocs', key: evalId, value: 1, readIndex: 0 }] });
  const results = await Promise.allSettled(['throws', 'garbage', 'stranger', 'writes', 'fine'].map((id) => applier.submit(plan(id))));
  const [t, g, s, w, f] = results;
  assert.ok(t?.status === 'rejected' && t.reason instanceof UserCodeError && t.reason.cause === boom && /fit check crashed/.test(t.reason.message));
  assert.equal((t.reason as UserCodeError).code, 'ERR_USER_CODE');
  assert.ok(g?.status === 'rejected' && g.reason instanceof UserCodeError && /array of writes/.test(g.reason.message));
  assert.ok(s?.status === 'rejected' && s.reason instanceof UserCodeError && /not-in-plan/.test(s.reason.message));
  assert.ok(w?.status === 'rejected' && w.reason instanceof UserCodeError && /only read the state/.test(w.reason.message));
  assert.ok(f?.status === 'fulfilled' && f.value.index === 2, 'the applier carried on');
  const keys = [...state.snapshot().list('allocs')].map((r) => r.key);
  assert.deepEqual(keys, ['fine'], 'nothing of the failed submissions was committed');
  assert.equal(entries.filter((e) => e.level === 'warn').length, 4);
});

test('malformed plans are refused with typed errors and never queued', async () => {
  const { state, applier } = setup();
  const w = { table: 'allocs', key: 'a', value: 1, readIndex: 0 };
  const cases: Array<[unknown, new (...args: never[]) => Error, RegExp]> = [
    [null, InvalidPlanError, /`plan`/],
    [{ writes: 'x' }, InvalidPlanError, /plan\.writes/],
    [{ writes: [w], priority: 0 }, InvalidPlanError, /plan\.priority.*1 to 100.*`0`/],
    [{ writes: [w], priority: 101 }, InvalidPlanError, /plan\.priority/],
    [{ writes: [w], priority: 2.5 }, InvalidPlanError, /plan\.priority/],
    [{ writes: [w], allAtOnce: 'yes' }, InvalidPlanError, /allAtOnce/],
    [{ writes: [w], evalId: 5 }, InvalidPlanError, /evalId/],
    [{ writes: [{ ...w, table: 'jobs' }] }, UnknownTableError, /nodes, allocs.*"jobs"/],
    [{ writes: [{ ...w, key: '' }] }, InvalidPlanError, /writes\[0\]\.key/],
    [{ writes: [{ ...w, readIndex: -1 }] }, InvalidPlanError, /readIndex/],
    [{ writes: [{ ...w, readIndex: undefined }] }, InvalidPlanError, /readIndex/],
    [{ writes: [{ ...w, delete: true }] }, InvalidPlanError, /value.*delete/],
    [{ writes: [{ table: 'allocs', key: 'a', readIndex: 0 }] }, InvalidPlanError, /writes\[0\]\.value/],
    [{ writes: [{ ...w, value: () => 1 }] }, InvalidPlanError, /structured-cloneable/],
    [{ writes: [w, { ...w }] }, InvalidPlanError, /one write per record/],
    [{ writes: [w, null] }, InvalidPlanError, /writes\[1\]/],
  ];
  for (const [plan, type, message] of cases) {
    const pending = applier.submit(plan as Plan);
    assert.equal(applier.depth, 0, `not queued: ${JSON.stringify(plan)}`);
    await assert.rejects(pending, (e: unknown) => e instanceof type && message.test((e as Error).message), JSON.stringify(plan));
  }
  assert.equal(state.index, 0);
});

test('a plan cannot be changed after submission', async () => {
  const { state, applier } = setup();
  const value = { cpu: 1 };
  const pending = applier.submit({ writes: [{ table: 'allocs', key: 'a', value, readIndex: 0 }] });
  value.cpu = 64;
  await pending;
  assert.deepEqual(state.snapshot().get('allocs', 'a')?.value, { cpu: 1 });
});

test('what commits is what was validated, whatever the caller does to its plan after submit()', async () => {
  const { state, applier } = setup();
  state.write((txn) => {
    txn.put('allocs', 'keep', 1);
    txn.put('allocs', 'other', 2);
  });
  const write: { table: string; key: string; value?: unknown; delete?: boolean; readIndex: number } = {
    table: 'allocs',
    key: 'new',
    value: 'v',
    readIndex: 0,
  };
  const plan = { writes: [write as PlanWrite], allAtOnce: false };
  const pending = applier.submit(plan);
  // Turn the put into a delete of another record, and append a write the validator never saw.
  write.delete = true;
  write.key = 'keep';
  write.readIndex = 1;
  delete write.value;
  plan.writes.push({ table: 'allocs', key: 'other', delete: true, readIndex: 1 });
  plan.allAtOnce = true;
  const result = await pending;
  assert.deepEqual({ ...result, rejected: [...result.rejected] }, { index: 2, rejected: [], refreshIndex: 0 });
  assert.deepEqual(
    [...state.snapshot().list('allocs')].map((r) => [r.key, r.value]).sort(),
    [
      ['keep', 1],
      ['new', 'v'],
      ['other', 2],
    ],
  );

  // A key changed to one validation would refuse is never seen: the checked copy commits.
  const bad = { table: 'allocs', key: 'x', value: 1, readIndex: 0 };
  const second = applier.submit({ writes: [bad] });
  (bad as { key: unknown }).key = 42;
  assert.equal((await second).index, 3);
  assert.equal(state.snapshot().get('allocs', 'x')?.value, 1);
});

test('rejected writes are the caller\'s own objects; evaluatePlan sees the checked copies', async () => {
  const seen: PlanWrite[] = [];
  const { state, applier } = setup((_snapshot, plan) => {
    seen.push(...plan.writes);
    return plan.writes.filter((w) => w.key === 'unfit');
  });
  state.write((txn) => txn.put('allocs', 'taken', 1));
  const writes: PlanWrite[] = [
    { table: 'allocs', key: 'taken', value: 1, readIndex: 0 }, // conflict
    { table: 'allocs', key: 'unfit', value: { cpu: 9 }, readIndex: 0 }, // rejected by evaluatePlan
    { table: 'allocs', key: 'fine', value: { cpu: 1 }, readIndex: 0 },
  ];
  const pending = applier.submit({ evalId: 'e1', writes });
  (writes[2] as { key: string }).key = 'moved';
  const result = await pending;
  assert.equal(result.rejected.length, 2);
  assert.equal(result.rejected[0], writes[0]);
  assert.equal(result.rejected[1], writes[1]);
  assert.deepEqual(
    seen.map((w) => w.key),
    ['unfit', 'fine'],
  );
  assert.ok(seen.every((w) => Object.isFrozen(w) && !writes.includes(w)), 'copies, frozen');
  assert.deepEqual(state.snapshot().get('allocs', 'fine')?.value, { cpu: 1 });
  assert.equal(state.snapshot().get('allocs', 'moved'), undefined);
});

test('a plan value holding shared memory is refused as an invalid plan', async () => {
  const { state, applier } = setup();
  const shared = new Int32Array(new SharedArrayBuffer(4));
  await assert.rejects(
    applier.submit({ writes: [{ table: 'allocs', key: 'p', value: shared, readIndex: 0 }] }),
    (e: unknown) => e instanceof InvalidPlanError && e.code === 'ERR_INVALID_PLAN' && /plan\.writes\[0\]\.value.*shared memory/.test((e as Error).message),
  );
  assert.equal(state.index, 0);
});

test('stop rejects queued plans and later submissions with InvalidStateError', async () => {
  const { state, applier } = setup();
  const queued = [1, 2].map((i) => applier.submit({ writes: [{ table: 'allocs', key: `a${i}`, value: i, readIndex: 0 }] }));
  applier.stop();
  applier.stop();
  assert.equal(applier.depth, 0);
  for (const p of queued) await assert.rejects(p, (e: unknown) => e instanceof InvalidStateError && /stopped/.test((e as Error).message));
  await assert.rejects(applier.submit({ writes: [] }), InvalidStateError);
  assert.equal(state.index, 0, 'nothing committed');
});

test('stop from inside evaluatePlan lets the current plan finish and rejects the rest', async () => {
  let applier!: PlanApplier;
  const result = setup((_s, plan) => {
    if (plan.evalId === 'first') applier.stop();
  });
  applier = result.applier;
  const first = applier.submit({ evalId: 'first', priority: 90, writes: [{ table: 'allocs', key: 'a', value: 1, readIndex: 0 }] });
  const second = applier.submit({ evalId: 'second', writes: [{ table: 'allocs', key: 'b', value: 1, readIndex: 0 }] });
  assert.equal((await first).index, 1);
  await assert.rejects(second, InvalidStateError);
  assert.equal(result.state.index, 1);
});

test('metrics: submitted, rejected writes by reason, queue depth and timed evaluate/apply', async () => {
  const registry = new Registry();
  const clock = new ManualClock(0);
  const { state, applier } = setup(
    (_s, plan) => {
      clock.advance(5); // the fit check "takes" 5 ms
      return plan.writes.filter((w) => w.key === 'unfit');
    },
    { registry, clock },
  );
  // A second applier on the same registry shares the metrics; the depth gauge sums both.
  const other = new PlanApplier({ state, registry, clock, logger: captureLogger().logger });
  state.write((txn) => txn.put('nodes', 'n1', 1));
  const pending = [
    applier.submit({ writes: [{ table: 'nodes', key: 'n1', value: 2, readIndex: 0 }] }),
    applier.submit({
      writes: [
        { table: 'allocs', key: 'ok', value: 1, readIndex: 0 },
        { table: 'allocs', key: 'unfit', value: 1, readIndex: 0 },
      ],
    }),
    applier.submit({
      allAtOnce: true,
      writes: [
        { table: 'allocs', key: 'x', value: 1, readIndex: 0 },
        { table: 'allocs', key: 'y', value: 1, readIndex: 0 },
        { table: 'allocs', key: 'unfit', value: 1, readIndex: 0 },
      ],
    }),
    other.submit({ writes: [] }),
  ];
  const depth = await registry.getSingleMetric('tickpool_plan_queue_depth')!.get();
  assert.equal(depth.values[0]?.value, 4);
  await Promise.all(pending);
  assert.equal((await registry.getSingleMetric('tickpool_plan_queue_depth')!.get()).values[0]?.value, 0);
  assert.equal((await registry.getSingleMetric('tickpool_plan_submitted_total')!.get()).values[0]?.value, 4);
  const rejected = (await registry.getSingleMetric('tickpool_plan_rejected_writes_total')!.get()).values;
  const byReason = Object.fromEntries(rejected.map((v) => [v.labels['reason'], v.value]));
  assert.deepEqual(byReason, { conflict: 1, evaluate: 2, all_at_once: 2 });
  const series = (name: string) => async (suffix: string) =>
    (await registry.getSingleMetric(name)!.get()).values.find((v) => (v as { metricName?: string }).metricName === `${name}_${suffix}`)?.value;
  const evaluate = series('tickpool_plan_evaluate_seconds');
  const apply = series('tickpool_plan_apply_seconds');
  assert.equal(await evaluate('sum'), 0.01, 'two evaluatePlan calls of 5 ms');
  assert.equal(await evaluate('count'), 4);
  assert.equal(await apply('count'), 1, 'only one plan committed anything');
  applier.stop();
  other.stop();
});
