/**
 * `engine.admin` on the PostgreSQL backend, on real threads, for the whole cluster: pages of one state in enqueue
 * order with cursors, filters, refused queries, a failed evaluation in detail and replayed (acked, and `done` read
 * after the replay settles with the new outcome), discard and the bulk actions, a type paused in one process and
 * seen paused by another, resumed from there, and replays racing each other from two processes (one wins, one
 * delivery). Tasks for the whole cluster: every live process with the tasks it claims, the catalogue listed from
 * either process, and a task disabled from one process that stops its runs everywhere until enabled from the other.
 * Each engine runs on a schema of its own, dropped after the file.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { createEngine, type Engine as AnyEngine } from '../../src/engine/engine.js';
import type { PostgresBackend } from '../../src/postgres/backend.js';
import { postgresBackend } from '../../src/postgres/index.js';
import { acks, evaluation, failures, fixture, logger } from '../reliability/helpers.js';
import { adminPool, databaseUrl, dropSchema, schemaName, skipWithoutDatabase } from './helpers.js';
import { idsByPage } from '../admin/pages.js';

type Engine = AnyEngine<PostgresBackend>;

const schedulers = { work: fixture('noop'), other: fixture('noop'), flaky: fixture('fails-until-file') };
const noRetry = { deliveryLimit: 1, initialNackDelayMs: 0, subsequentNackDelayMs: 0 };
const skip = skipWithoutDatabase;

const schemas: string[] = [];
const running: Engine[] = [];
const dir = mkdtempSync(join(tmpdir(), 'tickpool-admin-'));
after(async () => {
  rmSync(dir, { recursive: true, force: true });
  if (databaseUrl === undefined) return;
  await Promise.all(running.map((e) => e.stop({ graceMs: 100 })));
  const pool = adminPool();
  for (const schema of schemas) await dropSchema(pool, schema);
  await pool.end();
});

/** Engines sharing one new schema (the processes of one cluster); `another` starts one more on it. */
interface Cluster extends Array<Engine> {
  another(): Promise<Engine>;
}

/** The task handler of the clusters that run tasks (`tasks: true`): it answers what it was given. */
const handlers = { value: new URL('./tasks/fixtures/value-handler.js', import.meta.url) };

async function cluster(count: number, options: { readonly tasks?: boolean } = {}): Promise<Cluster> {
  const schema = schemaName('adm');
  schemas.push(schema);
  const taskOptions = options.tasks === true ? { handlers, tickMs: 100, claimTtlMs: 3000 } : {};
  const another = async (): Promise<Engine> => {
    const backend = postgresBackend({ connectionString: databaseUrl!, schema, pollMs: 200 });
    const engine = createEngine({ threads: 2, workers: 8, logger, schedulers, broker: noRetry, backend, ...taskOptions });
    running.push(engine);
    await engine.start();
    return engine;
  };
  const engines: Engine[] = [];
  for (let i = 0; i < count; i++) engines.push(await another());
  return Object.assign(engines, { another }) as Cluster;
}

/** The reliability helpers' event promises take any engine's broker events (typed for the in-memory one). */
const events = (engine: Engine): Parameters<typeof acks>[0] => engine as unknown as Parameters<typeof acks>[0];

const missing = (name: string): string => join(dir, name);

/** Runs `ids` of type `flaky` to `_failed` (the file they wait for does not exist). */
async function failed(engine: Engine, ids: readonly string[], file: string): Promise<void> {
  const seen = failures(events(engine), ids.length);
  const runs = ids.map((id) => engine.run(evaluation(id, 'flaky', { file })));
  for (const run of runs) await assert.rejects(run, { code: 'ERR_DELIVERY_LIMIT' });
  await seen;
}

