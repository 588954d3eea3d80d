/**
 * Tasks on PostgreSQL (issue 19), with N real engine processes on one fresh schema per scenario (dropped afterwards):
 * 1. due → handler entry latency at a steady rate (default 500 tasks `every: 500ms`, due times spread by offsets:
 *    1,000 runs/s), p50 / p99 / max over `--seconds` after a warm-up. Goal p50 < 5 ms, p99 < 20 ms.
 * 2. with `--tasks` tasks in the database (and a tenth as many, to show the tick is O(due)): how long the processes
 *    take to claim them all (claims/s), and the synchronous cost of the scheduler's `tick()` in each process, next
 *    to the in-memory backend's with the same tasks in one process, in the same run. The due rate is the same at
 *    both counts (`--tick-rate` runs/s in all), so an O(n) tick would show as a tick ten times dearer.
 * 3. `kill -9` of one process (after part 1, on its tasks) → the first run of one of its orphaned tasks in another
 *    process, and the time until every orphan ran again. Goal ≤ claimTtlMs + one period.
 *
 *   node dist/bench/postgres-tasks.bench.js --url postgres://… [--processes 3] [--tasks 100000] [--seconds 15]
 *     [--latency-tasks 500] [--every-ms 500] [--claim-ttl-ms 10000] [--warmup-seconds 3] [--tick-seconds 5]
 *     [--tick-rate 100] [--json]
 *
 * Not part of `npm run bench` (it needs a database). Every figure comes from this one run.
 */
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { Pool } from 'pg';
import { bulkDeclare } from './lib/bulk-declare.js';
import { TaskBenchProcess } from './lib/task-bench-process.js';
import type { Reply, TaskShape, TickRecord } from './lib/task-bench-protocol.js';

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    processes: { type: 'string' },
    tasks: { type: 'string' },
    seconds: { type: 'string' },
    'latency-tasks': { type: 'string' },
    'every-ms': { type: 'string' },
    'claim-ttl-ms': { type: 'string' },
    'warmup-seconds': { type: 'string' },
    'tick-seconds': { type: 'string' },
    'tick-rate': { type: 'string' },
    json: { type: 'boolean' },
  },
});
const url = values.url ?? process.env['TICKPOOL_TEST_DATABASE_URL'];
if (url === undefined) {
  process.stderr.write('usage: node dist/bench/postgres-tasks.bench.js --url postgres://user:pass@host:port/db [--tasks N] [--seconds N] [--processes N] [--json]\n');
  process.exit(2);
}

function numberFlag(name: keyof typeof values, fallback: number, min: number): number {
  const raw = values[name];
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min) {
    process.stderr.write(`Expected --${name} to be a number >= ${min}, got ${JSON.stringify(raw)}\n`);
    process.exit(2);
  }
  return value;
}

const PROCESSES = numberFlag('processes', 3, 2);
const TASKS = numberFlag('tasks', 100_000, 10);
const SECONDS = numberFlag('seconds', 15, 1);
const LATENCY_TASKS = numberFlag('latency-tasks', 500, 1);
const EVERY_MS = numberFlag('every-ms', 500, 10);
const CLAIM_TTL_MS = numberFlag('claim-ttl-ms', 10_000, 100);
const WARMUP_MS = numberFlag('warmup-seconds', 3, 0) * 1000;
const TICK_MS = numberFlag('tick-seconds', 5, 1) * 1000;
const TICK_RATE = numberFlag('tick-rate', 100, 1);
/**
 * Longest wait for claims to be taken or balanced before the bench gives up (a stuck scenario fails loudly). Long:
 * a process that claimed far beyond its share gives the excess back one claim at a time.
 */
const SETTLE_LIMIT_MS = 600_000;

const admin = new Pool({ connectionString: url, max: 2 });
/** Every process forked, so that a failure kills what is left instead of leaving engines on a dropped schema. */
const forked = new Set<TaskBenchProcess>();

const config = (schema: string, backend: 'postgres' | 'memory' = 'postgres') => ({ backend, url: url!, schema, claimTtlMs: CLAIM_TTL_MS });

async function forkProcess(schema: string, backend: 'postgres' | 'memory' = 'postgres'): Promise<TaskBenchProcess> {
  const p = await TaskBenchProcess.fork(config(schema, backend));
  forked.add(p);
  void p.exited.then(() => forked.delete(p));
  return p;
}

/** Stops a process's engine; one that fails to, or takes longer than 30 s, is killed. */
async function stopOrKill(p: TaskBenchProcess): Promise<void> {
  const limit = sleep(30_000, undefined, { ref: false }).then(() => Promise.reject(new Error('stop took too long')));
  await Promise.race([p.stop(), limit]).catch(() => {
    p.kill9();
    return p.exited;
  });
}

