/**
 * Task scheduler benchmarks (issue 4), in one run:
 * 1. claims: claim 1,000,000 idle `every` tasks (maxConcurrency 1) through MemoryDesiredState + TaskScheduler;
 *    bytes per task (heap after GC / n, store and scheduler together) and claims/s. Goal < 300 bytes. Also the
 *    heap bytes per run kept in the default run log (MemoryRunLog).
 * 2. tick vs scan: with 1% of 1,000,000 tasks due per tick, the scheduler's due calendar against a
 *    scan-every-task tick like InfluxDB `scheduler.go` `Tick` (a Map of per-task objects, `now >= ts.nextDue()`),
 *    both doing the same minimal work per due task (compute its next due time). A per-task binary heap (the
 *    issue's literal "one heap entry per task") is measured beside them. Goal ≥ 50×.
 * 3. the real `TaskScheduler.tick` with 1M claimed tasks and 1% due: runs created and handed to an in-process
 *    executor, per run; and an idle tick.
 * 4. schedule lag at 10,000 runs/s, to a handler on a pool thread and to an in-process executor, each in a
 *    fresh child process (`schedule-lag.bench.ts`). Goal p99 < 5 ms.
 *
 *   node --expose-gc dist/bench/tasks.bench.js [--quick] [--json] [--only claims,tick,scheduler,lag]
 */
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { Bench } from 'tinybench';
import type { Clock } from '../src/clock.js';
import { createDefaultLogger } from '../src/observability/logger.js';
import { SlotTable } from '../src/slots/slot-table.js';
import { DueCalendar } from '../src/tasks/due-calendar.js';
import { MemoryDesiredState } from '../src/tasks/memory-desired-state.js';
import { MemoryRunLog } from '../src/tasks/memory-run-log.js';
import { parseSchedule, type Schedule } from '../src/tasks/schedule/index.js';
import { TaskScheduler } from '../src/tasks/task-scheduler.js';
import type { Task } from '../src/tasks/task.js';
import { RunStatus } from '../src/tasks/types.js';
import { instantExecutor, neverExecutor } from './lib/executors.js';
import { Latency, round } from './lib/latency.js';
import { runScheduleLag } from './schedule-lag.bench.js';
import type { TasksBenchResult } from './lib/tasks-result.js';

const START = Date.UTC(2026, 0, 1);
const logger = createDefaultLogger('tickpool-bench');

function gc(): boolean {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect === undefined) return false;
  collect();
  collect();
  return true;
}

function heapUsed(): number {
  gc();
  return process.memoryUsage().heapUsed;
}

/** A clock frozen at `now`, with timers that never fire: the claim and tick benches drive time by hand. */
function frozenClock(now: number): Clock {
  return { now: () => now, setTimer: () => ({ due: Infinity }), clearTimer: () => undefined };
}

// ── 1. claims ─────────────────────────────────────────────────────────────────────────────────────────────────

