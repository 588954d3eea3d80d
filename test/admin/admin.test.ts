/**
 * `engine.admin` on the in-memory backend, on real threads: evaluations listed by state a page at a time, one in
 * detail with its deliveries, a failed one replayed (and acked) or discarded, a type paused and resumed, tasks
 * listed with their run log, forced, disabled and enabled, a running item canceled, and every mutation's event.
 * Concurrency is driven by gates and events; task time by a manual clock.
 */
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { acks, evaluation, failures, fixture, started, turns } from '../reliability/helpers.js';
import { idsByPage } from './pages.js';

const schedulers = { work: fixture('noop'), other: fixture('noop'), flaky: fixture('faulty'), block: fixture('gated') };
const noRetry = { deliveryLimit: 1, initialNackDelayMs: 0, subsequentNackDelayMs: 0 };

test('evaluations of one state come a page at a time, newest or oldest first, filtered by type and job', async () => {
  const engine = await started({ schedulers, broker: noRetry });
  await engine.admin.pauseType('work');
  for (let i = 0; i < 7; i++) engine.enqueue(evaluation(`w${i}`, 'work', undefined, { jobId: i % 2 === 0 ? 'even' : `odd${i}` }));
  const ids = (query: Parameters<typeof idsByPage>[1]): Promise<string[][]> => idsByPage(engine.admin, query);
  // One per job is ready; the other evaluations of job `even` wait behind it as pending.
  assert.deepEqual(await ids({ state: 'ready', limit: 2 }), [['w5', 'w3'], ['w1', 'w0']]);
  assert.deepEqual(await ids({ state: 'ready', order: 'oldest', limit: 3 }), [['w0', 'w1', 'w3'], ['w5']]);
  assert.deepEqual(await ids({ state: 'pending', order: 'oldest' }), [['w2', 'w4', 'w6']]);
  assert.deepEqual(await ids({ state: 'pending', jobId: 'even', limit: 1 }), [['w6'], ['w4'], ['w2']]);
  assert.deepEqual(await ids({ state: 'ready', type: 'other' }), [[]]);
  // Counts by state and type, each stopped at the cap asked for.
  assert.deepEqual(await engine.admin.depths(), { totals: { ready: 4, unacked: 0, pending: 3, delayed: 0, failed: 0 }, byType: { work: { ready: 4, unacked: 0 } }, cap: 10_000 });
  assert.deepEqual((await engine.admin.depths(2)).totals, { ready: 2, unacked: 0, pending: 2, delayed: 0, failed: 0 });
  await assert.rejects(engine.admin.depths(0), { code: 'ERR_INVALID_ARGUMENT' });
  const [first] = (await engine.admin.evaluations({ state: 'ready', limit: 1 })).items;
  assert.deepEqual(first, { id: 'w5', namespace: 'default', jobId: 'odd5', type: 'work', priority: 50, state: 'ready', deliveries: 0 });
});

test('a query it cannot read is refused with ERR_INVALID_ARGUMENT naming the field, and nothing changes', async () => {
  const engine = await started({ schedulers });
  const refused = async (query: unknown, field: string): Promise<void> => {
    await assert.rejects(engine.admin.evaluations(query as never), (e: unknown) => {
      const error = e as { code?: string; message?: string };
      return error.code === 'ERR_INVALID_ARGUMENT' && error.message!.includes(field);
    });
  };
  await refused({ state: 'bogus' }, 'query.state');
  await refused({ state: 'ready', limit: 0 }, 'query.limit');
  await refused({ state: 'ready', limit: 501 }, 'query.limit');
  await refused({ state: 'ready', cursor: 'not a cursor' }, 'query.cursor');
  await refused({ state: 'ready', order: 'sideways' }, 'query.order');
  await refused(null, 'query');
  await assert.rejects(engine.admin.replay(''), { code: 'ERR_INVALID_ARGUMENT' });
  await assert.rejects(engine.admin.pauseType('work', { by: 42 as never }), { code: 'ERR_INVALID_ARGUMENT' });
  await assert.rejects(engine.admin.cancel(-1), { code: 'ERR_INVALID_ARGUMENT' });
  assert.deepEqual(await engine.admin.pausedTypes(), []);
});

