/**
 * Fault injection: one engine, 20,000 evaluations and 200 cron tasks, with faults injected in the scheduler and the
 * task handler at the rates — 2% exit their thread, 1% hang past a short nack timeout, 2% throw, 1% fail
 * retryably. Some faulty evaluations recover on a later delivery, some fault on every delivery.
 *
 * At the end nothing is lost and nothing is done twice:
 * - every evaluation was acked exactly once, or is in `_failed` with a `DeliveryLimitError` (and its last reason as
 *   `cause`) after the delivery limit — and every evaluation that faults on every delivery is in `_failed`, while
 *   none that faults fewer times than the limit, or not at all, is: each is charged only for its own faults;
 * - every task run logged exactly one final status, and the log matches the runs the scheduler reported;
 * - every slot of the slot table is idle, the pool is back at its thread count with nothing in flight, and the
 *   broker's counts balance to zero in flight; the engine still serves.
 *
 * Seeded: the seed decides every fault (printed; set TICKPOOL_SEED to replay one). Threads make the interleaving
 * differ from run to run; the faults, and so the invariants, do not. No sleeps: the test waits on broker and
 * scheduler events; the only clock-driven parts are the engine's own nack timeouts, cancel grace and cron ticks.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { createEngine } from '../../src/engine/engine.js';
import type { Evaluation } from '../../src/broker/evaluation.js';
import { SlotState } from '../../src/slots/slot-layout.js';
import { taskSchedulerOf } from '../../src/engine/engine-tasks.js';
import {
  FAULT_NAMES,
  Fault,
  PERSISTENT,
  faultFor,
  seededRandom,
  type FaultPayload,
  type FaultTaskPayload,
  type FaultValue,
} from '../fixtures/fault-plan.js';

const SEED = process.env['TICKPOOL_SEED'] === undefined ? (Date.now() * 7919) % 2 ** 31 : Number(process.env['TICKPOOL_SEED']);
assert.ok(Number.isSafeInteger(SEED), `TICKPOOL_SEED must be an integer, got ${process.env['TICKPOOL_SEED']}`);
console.log(`# faults: seed ${SEED} (replay with TICKPOOL_SEED=${SEED})`);

const EVALUATIONS = 20_000;
const TASKS = 200;
const THREADS = 6;
/** Evaluations in flight at once (one per worker): a hang holds at most WORKERS / THREADS of them behind it. */
const WORKERS = 48;
/** Short, but far above the time a healthy evaluation takes even on a loaded machine. */
const NACK_TIMEOUT_MS = 500;
const DELIVERY_LIMIT = 4;
const CANCEL_GRACE_MS = 200;
/** A task run that hangs blocks its thread past the nack timeout. */
const TASK_HANG_MS = Math.round(NACK_TIMEOUT_MS * 1.5);
/** Fails the test with a diagnosis instead of hanging when something is lost (the whole file must stay < 3 min). */
const WATCHDOG_MS = 150_000;

const fixture = (name: string): URL => new URL(`../fixtures/${name}.js`, import.meta.url);
const logger = pino({ level: 'silent' });
/** The thrower's own code for an error that crossed from a thread (`remoteCode`), else the error's code. */
const codeOf = (error: unknown): string | undefined => {
  const e = error as { code?: string; remoteCode?: string } | undefined;
  return e?.remoteCode ?? e?.code;
};

interface PlannedEvaluation {
  readonly id: string;
  readonly fault: FaultValue;
  readonly times: number;
}

function planEvaluations(seed: number): PlannedEvaluation[] {
  const random = seededRandom(seed);
  const plan: PlannedEvaluation[] = [];
  for (let i = 0; i < EVALUATIONS; i++) {
    const fault = faultFor(random(), random());
    const r = random();
    // Most faulty evaluations recover on their next delivery; some need two more; one in twenty never recovers.
    const times = fault === Fault.NONE ? 0 : r < 0.85 ? 1 : r < 0.95 ? 2 : PERSISTENT;
    plan.push({ id: `e${i}`, fault, times });
  }
  return plan;
}