async function claims(n: number): Promise<TasksBenchResult[]> {
  const hasGc = gc();
  const before = heapUsed();
  const now = START + 1;
  const store = new MemoryDesiredState({ clock: frozenClock(now) });
  const slots = SlotTable.create({ initialSlots: 1024, maxSlots: Math.max(1 << 22, 2 * n) });
  const scheduler = new TaskScheduler({ desiredState: store, executor: neverExecutor(), logWriter: new MemoryRunLog(), clock: frozenClock(now), now, slots, logger, tickMs: 0 });

  let t0 = performance.now();
  for (let i = 0; i < n; i++) store.putTask({ id: `task-${i}`, every: '1h', maxConcurrency: 1, handler: 'noop' });
  const putMs = performance.now() - t0;
  const afterPut = heapUsed();

  t0 = performance.now();
  for (let i = 0; i < n; i++) scheduler.claimTask(store.getTask(`task-${i}`));
  const claimMs = performance.now() - t0;
  const afterClaim = heapUsed();

  if (scheduler.stats().claimedTasks !== n || scheduler.stats().runsActive !== 0) throw new Error('claims went wrong');
  const bytes = (afterClaim - before) / n;
  const storeBytes = (afterPut - before) / n;
  const schedulerBytes = (afterClaim - afterPut) / n;
  const slotBytes = slots.byteLength / n;
  // Keep both alive until measured.
  if (store.size !== n) throw new Error('store lost tasks');
  return [
    {
      id: 'tasks.claim-memory',
      name: `bytes per idle claimed task (${n.toLocaleString('en-US')} every tasks)`,
      notes: hasGc
        ? `${round(bytes)} B/task on the JS heap (goal < 300): task + id + store ${round(storeBytes)}, scheduler ${round(schedulerBytes)}; plus ${round(slotBytes)} B/task of shared slot table outside the heap`
        : 'run with --expose-gc to measure memory',
      ...(hasGc ? { bytesPerTask: round(bytes) } : {}),
    },
    {
      id: 'tasks.claim-rate',
      name: `claimTask, ${n.toLocaleString('en-US')} tasks`,
      opsPerSec: Math.round((n * 1000) / claimMs),
      notes: `claims/s into a scheduler already holding up to ${n.toLocaleString('en-US')}; putTask (validate + store) ${Math.round((n * 1000) / putMs).toLocaleString('en-US')}/s; put + claim ${Math.round((n * 1000) / (putMs + claimMs)).toLocaleString('en-US')}/s`,
    },
  ];
}

/**
 * Heap bytes per run kept in the default run log (`MemoryRunLog`, 100 runs per task), each run logged scheduled →
 * started → success. A log retains runs long enough to be promoted, so this is also what every run adds to the
 * scavenges that set the schedule lag's p99.
 */
function runLogMemory(tasks: number, runsPerTask: number): TasksBenchResult[] {
  const name = `bytes per run kept in MemoryRunLog (${tasks.toLocaleString('en-US')} tasks × ${runsPerTask} runs)`;
  if (!gc()) return [{ id: 'tasks.run-log-memory', name, notes: 'run with --expose-gc to measure memory' }];
  const log = new MemoryRunLog();
  const owners = Array.from({ length: tasks }, (_, i) => ({ id: `log-${i}` }) as Task);
  let seq = 0;
  const logRound = (): void => {
    for (const task of owners) {
      const runId = `run-${(seq++).toString(36)}`;
      const details = { scheduledFor: START + seq * 1000, runAt: START + seq * 1000, attempt: 1 };
      log.updateRunState(task, runId, START + seq + 0.25, RunStatus.SCHEDULED, details);
      log.updateRunState(task, runId, START + seq + 0.5, RunStatus.STARTED, details);
      log.updateRunState(task, runId, START + seq + 0.75, RunStatus.SUCCESS, details);
    }
  };
  logRound(); // the per-task arrays exist before the measurement
  const before = heapUsed();
  for (let k = 0; k < runsPerTask; k++) logRound();
  const perRun = (heapUsed() - before) / (tasks * runsPerTask);
  if (log.runs(owners[0]!.id).length !== runsPerTask + 1) throw new Error('the run log lost runs');
  return [
    {
      id: 'tasks.run-log-memory',
      name,
      bytesPerTask: round(perRun),
      notes: 'B/task column = bytes per retained run (scheduled → started → success): what each run adds to the heap and to scavenges',
    },
  ];
}

// ── 2. tick vs scan ───────────────────────────────────────────────────────────────────────────────────────────

/** Tasks due 1% per tick: every 100 s, offset (i mod 100) s, ticks one second apart. */
const PERIOD = 100_000;
const SLICES = 100;

/** `scheduler.go`'s per-task `taskScheduler`, reduced to what `Tick` touches. */
class SeedTaskScheduler {
  nextDueValue: number;
  readonly offset: number;
  constructor(nextDue: number, offset: number) {
    this.nextDueValue = nextDue;
    this.offset = offset;
  }
  nextDue(): number {
    return this.nextDueValue;
  }
  work(now: number, schedule: Schedule): void {
    this.nextDueValue = schedule.next(now - this.offset) + this.offset;
  }
}