test('a paused type is not taken while others are; resumed, it runs', async () => {
  const engine = await started({ schedulers });
  const events: string[] = [];
  engine.admin.events.on('admin:pause', ({ type, by }) => events.push(`pause ${type} by ${by}`));
  engine.admin.events.on('admin:resume', ({ type, by }) => events.push(`resume ${type} by ${by}`));
  await engine.admin.pauseType('work', { by: 'ops@example' });
  assert.deepEqual(await engine.admin.pausedTypes(), ['work']);
  const held = engine.run(evaluation('held', 'work'));
  assert.equal((await engine.run(evaluation('free', 'other'))).status, 'acked');
  await turns();
  assert.deepEqual((await engine.admin.evaluations({ state: 'ready' })).items.map((e) => e.id), ['held']);
  await engine.admin.resumeType('work', { by: 'ops@example' });
  assert.equal((await held).status, 'acked');
  assert.deepEqual(events, ['pause work by ops@example', 'resume work by ops@example']);
});

test('a failed evaluation shows its deliveries and error; replayed, it runs again and is acked', async () => {
  const engine = await started({ schedulers, broker: noRetry });
  const gate = newGate();
  const failed = failures(engine, 1);
  const first = engine.run(evaluation('f1', 'flaky', { gate, fault: 'throw' }));
  await assert.rejects(first, { code: 'ERR_DELIVERY_LIMIT' });
  await failed;
  const listed = await engine.admin.evaluations({ state: 'failed', type: 'flaky' });
  assert.deepEqual(listed.items.map((e) => [e.id, e.state, e.deliveries]), [['f1', 'failed', 1]]);
  const detail = (await engine.admin.evaluation('f1'))!;
  assert.equal(detail.queue, '_failed');
  assert.equal(detail.failure?.code, 'ERR_DELIVERY_LIMIT');
  assert.equal(detail.lastError?.message.includes('scheduler failed on purpose'), true);
  assert.equal(detail.history.length, 1);
  assert.equal(detail.history[0]!.end, 'nacked');
  assert.ok(detail.history[0]!.endedAt! >= detail.history[0]!.startedAt);
  assert.match(detail.history[0]!.process, /\/\d+$/);
  assert.deepEqual((detail.payload as { fault: string }).fault, 'throw');

  const replays: string[] = [];
  engine.admin.events.on('admin:replay', ({ id, by }) => replays.push(`${id} by ${by}`));
  const acked = acks(engine, 1);
  assert.equal(await engine.admin.replay('f1', { by: 'dashboard:alice' }), true);
  assert.deepEqual(await acked, ['f1']);
  assert.deepEqual(replays, ['f1 by dashboard:alice']);
  // Acked, the broker forgets it; replaying what is not failed does nothing.
  assert.equal(await engine.admin.evaluation('f1'), undefined);
  assert.equal(await engine.admin.replay('f1'), false);
});

test('failed evaluations of a type are replayed or discarded together; a discarded one is gone', async () => {
  const engine = await started({ schedulers, broker: noRetry });
  const failed = failures(engine, 4);
  const runs = ['a', 'b', 'c', 'd'].map((id) => engine.run(evaluation(id, 'flaky', { gate: newGate(), fault: 'throw' })));
  for (const run of runs) await assert.rejects(run);
  await failed;
  assert.equal(await engine.admin.discard('a', { by: 'ops' }), true);
  assert.equal(await engine.admin.evaluation('a'), undefined);
  assert.equal(await engine.admin.discard('a'), false);
  await engine.admin.pauseType('flaky');
  assert.equal(await engine.admin.replayFailed('flaky'), 3);
  assert.deepEqual((await engine.admin.evaluations({ state: 'ready', type: 'flaky', order: 'oldest' })).items.map((e) => [e.id, e.deliveries]), [['b', 0], ['c', 0], ['d', 0]]);
  assert.equal(await engine.admin.discardFailed('flaky'), 0);
  assert.equal(engine.broker.stats().totalFailed, 0);
});