async function withSchema<T>(prefix: string, body: (schema: string, S: string) => Promise<T>): Promise<T> {
  const schema = `bench_${prefix}_${randomBytes(3).toString('hex')}`;
  try {
    return await body(schema, `"${schema}"`);
  } finally {
    await Promise.all([...forked].map(stopOrKill));
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}

/**
 * Puts the tasks in the database from a process of its own, which then stops (giving its claims back): the
 * processes measured start with every task declared and free. `engine.tasks.add` for a few hundred; for many, the
 * process only migrates the schema and the tasks go in through `bulkDeclare`. Answers the declarations' ms.
 */
async function declareAll(schema: string, S: string, shape: TaskShape, how: 'add' | 'bulk'): Promise<number> {
  const declarer = await forkProcess(schema);
  await declarer.request({ type: 'start' }, 'started');
  let ms: number;
  if (how === 'add') {
    ms = (await declarer.request({ type: 'declare', shape }, 'declared')).ms;
    await declarer.stop();
  } else {
    await declarer.stop();
    const t0 = performance.now();
    await bulkDeclare(admin, S, shape, Date.now());
    ms = performance.now() - t0;
  }
  return ms;
}

/** Forks the processes: their engines are created, nothing started. */
function forkProcesses(schema: string): Promise<TaskBenchProcess[]> {
  return Promise.all(Array.from({ length: PROCESSES }, () => forkProcess(schema)));
}

async function startAll(processes: readonly TaskBenchProcess[]): Promise<void> {
  await Promise.all(processes.map((p) => p.request({ type: 'start' }, 'started')));
}

async function until(what: string, check: () => Promise<boolean>, everyMs: number): Promise<void> {
  const deadline = Date.now() + SETTLE_LIMIT_MS;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up after ${SETTLE_LIMIT_MS} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

type Claims = Extract<Reply, { type: 'claims' }>;

/**
 * Waits until every process holds its fair share (⌈n/k⌉ at most, all n together: no hand-over left to do), as the
 * processes count their claims; answers their last counts.
 */
async function waitBalanced(processes: readonly TaskBenchProcess[], n: number): Promise<Claims[]> {
  const share = Math.ceil(n / processes.length);
  let claims: Claims[] = [];
  await until('the claims to balance', async () => {
    claims = await Promise.all(processes.map((p) => p.request({ type: 'claims' }, 'claims')));
    return claims.every((c) => c.held <= share) && claims.reduce((sum, c) => sum + c.held, 0) === n;
  }, 50);
  return claims;
}

const sorted = (xs: readonly number[]): number[] => [...xs].sort((a, b) => a - b);
const quantile = (s: readonly number[], q: number): number => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
const round = (x: number, digits = 2): number => Math.round(x * 10 ** digits) / 10 ** digits;

// ── 1 and 3: latency at a steady rate, then a kill -9 ────────────────────────────────────────────────────────────

interface LatencyResult {
  readonly tasks: number;
  readonly everyMs: number;
  readonly runsPerSecond: number;
  /** The tasks declared one `engine.tasks.add` at a time from one process (16 in flight). */
  readonly declareMs: number;
  readonly warmupMs: number;
  readonly measuredMs: number;
  readonly runs: number;
  readonly expectedRuns: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

interface FailoverResult {
  readonly claimTtlMs: number;
  readonly everyMs: number;
  readonly goalMs: number;
  readonly orphans: number;
  /** kill -9 → the first handler entry of one of its tasks in another process. */
  readonly firstMs: number;
  /** kill -9 → every orphan has run again elsewhere (NaN when some never did within the wait). */
  readonly allMs: number;
  readonly notResumed: number;
}

async function latencyAndFailover(): Promise<{ latency: LatencyResult; failover: FailoverResult }> {
  return withSchema('pgt_lat', async (schema, S) => {
    const shape: TaskShape = { count: LATENCY_TASKS, everyMs: EVERY_MS };
    const declareMs = await declareAll(schema, S, shape, 'add');
    const processes = await forkProcesses(schema);
    await startAll(processes);
    await waitBalanced(processes, shape.count);
    await sleep(WARMUP_MS);
    const from = Date.now();
    await sleep(SECONDS * 1000);
    const to = Date.now();
    // Runs due by `to` are recorded when they finish: a moment for the last ones.
    await sleep(1000);
    const late: number[] = [];
    for (const p of processes) {
      const { entries } = await p.request({ type: 'entries', from, to }, 'entries');
      for (let i = 0; i < entries.runAt.length; i++) late.push(entries.enteredAt[i]! - entries.runAt[i]!);
    }
    const s = sorted(late);
    const latency: LatencyResult = {
      tasks: shape.count,
      everyMs: shape.everyMs,
      runsPerSecond: round((shape.count * 1000) / shape.everyMs, 0),
      declareMs: round(declareMs, 0),
      warmupMs: WARMUP_MS,
      measuredMs: to - from,
      runs: s.length,
      expectedRuns: Math.round((shape.count * (to - from)) / shape.everyMs),
      p50Ms: round(quantile(s, 0.5)),
      p99Ms: round(quantile(s, 0.99)),
      maxMs: round(s[s.length - 1] ?? Number.NaN),
    };

    const victim = processes[processes.length - 1]!;
    const survivors = processes.slice(0, -1);
    const { taskIds: orphans } = await victim.request({ type: 'held' }, 'held');
    const killedAt = Date.now();
    victim.kill9();
    await victim.exited;
    const first = new Map<string, number>();
    // Long enough for the lease to end, a round to claim, and the catch-up run to start, with room to spare.
    const deadline = killedAt + CLAIM_TTL_MS + 2 * EVERY_MS + 5000;
    while (first.size < orphans.length && Date.now() < deadline) {
      await sleep(100);
      for (const p of survivors) {
        const reply = await p.request({ type: 'first-runs', taskIds: orphans, since: killedAt }, 'first-runs');
        for (const [taskId, at] of Object.entries(reply.first)) first.set(taskId, Math.min(at, first.get(taskId) ?? Infinity));
      }
    }
    const times = [...first.values()];
    const failover: FailoverResult = {
      claimTtlMs: CLAIM_TTL_MS,
      everyMs: EVERY_MS,
      goalMs: CLAIM_TTL_MS + EVERY_MS,
      orphans: orphans.length,
      firstMs: round(Math.min(...times) - killedAt, 0),
      allMs: first.size === orphans.length ? round(Math.max(...times) - killedAt, 0) : Number.NaN,
      notResumed: orphans.length - first.size,
    };
    return { latency, failover };
  });
}

// ── 2: claims/s and the tick, at two task counts ─────────────────────────────────────────────────────────────────

interface TickResult {
  readonly backend: 'postgres' | 'memory';
  readonly tasks: number;
  /** Processes whose ticks are pooled: each PostgreSQL process holds about tasks / processes. */
  readonly processes: number;
  readonly ticks: number;
  readonly duePerTick: number;
  readonly p50Us: number;
  readonly p99Us: number;
  readonly meanUs: number;
  /** Main-thread event-loop utilization over the recording, mean over the processes. */
  readonly elu: number;
}

interface ClaimResult {
  readonly tasks: number;
  readonly everyMs: number;
  /** Setup: the tasks put in with `bulkDeclare`. */
  readonly declareMs: number;
  /**
   * The first task scheduler starting (its claim keeper with it) → no task free, seen by the bench polling the
   * schema every 20 ms (the processes may not hold their shares yet: one may have claimed more than its share).
   */
  readonly claimMs: number;
  readonly claimsPerSecond: number;
  /** The first task scheduler starting → the last claim of the hand-overs that left every process with its share. */
  readonly balancedMs: number;
}

/** A period that makes the whole due rate `TICK_RATE` runs/s, whatever the task count. */
const tickShape = (count: number): TaskShape => ({ count, everyMs: Math.max(10, Math.round((count * 1000) / TICK_RATE)) });

function tickResult(backend: 'postgres' | 'memory', tasks: number, records: readonly TickRecord[]): TickResult {
  const us = sorted(records.flatMap((r) => r.us));
  const due = records.reduce((sum, r) => sum + r.due.reduce((a, b) => a + b, 0), 0);
  return {
    backend,
    tasks,
    processes: records.length,
    ticks: us.length,
    duePerTick: round(due / Math.max(1, us.length)),
    p50Us: round(quantile(us, 0.5)),
    p99Us: round(quantile(us, 0.99)),
    meanUs: round(us.reduce((a, b) => a + b, 0) / Math.max(1, us.length)),
    elu: round(records.reduce((a, r) => a + r.elu, 0) / Math.max(1, records.length), 3),
  };
}

async function recordTicks(processes: readonly TaskBenchProcess[]): Promise<TickRecord[]> {
  await Promise.all(processes.map((p) => p.request({ type: 'record-ticks' }, 'recording')));
  await sleep(TICK_MS);
  return Promise.all(processes.map(async (p) => (await p.request({ type: 'ticks' }, 'ticks')).ticks));
}

async function claimsAndTicks(count: number): Promise<{ claims: ClaimResult; ticks: TickResult }> {
  return withSchema('pgt_claims', async (schema, S) => {
    const shape = tickShape(count);
    const declareMs = await declareAll(schema, S, shape, 'bulk');
    const processes = await forkProcesses(schema);
    // Watched from before the engines start; EXISTS stops at the first free task, so the watch costs little.
    let allClaimedAt = Number.NaN;
    const watching = until('every task to be claimed', async () => {
      const { rows } = await admin.query<{ free: boolean }>(`SELECT EXISTS (SELECT 1 FROM ${S}.task_state WHERE owner IS NULL) AS free`);
      if (rows[0]!.free) return false;
      allClaimedAt = Date.now();
      return true;
    }, 20);
    await startAll(processes);
    await watching;
    const claims = await waitBalanced(processes, count);
    const startedAt = Math.min(...claims.map((c) => c.runningAt));
    const claimMs = allClaimedAt - startedAt;
    const balancedMs = Math.max(...claims.map((c) => c.lastClaimAt)) - startedAt;
    const records = await recordTicks(processes);
    return {
      claims: {
        tasks: count,
        everyMs: shape.everyMs,
        declareMs: round(declareMs, 0),
        claimMs: round(claimMs, 0),
        claimsPerSecond: round((count * 1000) / claimMs, 0),
        balancedMs: round(balancedMs, 0),
      },
      ticks: tickResult('postgres', count, records),
    };
  });
}

/** The baseline: the same tasks in one engine on the in-memory backend. */
async function memoryTicks(count: number): Promise<TickResult> {
  const p = await forkProcess('unused', 'memory');
  try {
    await p.request({ type: 'start' }, 'started');
    await p.request({ type: 'declare', shape: tickShape(count) }, 'declared');
    await sleep(1000);
    return tickResult('memory', count, await recordTicks([p]));
  } finally {
    await stopOrKill(p);
  }
}

// ── Report ──────────────────────────────────────────────────────────────────────────────────────────────────────

const n = (x: number): string => (Number.isFinite(x) ? x.toLocaleString('en-US') : String(x));
const row = (name: string, value: string): string => `${name.padEnd(78)} ${value}`;

try {
  const { latency, failover } = await latencyAndFailover();
  const counts = [...new Set([Math.max(10, Math.round(TASKS / 10)), TASKS])];
  const claims: ClaimResult[] = [];
  const ticks: TickResult[] = [];
  for (const count of counts) {
    const pg = await claimsAndTicks(count);
    claims.push(pg.claims);
    ticks.push(pg.ticks, await memoryTicks(count));
  }
  const result = { processes: PROCESSES, claimTtlMs: CLAIM_TTL_MS, latency, claims, ticks, failover };
  if (values.json === true) {
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
  } else {
    const lines = [
      `PostgreSQL tasks: ${PROCESSES} engine processes on one schema, claimTtlMs ${n(CLAIM_TTL_MS)} ms`,
      row(
        `due → handler entry, ${n(latency.tasks)} tasks every ${latency.everyMs} ms (${n(latency.runsPerSecond)} runs/s), p50 / p99 / max`,
        `${latency.p50Ms} / ${latency.p99Ms} / ${latency.maxMs} ms (goal p50 < 5, p99 < 20)`,
      ),
      row(`  declared with engine.tasks.add from one process, 16 in flight`, `${n(latency.declareMs)} ms (${n(round((latency.tasks * 1000) / latency.declareMs, 0))}/s)`),
      row(`  runs measured (${n(latency.measuredMs)} ms after ${n(latency.warmupMs)} ms warm-up) / expected`, `${n(latency.runs)} / ${n(latency.expectedRuns)}`),
      ...claims.map((c) =>
        row(
          `${n(c.tasks)} tasks: all claimed by ${PROCESSES} processes starting together; each at its share`,
          `${n(c.claimMs)} ms (${n(c.claimsPerSecond)} claims/s); ${n(c.balancedMs)} ms`,
        ),
      ),
      ...ticks.map((t) =>
        row(
          `tick(), ${n(t.tasks)} tasks, ${t.backend === 'postgres' ? `PostgreSQL, ${t.processes} processes` : 'in memory, 1 process'}: p50 / p99 / mean`,
          `${t.p50Us} / ${t.p99Us} / ${t.meanUs} µs; ${n(t.ticks)} ticks, ${t.duePerTick} due per tick, main ELU ${t.elu}`,
        ),
      ),
      row(
        `kill -9 → first run of an orphan elsewhere (every ${failover.everyMs} ms tasks)`,
        `${n(failover.firstMs)} ms (goal ≤ claimTtlMs + period = ${n(failover.goalMs)} ms)`,
      ),
      row(`  every one of its ${n(failover.orphans)} orphans running again elsewhere`, failover.notResumed === 0 ? `${n(failover.allMs)} ms` : `${failover.notResumed} never ran again`),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
  }
} finally {
  for (const p of forked) p.kill9();
  await admin.end();
}