/** One heap entry per task keyed by next due time: a binary heap over typed arrays (keys inline). */
class PerTaskHeap {
  readonly keys: Float64Array;
  readonly items: Int32Array;
  size = 0;
  constructor(capacity: number) {
    this.keys = new Float64Array(capacity);
    this.items = new Int32Array(capacity);
  }
  push(item: number, key: number): void {
    let at = this.size++;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (this.keys[parent]! <= key) break;
      this.keys[at] = this.keys[parent]!;
      this.items[at] = this.items[parent]!;
      at = parent;
    }
    this.keys[at] = key;
    this.items[at] = item;
  }
  /** Replaces the minimum's key and sifts it down (pop + push in one pass). */
  rekeyTop(key: number): void {
    const item = this.items[0]!;
    const n = this.size;
    let at = 0;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= n) break;
      if (child + 1 < n && this.keys[child + 1]! < this.keys[child]!) child++;
      if (this.keys[child]! >= key) break;
      this.keys[at] = this.keys[child]!;
      this.items[at] = this.items[child]!;
      at = child;
    }
    this.keys[at] = key;
    this.items[at] = item;
  }
}

async function tickVsScan(n: number, quick: boolean): Promise<TasksBenchResult[]> {
  const schedule = parseSchedule({ every: PERIOD });
  const offsets = new Int32Array(n);
  for (let i = 0; i < n; i++) offsets[i] = (i % SLICES) * 1000;
  const firstDue = (i: number): number => schedule.next(START - offsets[i]!) + offsets[i]!;

  // The scan of `scheduler.go` `Tick`: a Map of per-task objects keyed by task id.
  const seed = new Map<string, SeedTaskScheduler>();
  for (let i = 0; i < n; i++) seed.set(`task-${i}`, new SeedTaskScheduler(firstDue(i), offsets[i]!));
  let scanNow = START;
  let scanDue = 0;
  const scanTick = (): void => {
    scanNow += 1000;
    const now = scanNow;
    for (const ts of seed.values()) {
      if (now >= ts.nextDue()) {
        ts.work(now, schedule);
        scanDue++;
      }
    }
  };

  // The scheduler's due calendar, doing the same per due task.
  const calendar = new DueCalendar();
  for (let i = 0; i < n; i++) calendar.set(i, firstDue(i));
  let calNow = START;
  let calDue = 0;
  const calendarTick = (): void => {
    calNow += 1000;
    const now = calNow;
    for (let i = calendar.popDue(now); i >= 0; i = calendar.popDue(now)) {
      calendar.set(i, schedule.next(now - offsets[i]!) + offsets[i]!);
      calDue++;
    }
  };

  // One heap entry per task.
  const heap = new PerTaskHeap(n);
  for (let i = 0; i < n; i++) heap.push(i, firstDue(i));
  let heapNow = START;
  let heapDue = 0;
  const heapTick = (): void => {
    heapNow += 1000;
    const now = heapNow;
    while (heap.keys[0]! <= now) {
      const i = heap.items[0]!;
      heap.rekeyTop(schedule.next(now - offsets[i]!) + offsets[i]!);
      heapDue++;
    }
  };

  const bench = new Bench({ time: quick ? 400 : 2_000, warmupIterations: quick ? 3 : 10, iterations: 20, throws: true });
  bench.add('scan', scanTick).add('calendar', calendarTick).add('heap', heapTick);
  await bench.run();
  const [scan, cal, perTask] = bench.tasks.map((t) => {
    if (t.result.state !== 'completed') throw new Error(`bench ${t.name} ended ${t.result.state}`);
    return t.result.latency;
  });
  const perTick = (due: number, now: number): number => due / ((now - START) / 1000);
  const dueCal = perTick(calDue, calNow);
  const expected = n / SLICES;
  for (const [name, due] of [
    ['scan', perTick(scanDue, scanNow)],
    ['calendar', dueCal],
    ['heap', perTick(heapDue, heapNow)],
  ] as const) {
    if (Math.abs(due - expected) > 1) throw new Error(`${name} worked ${due} tasks per tick, expected ${expected}`);
  }
  const us = (ms: number): number => round(ms * 1000);
  const dueText = `${expected.toLocaleString('en-US')} of ${n.toLocaleString('en-US')} tasks due per tick`;
  return [
    {
      id: 'tasks.tick-vs-scan',
      name: `tick, 1% due: due calendar vs scan of every task (seed Tick), ${n.toLocaleString('en-US')} tasks`,
      ratio: round(scan!.mean / cal!.mean),
      baseline: 'seed-style scan tick',
      opsPerSec: Math.round(1000 / cal!.mean),
      p50Us: us(cal!.p50!),
      p99Us: us(cal!.p99!),
      notes: `${dueText}; calendar ${us(cal!.mean)} µs/tick (${round((cal!.mean * 1e6) / expected)} ns per due task), scan ${us(scan!.mean)} µs/tick (${round((scan!.mean * 1e6) / n)} ns per task); ops/s = ticks/s`,
    },
    {
      id: 'tasks.tick-per-task-heap-vs-scan',
      name: `tick, 1% due: one heap entry per task vs scan, ${n.toLocaleString('en-US')} tasks`,
      ratio: round(scan!.mean / perTask!.mean),
      baseline: 'seed-style scan tick',
      opsPerSec: Math.round(1000 / perTask!.mean),
      p50Us: us(perTask!.p50!),
      p99Us: us(perTask!.p99!),
      notes: `the issue's literal design, for reference: ${us(perTask!.mean)} µs/tick (${round((perTask!.mean * 1e6) / expected)} ns per due task: log2(n) cache-missing sift steps)`,
    },
  ];
}