test('evaluations of one state come a page at a time, newest or oldest first, filtered by type and job', { skip }, async () => {
  const [engine] = await cluster(1);
  await engine!.admin.pauseType('work');
  const handles = Array.from({ length: 7 }, (_, i) => engine!.enqueue(evaluation(`w${i}`, 'work', undefined, { jobId: i % 2 === 0 ? 'even' : `odd${i}` })));
  await Promise.all(handles.map((h) => h.accepted));
  const ids = (query: Parameters<typeof idsByPage>[1]): Promise<string[][]> => idsByPage(engine!.admin, query);
  assert.deepEqual(await ids({ state: 'ready', limit: 2 }), [['w5', 'w3'], ['w1', 'w0']]);
  assert.deepEqual(await ids({ state: 'ready', order: 'oldest', limit: 3 }), [['w0', 'w1', 'w3'], ['w5']]);
  assert.deepEqual(await ids({ state: 'pending', order: 'oldest' }), [['w2', 'w4', 'w6']]);
  assert.deepEqual(await ids({ state: 'pending', jobId: 'even', limit: 1 }), [['w6'], ['w4'], ['w2']]);
  assert.deepEqual(await ids({ state: 'pending', namespace: 'default', jobId: 'even', order: 'oldest', limit: 2 }), [['w2', 'w4'], ['w6']]);
  assert.deepEqual(await ids({ state: 'ready', type: 'work', order: 'oldest', limit: 4 }), [['w0', 'w1', 'w3', 'w5']]);
  assert.deepEqual(await ids({ state: 'ready', type: 'other' }), [[]]);
  // Counts by state and type, each stopped at the cap asked for.
  assert.deepEqual(await engine!.admin.depths(), { totals: { ready: 4, unacked: 0, pending: 3, delayed: 0, failed: 0 }, byType: { work: { ready: 4, unacked: 0 } }, cap: 10_000 });
  assert.deepEqual((await engine!.admin.depths(2)).totals, { ready: 2, unacked: 0, pending: 2, delayed: 0, failed: 0 });
  await assert.rejects(engine!.admin.depths(0), { code: 'ERR_INVALID_ARGUMENT' });
  assert.deepEqual(await ids({ state: 'ready', namespace: 'elsewhere' }), [[]]);
  assert.deepEqual(await ids({ state: 'unacked' }), [[]]);
  assert.deepEqual(await ids({ state: 'delayed' }), [[]]);
  assert.deepEqual(await ids({ state: 'failed' }), [[]]);
  const [first] = (await engine!.admin.evaluations({ state: 'ready', limit: 1 })).items;
  assert.deepEqual(first, { id: 'w5', namespace: 'default', jobId: 'odd5', type: 'work', priority: 50, state: 'ready', deliveries: 0 });
  const detail = (await engine!.admin.evaluation('w4'))!;
  assert.deepEqual([detail.state, detail.queue, detail.holdsJobSlot, detail.history], ['pending', 'work', false, []]);
  assert.equal(await engine!.admin.evaluation('nope'), undefined);
});

test('a query it cannot read is refused with ERR_INVALID_ARGUMENT naming the field, and nothing changes', { skip }, async () => {
  const [engine] = await cluster(1);
  const refused = async (query: unknown, field: string): Promise<void> => {
    await assert.rejects(engine!.admin.evaluations(query as never), (e: unknown) => {
      const error = e as { code?: string; message?: string };
      return error.code === 'ERR_INVALID_ARGUMENT' && error.message!.includes(field);
    });
  };
  await refused({ state: 'bogus' }, 'query.state');
  await refused({ state: 'ready', limit: 0 }, 'query.limit');
  await refused({ state: 'ready', limit: 501 }, 'query.limit');
  await refused({ state: 'ready', cursor: 'not a cursor' }, 'query.cursor');
  // The in-memory backend's cursor is not this one's.
  await refused({ state: 'ready', cursor: 'm5' }, 'query.cursor');
  await refused({ state: 'ready', order: 'sideways' }, 'query.order');
  await refused({ state: 'ready', type: '' }, 'query.type');
  await refused(null, 'query');
  await assert.rejects(engine!.admin.replay(''), { code: 'ERR_INVALID_ARGUMENT' });
  await assert.rejects(engine!.admin.pauseType('a\u0000b'), { code: 'ERR_INVALID_ARGUMENT' });
  assert.deepEqual((await engine!.admin.evaluations({ state: 'ready', jobId: 'a\u0000b' })).items, []);
  assert.deepEqual(await engine!.admin.pausedTypes(), []);
});