test(`faults: ${EVALUATIONS} evaluations and ${TASKS} cron tasks with injected faults lose nothing`, { timeout: WATCHDOG_MS + 25_000 }, async (t) => {
  const started = Date.now();
  t.diagnostic(`seed ${SEED}`);
  const plan = planEvaluations(SEED);
  const engine = createEngine({
    threads: THREADS,
    workers: WORKERS,
    schedulers: { fault: fixture('fault-scheduler'), noop: fixture('noop') },
    handlers: { fault: fixture('fault-handler') },
    broker: { nackTimeoutMs: NACK_TIMEOUT_MS, deliveryLimit: DELIVERY_LIMIT, initialNackDelayMs: 0, subsequentNackDelayMs: 5 },
    cancelGraceMs: CANCEL_GRACE_MS,
    backoff: { baselineMs: 10, limitMs: 50 },
    logger,
  });

  // ── Observers ────────────────────────────────────────────────────────────────────────────────────────────────
  const acks = new Map<string, number>();
  const failed = new Set<string>();
  let nackTimeouts = 0;
  let threadExits = 0;
  const exitCodes = new Map<string, number>();
  let resolveDone!: () => void;
  const done = new Promise<void>((resolve) => (resolveDone = resolve));
  const check = (): void => {
    if (acks.size + failed.size === EVALUATIONS) resolveDone();
  };
  engine.broker.events.on('broker:ack', ({ evaluation }) => {
    acks.set(evaluation.id, (acks.get(evaluation.id) ?? 0) + 1);
    check();
  });
  engine.broker.events.on('broker:failed', ({ evaluation }) => {
    failed.add(evaluation.id);
    check();
  });
  engine.broker.events.on('broker:nack', ({ timedOut }) => (nackTimeouts += timedOut ? 1 : 0));
  engine.events.on('engine:thread-exit', ({ reason }) => {
    threadExits++;
    exitCodes.set(reason.code, (exitCodes.get(reason.code) ?? 0) + 1);
  });
  /** taskId → runId → final statuses reported by `task:run:finish`. */
  const finishes = new Map<string, Map<string, string[]>>();
  engine.tasks.events.on('task:run:finish', ({ taskId, runId, status }) => {
    let runs = finishes.get(taskId);
    if (runs === undefined) finishes.set(taskId, (runs = new Map()));
    runs.set(runId, [...(runs.get(runId) ?? []), status]);
  });

  // A failed assertion must not leave the engine's threads holding the test process open.
  t.after(() => engine.stop({ graceMs: 100 }));
  await engine.start();

  // ── Load: 200 cron tasks (6-field, every 5 s, spread over the seconds), then 20,000 evaluations ────────────────
  const taskCalls = new Int32Array(new SharedArrayBuffer(TASKS * 4));
  for (let i = 0; i < TASKS; i++) {
    const payload: FaultTaskPayload = { calls: taskCalls, task: i, seed: SEED, hangMs: TASK_HANG_MS };
    engine.tasks.add({ id: `task${i}`, cron: `${i % 5}/5 * * * * *`, maxConcurrency: 1 + (i % 3), retry: i % 3, handler: 'fault', payload });
  }
  const evalCalls = new Int32Array(new SharedArrayBuffer(EVALUATIONS * 4));
  plan.forEach(({ id, fault, times }, index) => {
    const payload: FaultPayload = { calls: evalCalls, index, fault, times };
    const evaluation: Evaluation = { id, jobId: `job-${id}`, type: 'fault', priority: 1 + (index % 100), payload };
    engine.enqueue(evaluation);
  });

  // ── Wait until every evaluation is acked or failed (or diagnose what is missing) ─────────────────────────────
  // TICKPOOL_FAULTS_PROGRESS=1 prints the counts every second (for diagnosing a slow or stuck run).
  const progress =
    process.env['TICKPOOL_FAULTS_PROGRESS'] === undefined
      ? undefined
      : setInterval(() => {
          const s = engine.stats();
          console.log(`# ${Date.now() - started} ms: acked ${acks.size} failed ${failed.size} exits ${threadExits} timeouts ${nackTimeouts} broker ${JSON.stringify({ ready: s.broker.totalReady, unacked: s.broker.totalUnacked, waiting: s.broker.totalWaiting })} pool ${JSON.stringify({ threads: s.pool.threads, inflight: s.pool.inflight, queued: s.pool.queued })} runs ${s.tasks.runsActive}`);
        }, 1000);
  let watchdog: NodeJS.Timeout | undefined;
  const timedOut = new Promise<'timeout'>((resolve) => (watchdog = setTimeout(() => resolve('timeout'), WATCHDOG_MS)));
  const outcome = await Promise.race([done.then(() => 'done' as const), timedOut]);
  clearTimeout(watchdog);
  clearInterval(progress);
  if (outcome === 'timeout') {
    const missing = plan.filter((p) => !acks.has(p.id) && !failed.has(p.id)).slice(0, 20);
    const where = missing.map((p) => ({ id: p.id, fault: FAULT_NAMES[p.fault], calls: Atomics.load(evalCalls, Number(p.id.slice(1))), info: engine.broker.inspect(p.id) }));
    await engine.stop({ graceMs: 100 });
    assert.fail(`after ${WATCHDOG_MS} ms, ${EVALUATIONS - acks.size - failed.size} evaluations were neither acked nor failed: ${JSON.stringify(where)}; engine ${JSON.stringify(engine.stats().broker)}`);
  }
  const evaluationsDoneMs = Date.now() - started;
  const acked = acks.size;

  // Stop the ticker: runs in flight end `canceled`; wait until every one has stopped.
  await taskSchedulerOf(engine.tasks).stop();

  // ── Evaluations: acked exactly once, or dead-lettered with the reason after the delivery limit ───────────────
  const causes = new Map<string, number>();
  let persistent = 0;
  let innocentFailed = 0;
  for (const { id, fault, times } of plan) {
    const acked = acks.get(id) ?? 0;
    if (failed.has(id)) {
      assert.equal(acked, 0, `${id} is in _failed and was acked`);
      const reason = engine.broker.failedReason(id);
      assert.equal(codeOf(reason), 'ERR_DELIVERY_LIMIT', `${id} failed for another reason: ${String(reason)}`);
      const deliveries = (reason as { details?: { deliveries?: number } }).details?.deliveries ?? 0;
      assert.ok(deliveries >= DELIVERY_LIMIT, `${id} failed after ${deliveries} deliveries`);
      const cause = codeOf(reason?.cause) ?? 'none';
      causes.set(cause, (causes.get(cause) ?? 0) + 1);
      assert.equal(engine.broker.inspect(id)?.state, 'failed');
      if (fault === Fault.NONE) innocentFailed++;
    } else {
      assert.equal(acked, 1, `${id} (${FAULT_NAMES[fault]} ×${times}) acked ${acked} times`);
      assert.equal(engine.broker.inspect(id), undefined, `${id} is acked but still held by the broker`);
    }
    if (times === PERSISTENT) {
      persistent++;
      assert.ok(failed.has(id), `${id} faults (${FAULT_NAMES[fault]}) on every delivery, so it must end in _failed`);
    } else {
      // Charged only for its own faults: fewer of them than the delivery limit leaves a delivery that succeeds.
      assert.ok(!failed.has(id), `${id} (${FAULT_NAMES[fault]} ×${times}) ended in _failed, charged for others' faults: ${String(engine.broker.failedReason(id)?.cause)}`);
    }
  }
  assert.equal(innocentFailed, 0, 'no fault-free evaluation is in _failed');
  // Every reason is one the faults explain: the injected errors, thread deaths, nack timeouts, cancels.
  const explained = new Set(['E_INJECTED_THROW', 'E_INJECTED_RETRYABLE', 'ERR_THREAD_EXITED', 'ERR_NACK_TIMEOUT_REACHED', 'ERR_CANCELED']);
  for (const cause of causes.keys()) assert.ok(explained.has(cause), `unexpected failure cause ${cause}`);

  // ── Task runs: exactly one final status each, in the log and in the events ───────────────────────────────────
  const runStatuses = new Map<string, number>();
  let runs = 0;
  for (let i = 0; i < TASKS; i++) {
    const taskId = `task${i}`;
    const logged = engine.tasks.runLog.runs(taskId);
    const reported = finishes.get(taskId) ?? new Map<string, string[]>();
    assert.equal(logged.length, reported.size, `${taskId}: the log and the finish events disagree on the number of runs`);
    for (const run of logged) {
      runs++;
      const finals = run.history.filter((h) => h.status === 'success' || h.status === 'failed' || h.status === 'canceled');
      assert.equal(finals.length, 1, `${taskId}/${run.runId} logged ${finals.length} final statuses: ${JSON.stringify(run.history)}`);
      assert.equal(run.finalStatus, finals[0]!.status);
      assert.deepEqual(reported.get(run.runId), [run.finalStatus], `${taskId}/${run.runId}: finish events`);
      runStatuses.set(run.finalStatus!, (runStatuses.get(run.finalStatus!) ?? 0) + 1);
    }
  }
  assert.ok(runs >= TASKS, `every task ran at least once (${runs} runs)`);

  // ── While it runs: the pool is back at its thread count, the broker balances to zero in flight ───────────────
  let stats = engine.stats();
  assert.equal(stats.pool.threads, THREADS, 'the pool is back at its thread count');
  assert.equal(stats.pool.threadExits, threadExits);
  const b = stats.broker;
  assert.deepEqual(
    { ready: b.totalReady, unacked: b.totalUnacked, pending: b.totalPending, waiting: b.totalWaiting, cancelable: b.totalCancelable, failed: b.totalFailed },
    { ready: 0, unacked: 0, pending: 0, waiting: 0, cancelable: 0, failed: failed.size },
  );
  for (const [queue, s] of Object.entries(b.byScheduler)) assert.equal(s.unacked, 0, `queue ${queue} has nothing unacked`);
  assert.ok(threadExits > 0 && nackTimeouts > 0, 'the faults happened');
  // Deliveries that lost to their nack deadline may still be stopping on a thread (a hang sees its cancel within
  // milliseconds; a hard hang is terminated after the cancel grace): their slots are not idle yet.
  let stopping = 0;
  for (let slot = 0; slot < engine.slots.capacity; slot++) if (engine.slots.state(slot) !== SlotState.IDLE) stopping++;

  // ── The engine still serves ──────────────────────────────────────────────────────────────────────────────────
  const more = new Promise<void>((resolve) => {
    let n = 0;
    engine.broker.events.on('broker:ack', ({ evaluation }) => {
      if (evaluation.type === 'noop' && ++n === 100) resolve();
    });
  });
  for (let i = 0; i < 100; i++) engine.enqueue({ id: `after${i}`, jobId: `after${i}`, type: 'noop', priority: 50 });
  await more;

  // ── Stopped without force (nothing was stuck): every slot idle, every dispatched item settled ─────────────────
  const stopEvent = new Promise<{ requeued: number; forced: boolean }>((resolve) => engine.events.once('engine:stop', resolve));
  await engine.stop({ graceMs: 10_000 });
  assert.deepEqual(await stopEvent, { requeued: 0, forced: false });
  for (let slot = 0; slot < engine.slots.capacity; slot++) {
    const state = engine.slots.state(slot);
    assert.equal(state, SlotState.IDLE, `slot ${slot} is idle (state ${state}, generation ${engine.slots.generation(slot)}, owner ${engine.slots.owner(slot)})`);
  }
  stats = engine.stats();
  assert.equal(stats.tasks.runsActive, 0);
  assert.equal(stats.tasks.slotsBusy, 0);
  assert.equal(stats.pool.inflight, 0);
  assert.equal(stats.pool.queued, 0);
  assert.equal(stats.pool.dispatched, stats.pool.settled, 'every dispatched item settled exactly once');
  assert.equal(stats.broker.totalUnacked, 0);

  const faults = new Map<string, number>();
  for (const p of plan) if (p.fault !== Fault.NONE) faults.set(FAULT_NAMES[p.fault], (faults.get(FAULT_NAMES[p.fault]) ?? 0) + 1);
  t.diagnostic(`evaluations: ${acked} acked, ${failed.size} in _failed (${persistent} never recover, ${innocentFailed} fault-free ones hit by others' faults) in ${evaluationsDoneMs} ms`);
  t.diagnostic(`injected evaluation faults: ${JSON.stringify(Object.fromEntries(faults))}; _failed causes: ${JSON.stringify(Object.fromEntries(causes))}`);
  t.diagnostic(`thread exits: ${threadExits} ${JSON.stringify(Object.fromEntries(exitCodes))}; nack timeouts: ${nackTimeouts}`);
  t.diagnostic(`task runs: ${runs} ${JSON.stringify(Object.fromEntries(runStatuses))}; task invocations: ${taskCalls.reduce((a, b) => a + b, 0)}`);
  t.diagnostic(`slots still stopping when the last evaluation was settled: ${stopping}`);
  t.diagnostic(`total ${Date.now() - started} ms`);
});