// ── 3. the real TaskScheduler.tick ────────────────────────────────────────────────────────────────────────────

const IDLE_BATCH = 1000;

async function schedulerTick(n: number, ticks: number): Promise<TasksBenchResult[]> {
  let now = START;
  const clock: Clock = { now: () => now, setTimer: () => ({ due: Infinity }), clearTimer: () => undefined };
  const store = new MemoryDesiredState({ clock });
  const slots = SlotTable.create({ initialSlots: 1024, maxSlots: Math.max(1 << 22, 2 * n) });
  let entered = 0;
  const scheduler = new TaskScheduler({
    desiredState: store,
    executor: instantExecutor(() => entered++),
    logWriter: new MemoryRunLog({ maxRunsPerTask: 2 }),
    clock,
    now,
    slots,
    logger,
    tickMs: 0,
  });
  // Last completed one period ago: task i is first due at START + its offset, so each 1 s tick finds 1% due.
  const meta = { latestCompleted: START - PERIOD };
  for (let i = 0; i < n; i++) {
    const task = store.putTask({ id: `task-${i}`, every: PERIOD, offset: (i % SLICES) * 1000, maxConcurrency: 1, handler: 'noop' }, meta);
    scheduler.claimTask(task, meta);
  }
  const tickLatency = new Latency();
  const finishLatency = new Latency();
  const idleLatency = new Latency();
  let tickMs = 0;
  let finishMs = 0;
  let runs = 0;
  const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
  for (let k = 0; k < ticks + 3; k++) {
    now += 1000;
    const before = entered;
    const t0 = performance.now();
    scheduler.tick(now);
    const t1 = performance.now();
    await settle(); // completions: finishRun, log, slot freed, next due filed
    const t2 = performance.now();
    if (scheduler.stats().runsActive !== 0) throw new Error('runs did not complete within one turn');
    // Ticks with nothing due (half a second later): timed in a batch, as one costs less than a timestamp.
    const t3 = performance.now();
    for (let j = 0; j < IDLE_BATCH; j++) scheduler.tick(now + 500 + j / IDLE_BATCH);
    idleLatency.recordUs(((performance.now() - t3) * 1000) / IDLE_BATCH);
    if (k < 3) continue; // warm-up (the first tick also takes the offset-0 slice due at START)
    runs += entered - before;
    tickMs += t1 - t0;
    finishMs += t2 - t1;
    tickLatency.recordUs((t1 - t0) * 1000);
    finishLatency.recordUs((t2 - t1) * 1000);
  }
  const perRunUs = (tickMs * 1000) / runs;
  const finishUs = (finishMs * 1000) / runs;
  const tick = tickLatency.summary();
  const idle = idleLatency.summary();
  return [
    {
      id: 'tasks.scheduler-tick-1pct',
      name: `TaskScheduler.tick, ${n.toLocaleString('en-US')} claimed, 1% due (runs started in the tick)`,
      opsPerSec: Math.round((runs * 1000) / (tickMs + finishMs)),
      p50Us: tick.p50Us,
      p99Us: tick.p99Us,
      notes: `${(runs / ticks).toLocaleString('en-US')} runs per tick; ${round(perRunUs)} µs/run to create + log + execute inside tick(), ${round(finishUs)} µs/run to finish + log + free the slot; ops/s = runs/s through the scheduler; p50/p99 = whole tick; completion p50 ${finishLatency.summary().p50Us} µs`,
    },
    {
      id: 'tasks.scheduler-tick-idle',
      name: `TaskScheduler.tick with nothing due, ${n.toLocaleString('en-US')} claimed`,
      p50Us: idle.p50Us,
      p99Us: idle.p99Us,
      notes: `an idle tick looks at the earliest due time only; p50/p99 of ${IDLE_BATCH}-tick batch means`,
    },
  ];
}