test('a type paused in one process is paused in every process; resumed from another, it runs promptly', { skip }, async () => {
  const [a, b] = await cluster(2);
  await a!.admin.pauseType('work', { by: 'ops@example' });
  assert.deepEqual(await b!.admin.pausedTypes(), ['work']);
  const held = b!.run(evaluation('held', 'work'));
  assert.equal((await a!.run(evaluation('free', 'other'))).status, 'acked');
  assert.equal((await b!.run(evaluation('free2', 'other'))).status, 'acked');
  // Neither process's poll takes it, nor an offer to a process that waits for its type.
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.deepEqual((await a!.admin.evaluations({ state: 'ready' })).items.map((e) => e.id), ['held']);
  const resumedAt = Date.now();
  await b!.admin.resumeType('work');
  assert.equal((await held).status, 'acked');
  assert.ok(Date.now() - resumedAt < 5_000);
  assert.deepEqual(await a!.admin.pausedTypes(), []);
});

test('a failed evaluation shows its delivery and error; replayed, it runs again and is acked', { skip }, async () => {
  const [engine] = await cluster(1);
  const file = missing('f1');
  const seen = failures(events(engine!), 1);
  // Its `done` is first read after the replay: it settles with the new outcome, not the failure.
  const handle = engine!.enqueue(evaluation('f1', 'flaky', { file }));
  await seen;
  const listed = await engine!.admin.evaluations({ state: 'failed', type: 'flaky' });
  assert.deepEqual(listed.items.map((e) => [e.id, e.state, e.deliveries]), [['f1', 'failed', 1]]);
  const detail = (await engine!.admin.evaluation('f1'))!;
  assert.equal(detail.queue, '_failed');
  assert.equal(detail.failure?.code, 'ERR_DELIVERY_LIMIT');
  assert.equal(detail.lastError?.message.includes('scheduler failed on purpose'), true);
  assert.equal(detail.history.length, 1);
  assert.equal(detail.history[0]!.end, 'nacked');
  assert.ok(detail.history[0]!.endedAt! >= detail.history[0]!.startedAt);
  assert.deepEqual((detail.payload as { file: string }).file, file);

  writeFileSync(file, '');
  const replays: string[] = [];
  engine!.admin.events.on('admin:replay', ({ id, by }) => replays.push(`${id} by ${by}`));
  const acked = acks(events(engine!), 1);
  assert.equal(await engine!.admin.replay('f1', { by: 'dashboard:alice' }), true);
  // `done` read after the replay settles with the new outcome.
  assert.equal((await handle.done).status, 'acked');
  assert.deepEqual(await acked, ['f1']);
  assert.deepEqual(replays, ['f1 by dashboard:alice']);
  assert.equal(await engine!.admin.evaluation('f1'), undefined);
  assert.equal(await engine!.admin.replay('f1'), false);
});

test('failed evaluations of a type are replayed or discarded together; a discarded one is gone', { skip }, async () => {
  const [engine] = await cluster(1);
  await failed(engine!, ['a', 'b', 'c', 'd', 'e'], missing('never'));
  assert.equal(await engine!.admin.discard('a', { by: 'ops' }), true);
  assert.equal(await engine!.admin.evaluation('a'), undefined);
  assert.equal(await engine!.admin.discard('a'), false);
  await engine!.admin.pauseType('flaky');
  assert.deepEqual(await engine!.broker.failedIds('flaky', 2), ['b', 'c']);
  assert.equal(await engine!.admin.replay('b'), true);
  assert.equal(await engine!.admin.replayFailed('flaky'), 3);
  assert.deepEqual((await engine!.admin.evaluations({ state: 'ready', type: 'flaky', order: 'oldest' })).items.map((e) => [e.id, e.deliveries]), [['b', 0], ['c', 0], ['d', 0], ['e', 0]]);
  assert.equal(await engine!.admin.discardFailed('flaky'), 0);
  assert.equal((await engine!.broker.stats()).totalFailed, 0);
  // Paused, they wait; resumed, they fail again and are discarded together.
  const again = failures(events(engine!), 4);
  await engine!.admin.resumeType('flaky');
  await again;
  assert.equal(await engine!.admin.discardFailed('flaky', { by: 'ops' }), 4);
  assert.deepEqual((await engine!.admin.evaluations({ state: 'failed' })).items, []);
});