test('a running item is listed with its thread and canceled from there', async () => {
  const engine = await started({ schedulers, threads: 2 });
  const gate = newGate();
  const nacked = new Promise<string>((resolve) => engine.broker.events.on('broker:give-back', ({ evaluation: e }) => resolve(e.id)));
  const run = engine.run(evaluation('long', 'block', { gate }));
  await waitFor(gate, Gate.STARTED, 1);
  const threads = await engine.admin.threads();
  assert.equal(threads.length, 2);
  const busy = threads.filter((t) => t.running !== undefined);
  assert.equal(busy.length, 1);
  assert.deepEqual({ ...busy[0]!.running!, startedAt: undefined, predictedMs: undefined }, { kind: 'eval', id: 'long', name: 'block', startedAt: undefined, predictedMs: undefined });
  assert.equal(await engine.admin.cancel(threads.find((t) => t.running === undefined)!.index), false, 'an idle thread runs nothing');
  const cancels: string[] = [];
  engine.admin.events.on('admin:cancel', ({ id, by }) => cancels.push(`${id} by ${by}`));
  assert.equal(await engine.admin.cancel(busy[0]!.index, { by: 'ops' }), true);
  assert.equal(await nacked, 'long');
  assert.deepEqual(cancels, ['long by ops']);
  set(gate, Gate.RELEASE, 1);
  assert.equal((await run).status, 'acked');
});

test('tasks are listed with their next run and run log; a forced run is logged; a disabled task creates no runs', async () => {
  const HOUR = 3_600_000;
  const clock = new ManualClock(10 * HOUR);
  const engine = await started({ schedulers, handlers: { h: fixture('task-handler') }, clock });
  engine.tasks.add({ id: 'hourly', every: '1h', maxConcurrency: 2, handler: 'h', payload: { gate: newGate(), mode: 'ok' } });
  const [view] = await engine.admin.tasks();
  assert.deepEqual({ ...view, lastRun: undefined }, {
    id: 'hourly', schedule: { every: HOUR }, handler: 'h', maxConcurrency: 2, enabled: true, nextDue: 11 * HOUR, runsActive: 0, slotsBusy: 0, lastRun: undefined,
    claimedBy: { host: hostname(), pid: process.pid },
  });
  const finished = new Promise<string>((resolve) => engine.tasks.events.on('task:run:finish', ({ runId }) => resolve(runId)));
  const { runId } = await engine.admin.forceRun('hourly', { by: 'ops' });
  assert.equal(await finished, runId);
  const detail = (await engine.admin.task('hourly'))!;
  assert.equal(detail.runs[0]?.runId, runId);
  assert.equal(detail.runs[0]?.finalStatus, 'success');
  assert.equal(detail.lastRun?.runId, runId);

  await engine.admin.disableTask('hourly', { by: 'ops' });
  assert.equal((await engine.admin.tasks())[0]!.enabled, false);
  const started0 = detail.runs.length;
  clock.advance(3 * HOUR);
  await turns();
  assert.equal((await engine.admin.task('hourly'))!.runs.length, started0, 'no run while disabled');
  await engine.admin.enableTask('hourly', { by: 'ops' });
  const enabled = (await engine.admin.tasks())[0]!;
  assert.equal(enabled.enabled, true);
  assert.equal(enabled.nextDue, 14 * HOUR, 'the next hour after it was enabled: the disabled hours do not run');
  await assert.rejects(engine.admin.forceRun('nope'), { code: 'ERR_TASK_NOT_FOUND' });
  await assert.rejects(engine.admin.disableTask('nope'), { code: 'ERR_TASK_NOT_FOUND' });
  const [self] = await engine.admin.processes();
  assert.equal(self!.pid, process.pid);
  assert.deepEqual(self!.claimedTasks, ['hourly']);
});