export type TasksBenchPart = 'claims' | 'tick' | 'scheduler' | 'lag';
const PARTS: readonly TasksBenchPart[] = ['claims', 'tick', 'scheduler', 'lag'];

/** Runs the task benchmarks (`only`: a subset of parts; default all). `quick`: 200,000 tasks and short runs. */
export async function runTasksBench(options: { quick?: boolean; only?: readonly TasksBenchPart[] } = {}): Promise<TasksBenchResult[]> {
  const quick = options.quick === true;
  const only = options.only ?? PARTS;
  const n = quick ? 200_000 : 1_000_000;
  const results: TasksBenchResult[] = [];
  if (only.includes('claims')) {
    results.push(...(await claims(n)));
    results.push(...runLogMemory(10_000, quick ? 5 : 20));
  }
  gc();
  if (only.includes('tick')) results.push(...(await tickVsScan(n, quick)));
  gc();
  if (only.includes('scheduler')) results.push(...(await schedulerTick(n, quick ? 5 : 20)));
  gc();
  if (only.includes('lag')) results.push(...(await runScheduleLag({ quick })));
  return results;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const at = process.argv.indexOf('--only');
  const only = at < 0 ? undefined : (process.argv[at + 1] ?? '').split(',').filter((p): p is TasksBenchPart => (PARTS as readonly string[]).includes(p));
  const results = await runTasksBench({ quick: process.argv.includes('--quick'), ...(only === undefined ? {} : { only }) });
  if (process.argv.includes('--json')) console.log(JSON.stringify(results, null, 2));
  else {
    console.table(
      results.map((r) => ({
        benchmark: r.name,
        ratio: r.ratio === undefined ? '' : `${r.ratio}× ${r.baseline ?? ''}`,
        'ops/s': r.opsPerSec === undefined ? '' : r.opsPerSec.toLocaleString('en-US'),
        'p50 µs': r.p50Us ?? '',
        'p99 µs': r.p99Us ?? '',
        'B/task': r.bytesPerTask ?? '',
        notes: r.notes ?? '',
      })),
    );
  }
}