test('a replayed evaluation whose job has a holder waits behind it as pending', { skip }, async () => {
  const [engine] = await cluster(1);
  await failed(engine!, ['x'], missing('never'));
  await engine!.admin.pauseType('work');
  await engine!.enqueue(evaluation('holder', 'work', undefined, { jobId: 'x' })).accepted;
  assert.equal(await engine!.admin.replay('x'), true);
  const detail = (await engine!.admin.evaluation('x'))!;
  assert.deepEqual([detail.state, detail.queue, detail.deliveries, detail.failure, detail.holdsJobSlot], ['pending', 'flaky', 0, undefined, false]);
});

test('replays of one failed evaluation racing from two processes: one wins, and it is delivered once', { skip }, async () => {
  const engines = await cluster(1);
  const a = engines[0]!;
  const file = missing('race');
  const ids = ['r0', 'r1', 'r2', 'r3', 'r4', 'r5'];
  await failed(a, ids, file);
  const b = await engines.another();
  writeFileSync(file, '');
  const delivered: string[] = [];
  const acked: string[] = [];
  for (const engine of [a, b]) {
    engine.broker.events.on('broker:dequeue', ({ evaluation: e }) => delivered.push(e.id));
    engine.broker.events.on('broker:ack', ({ evaluation: e }) => acked.push(e.id));
  }
  const results = await Promise.all(ids.flatMap((id) => [a.admin.replay(id), b.admin.replay(id), a.admin.replay(id), b.admin.replay(id)]));
  assert.equal(results.filter(Boolean).length, ids.length, 'one replay of each wins');
  while (acked.length < ids.length) await new Promise((resolve) => setTimeout(resolve, 20));
  // Time for a second delivery, were there one.
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.deepEqual([...acked].sort(), ids);
  assert.deepEqual([...delivered].sort(), ids);
  assert.deepEqual((await b.admin.evaluations({ state: 'failed' })).items, []);
});

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** Tasks `ids`, hourly (no run within a test), on `engine`. */
async function hourly(engine: Engine, ids: readonly string[]): Promise<void> {
  for (const id of ids) await engine.tasks.add({ id, every: '1h', maxConcurrency: 1, handler: 'value', payload: { n: 1 } });
}

/** The ids of the tasks `engine` claims, sorted. */
const claimedBy = (engine: Engine, ids: readonly string[]): string[] => ids.filter((id) => engine.tasks.taskStats(id) !== undefined);

test('processes lists every live process of the cluster with its threads, last renewal and claimed tasks', { skip }, async () => {
  const [a, b] = await cluster(2, { tasks: true });
  const ids = ['p0', 'p1', 'p2', 'p3'];
  await hourly(a!, ids);
  await until('two tasks claimed by each', () => claimedBy(a!, ids).length === 2 && claimedBy(b!, ids).length === 2);
  // The thread count is each process's live one, recorded at its renewals.
  await until('both processes renewed with their threads live', async () => (await a!.admin.processes()).every((p) => p.threads === 2));
  const before = Date.now();
  for (const engine of [a!, b!]) {
    const processes = await engine.admin.processes();
    assert.equal(processes.length, 2, 'both processes, from either');
    assert.deepEqual(processes.map((p) => p.claimedTasks).sort(), [claimedBy(a!, ids), claimedBy(b!, ids)].sort());
    for (const p of processes) {
      assert.deepEqual([p.host, p.pid, p.threads], [hostname(), process.pid, 2]);
      assert.ok(p.lastSeen > before - 3000 && p.lastSeen <= Date.now() + 1000, `lastSeen ${p.lastSeen} is a recent renewal`);
    }
  }
  await b!.stop({ graceMs: 100 });
  running.splice(running.indexOf(b!), 1);
  await until('the stopped process gone, its tasks claimed by the other', async () => {
    const processes = await a!.admin.processes();
    return processes.length === 1 && processes[0]!.claimedTasks.length === 4;
  });
});

