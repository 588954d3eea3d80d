/**
 * Schedule lag at 10,000 runs/s (10,000 `every: '1s'` tasks spread over the second by `offset`), on the system
 * timers, each measurement in a fresh child process:
 * - pool: due → the handler's first line on a pool thread through `engine.tasks` (the `PoolExecutor`, the
 *   engine's dispatcher, a thread waking up): the lag a user of the engine sees;
 * - in-process: due → entry of an executor that runs nothing (the task scheduler alone).
 * Goal p99 < 5 ms.
 *
 * Why child processes: lag p99 is set by garbage-collection pauses, and a process that has just held a million
 * tasks and run forced full collections (the tasks bench's other parts, the suite's other scopes) has a shrunken
 * heap that collects several times as often as a service's. The pool measurement read p99 2.7–3.5 ms in a fresh
 * process and 5–8 ms after those parts; one measurement's leftovers would skew the next in the same way.
 *
 *   node dist/bench/schedule-lag.bench.js [--quick]
 */
import { fork } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { sleep, systemClock, type Clock } from '../src/clock.js';
import { createEngine } from '../src/engine/engine.js';
import { createDefaultLogger } from '../src/observability/logger.js';
import { MemoryDesiredState } from '../src/tasks/memory-desired-state.js';
import { MemoryRunLog } from '../src/tasks/memory-run-log.js';
import type { TaskInput } from '../src/tasks/task.js';
import { TaskScheduler } from '../src/tasks/task-scheduler.js';
import { instantExecutor } from './lib/executors.js';
import { Latency, nowUs } from './lib/latency.js';
import type { TasksBenchResult } from './lib/tasks-result.js';

type LagKind = 'pool' | 'in-process';
/** Set in a child process: which measurement it makes, and for how long. */
const CHILD_KIND = 'TICKPOOL_BENCH_LAG_KIND';
const CHILD_SECONDS = 'TICKPOOL_BENCH_LAG_SECONDS';
const TASKS = 10_000;
const WARM_UP_MS = 1_000;

const logger = createDefaultLogger('tickpool-bench');

/** Epoch ms with sub-ms precision, on the system timers. */
const preciseClock: Clock = {
  now: () => nowUs() / 1000,
  setTimer: (callback, delayMs) => systemClock.setTimer(callback, delayMs),
  clearTimer: (handle) => systemClock.clearTimer(handle),
};

/** Task `i` of the load: every second, at offset `i mod 1000` ms (10 tasks due per ms). */
function lagTask(i: number, handler: string, payload?: unknown): TaskInput {
  return { id: `lag-${i}`, every: '1s', offset: i % 1000, maxConcurrency: 1, handler, ...(payload === undefined ? {} : { payload }) };
}

function result(kind: LagKind, lag: Latency, perSecond: number): TasksBenchResult {
  const s = lag.summary();
  const what = kind === 'pool' ? 'due → handler entry on a pool thread' : 'due → executor entry';
  const how = kind === 'pool' ? 'engine.tasks, 2 threads' : 'in-process executor';
  return {
    id: kind === 'pool' ? 'tasks.schedule-lag-pool' : 'tasks.schedule-lag',
    name: `schedule lag, ${what}, ${perSecond.toLocaleString('en-US')} runs/s (${how})`,
    opsPerSec: perSecond,
    p50Us: s.p50Us,
    p99Us: s.p99Us,
    notes: `${TASKS.toLocaleString('en-US')} every-1s tasks, offsets spread over the second; system timers (1 ms granularity); fresh process; p99.9 ${s.p999Us} µs; goal p99 < 5 ms`,
  };
}