test('tasks lists the whole catalogue from either process: schedule, claim, runs and the shared run log', { skip }, async () => {
  const [a, b] = await cluster(2, { tasks: true });
  const ids = ['c0', 'c1', 'c2'];
  await hourly(a!, ids);
  await b!.tasks.add({ id: 'fast', every: '200ms', maxConcurrency: 1, handler: 'value', payload: { n: 7 } });
  const all = [...ids, 'fast'].sort();
  await until('every task claimed', () => claimedBy(a!, all).length + claimedBy(b!, all).length === 4);
  await until('a run of fast logged', async () => (await a!.admin.task('fast'))?.lastRun?.finalStatus === 'success');
  for (const [engine, other] of [[a!, b!], [b!, a!]] as const) {
    const views = await engine.admin.tasks();
    assert.deepEqual(views.map((v) => v.id), all, 'the catalogue, whichever process claims each task');
    for (const view of views) {
      assert.equal(view.enabled, true);
      assert.equal(view.handler, 'value');
      assert.equal(view.maxConcurrency, 1);
      assert.deepEqual(view.claimedBy, { host: hostname(), pid: process.pid });
      const here = engine.tasks.taskStats(view.id) !== undefined;
      if (here) assert.ok(view.nextDue !== undefined, 'a task claimed here has its next run');
      else assert.equal(view.nextDue, undefined, 'not known for a task another process claims');
      assert.ok(here || other.tasks.taskStats(view.id) !== undefined);
    }
    assert.deepEqual(views.find((v) => v.id === 'c0')!.schedule, { every: 3_600_000 });
    assert.equal(views.find((v) => v.id === 'fast')!.lastRun?.taskId, 'fast', 'the last run, from the shared run log');
    const detail = (await engine.admin.task('fast'))!;
    assert.deepEqual(detail.payload, { n: 7 });
    assert.ok(detail.runs.length >= 1);
    assert.deepEqual(detail.lastRun, detail.runs[0]);
    assert.equal(await engine.admin.task('nope'), undefined);
  }
});

test('a task disabled from one process creates no runs anywhere and keeps its definition; enabled from the other, it runs again', { skip }, async () => {
  const [a, b] = await cluster(2, { tasks: true });
  await a!.tasks.add({ id: 'tick', every: '200ms', maxConcurrency: 1, handler: 'value', payload: { n: 1 } });
  await until('tick claimed', () => a!.tasks.taskStats('tick') !== undefined || b!.tasks.taskStats('tick') !== undefined);
  const owner = a!.tasks.taskStats('tick') !== undefined ? a! : b!;
  const other = owner === a ? b! : a!;
  await until('a run of tick logged', async () => (await other.admin.task('tick'))?.lastRun?.finalStatus === 'success');
  // Disabled from the process that does not run it: the one that does gives it up, and neither claims it again.
  await other.admin.disableTask('tick', { by: 'ops' });
  await until('tick claimed nowhere', async () => (await owner.admin.processes()).every((p) => !p.claimedTasks.includes('tick')));
  assert.equal(owner.tasks.taskStats('tick'), undefined);
  const disabled = (await owner.admin.task('tick'))!;
  assert.equal(disabled.enabled, false);
  assert.deepEqual(disabled.payload, { n: 1 }, 'its definition kept');
  const last = disabled.lastRun!;
  await sleep(1000);
  const later = (await other.admin.task('tick'))!;
  assert.equal(later.lastRun!.runId, last.runId, 'no run while disabled');
  assert.ok(later.runs.every((r) => r.finalStatus === 'success'), 'the runs in flight finished');
  assert.equal(a!.tasks.taskStats('tick'), undefined);
  assert.equal(b!.tasks.taskStats('tick'), undefined);
  // Disabling again changes nothing; unknown ids are refused, typed.
  await owner.admin.disableTask('tick');
  await assert.rejects(a!.admin.disableTask('nope'), { code: 'ERR_TASK_NOT_FOUND' });
  await assert.rejects(a!.admin.enableTask('nope'), { code: 'ERR_TASK_NOT_FOUND' });
  await owner.admin.enableTask('tick', { by: 'ops' });
  assert.equal((await other.admin.task('tick'))!.enabled, true);
  await until('tick runs again', async () => {
    const run = (await other.admin.task('tick'))?.lastRun;
    return run !== undefined && run.runId !== last.runId && run.finalStatus === 'success';
  });
});