async function inProcessLag(seconds: number): Promise<TasksBenchResult> {
  const lag = new Latency();
  let measuring = false;
  const store = new MemoryDesiredState({ clock: preciseClock });
  const scheduler = new TaskScheduler({
    desiredState: store,
    executor: instantExecutor((run) => {
      if (measuring) lag.recordUs((preciseClock.now() - run.runAt) * 1000);
    }),
    logWriter: new MemoryRunLog({ maxRunsPerTask: 2 }),
    clock: preciseClock,
    logger,
    tickMs: 0,
  });
  for (let i = 0; i < TASKS; i++) scheduler.claimTask(store.putTask(lagTask(i, 'noop')));
  scheduler.start();
  await sleep(systemClock, WARM_UP_MS);
  measuring = true;
  const t0 = performance.now();
  await sleep(systemClock, seconds * 1000);
  measuring = false;
  const elapsed = (performance.now() - t0) / 1000;
  await scheduler.stop();
  return result('in-process', lag, Math.round(lag.count / elapsed));
}

async function poolLag(seconds: number): Promise<TasksBenchResult> {
  // The handler writes each run's lag into the next slot of shared memory (bench/fixtures/lag-handler.ts).
  const capacity = TASKS * (seconds + 3);
  const lagsUs = new Float64Array(new SharedArrayBuffer(8 * capacity));
  const started = new Int32Array(new SharedArrayBuffer(4));
  const engine = createEngine({ threads: 2, clock: preciseClock, logger, handlers: { lag: new URL('./fixtures/lag-handler.js', import.meta.url) } });
  let from = 0;
  let to = 0;
  let elapsed = 0;
  await engine.start();
  try {
    for (let i = 0; i < TASKS; i++) engine.tasks.add(lagTask(i, 'lag', { lagsUs, started }));
    await sleep(systemClock, WARM_UP_MS);
    from = Atomics.load(started, 0);
    const t0 = performance.now();
    await sleep(systemClock, seconds * 1000);
    to = Math.min(Atomics.load(started, 0), capacity);
    elapsed = (performance.now() - t0) / 1000;
  } finally {
    // Read the slots only once every handler has returned: one may have taken a slot and not yet written it.
    await engine.stop({ graceMs: 1000 });
  }
  const lag = new Latency();
  for (let at = from; at < to; at++) lag.recordUs(lagsUs[at]!);
  return result('pool', lag, Math.round((to - from) / elapsed));
}

/** Runs one measurement in a child process of this module and returns what it reports. */
function inChild(kind: LagKind, seconds: number): Promise<TasksBenchResult> {
  return new Promise((resolve, reject) => {
    // The child's stdout (log lines) goes to our stderr: our stdout may be carrying JSON.
    const child = fork(fileURLToPath(import.meta.url), [], {
      env: { ...process.env, [CHILD_KIND]: kind, [CHILD_SECONDS]: String(seconds) },
      stdio: ['ignore', 2, 2, 'ipc'],
    });
    let reported: TasksBenchResult | undefined;
    const timer = setTimeout(() => child.kill(), (seconds + 60) * 1000);
    child.on('message', (message) => (reported = message as TasksBenchResult));
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      if (reported !== undefined) resolve(reported);
      else reject(new Error(`Expected the ${kind} schedule-lag child to report a result, but it exited with ${signal ?? code}`));
    });
  });
}

/** Both schedule lags, each in a fresh process. */
export async function runScheduleLag(options: { quick?: boolean } = {}): Promise<TasksBenchResult[]> {
  const seconds = options.quick === true ? 2 : 5;
  return [await inChild('pool', seconds), await inChild('in-process', seconds)];
}

const isMain = process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
const childKind = process.env[CHILD_KIND];
if (isMain && childKind !== undefined && process.send !== undefined) {
  const seconds = Number(process.env[CHILD_SECONDS]);
  const measured = childKind === 'pool' ? await poolLag(seconds) : await inProcessLag(seconds);
  process.send(measured, () => process.disconnect());
} else if (isMain) {
  for (const r of await runScheduleLag({ quick: process.argv.includes('--quick') })) console.log(`${r.name}: p50 ${r.p50Us} µs, p99 ${r.p99Us} µs (${r.notes})`);
}
