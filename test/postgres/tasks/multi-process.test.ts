/**
 * Three real engine processes share 60 tasks (`every: '500ms'`, maxConcurrency 1, catchUp 'all') on one real
 * PostgreSQL; each declares all 60 at start-up, at once. Their handlers record each attempt (task, scheduledFor,
 * process, start, end). One process is `kill -9`ed (first scenario) or has its database connections cut (second)
 * once every task has run LOSE_AFTER_RUNS times; the run goes on until every task has run END_AFTER_RUNS times.
 * Then, from the records:
 * - no (task, scheduledFor) runs twice, and none is missing between a task's first and last run;
 * - no two attempts of a task overlap in time (the killed process's attempts end at its kill);
 * - the lost process's tasks run again within claimTtlMs + one period, counted in the periods of a task that a
 *   surviving process ran all along (so a slow machine slows the yardstick too);
 * - the claims are balanced after settling (⌈n/k⌉ + 1 at most).
 * In the second scenario the cut-off process cancels its runs before its lease can pass, so no overlap appears.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import type { Pool } from 'pg';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from '../helpers.js';
import { CuttableProxy, readAttempts, TaskProcess, type Attempt } from './cluster-processes.js';

requireDatabaseInCI();

const TASKS = 60;
const EVERY_MS = 500;
const TTL_MS = 3000;
/** Runs of every task before a process is lost, and before the scenario ends. */
const LOSE_AFTER_RUNS = 10;
const END_AFTER_RUNS = 30;

interface LogRow {
  readonly task_id: string;
  readonly scheduled_for: number;
  readonly status: string;
  readonly final_status: string | null;
  readonly attempts: number;
  readonly processes: string[];
  readonly history: unknown[];
}

interface Scenario {
  /** When the lost process's lease ended and its tasks were claimed, ms after it was lost (for messages). */
  readonly timeline: { readonly leaseEnd: number; readonly claims: readonly string[] };
  /** The shared run log at the end, for the messages of failed checks. */
  readonly log: LogRow[];
  readonly schema: string;
  readonly processes: TaskProcess[];
  /** Attempts of every process, the lost one's included. */
  readonly attempts: Attempt[];
  readonly lostAt: number;
  /**
   * When the lost process could no longer run anything: read once `kill()` has returned (the signal sent), since
   * the process runs on until then and may record an end stamped after `lostAt`. For a cut, `lostAt`.
   */
  readonly killedAt: number;
  /** The tasks the lost process held when it was lost. */
  readonly orphans: string[];
  /** A task a surviving process held when the other was lost (and kept: claims settle without it moving). */
  readonly yardstick: string;
  /** Claims per live member after settling. */
  readonly claims: number[];
  readonly lost: TaskProcess;
}

async function until(what: string, limitMs: number, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting ${limitMs} ms for ${what}`);
    await sleep(50);
  }
}

/** Whether every task has at least `runs` successful runs in the shared run log. */
async function everyTaskRan(admin: Pool, S: string, runs: number): Promise<boolean> {
  const { rows } = await admin.query(
    `SELECT count(*)::int AS n FROM (SELECT task_id FROM ${S}.task_run_log WHERE final_status = 'success' GROUP BY task_id HAVING count(*) >= $1) t`,
    [runs],
  );
  return rows[0].n === TASKS;
}

/**
 * Periods of a yardstick task (one a surviving process held all along) whose attempts began in [from, to]: how
 * long that stretch was, in the unit the tasks run by.
 */
function periodsBetween(s: Scenario, from: number, to: number): number {
  const yardstick = s.attempts.filter((a) => a.task === s.yardstick && a.process !== s.lost.name);
  return yardstick.filter((a) => a.start >= from && a.start <= to).length;
}

async function memberOf(admin: Pool, S: string, pid: number): Promise<string> {
  const { rows } = await admin.query(`SELECT id FROM ${S}.task_members WHERE id LIKE $1 AND NOT dead ORDER BY joined_at DESC LIMIT 1`, [`%/${pid}/%`]);
  return rows[0].id;
}

/** Runs one scenario: three processes, one lost (`kill` or `cut`) after LOSE_AFTER_RUNS runs of each task. */
async function runScenario(admin: Pool, how: 'kill' | 'cut', dir: string): Promise<Scenario> {
  const schema = schemaName(`mp_${how}`);
  const S = `"${schema}"`;
  const url = new URL(databaseUrl!);
  const proxy = new CuttableProxy(url.hostname, Number(url.port));
  await proxy.listen();
  const viaProxy = new URL(databaseUrl!);
  viaProxy.port = String(proxy.port);
  // Started together: they migrate, start and declare the same tasks at once.
  const names = ['one', 'two', 'three'];
  const processes = await Promise.all(
    names.map((name, i) =>
      TaskProcess.start({
        name,
        url: how === 'cut' && i === 2 ? viaProxy.href : databaseUrl!,
        schema,
        recordFile: join(dir, `${how}-${name}.log`),
        claimTtlMs: TTL_MS,
        tasks: TASKS,
        every: `${EVERY_MS}ms`,
      }),
    ),
  );
  const { rows: catalogue } = await admin.query(`SELECT count(*)::int AS n FROM ${S}.tasks`);
  assert.equal(catalogue[0].n, TASKS, 'three processes declaring the same tasks at once: each task once');
  await until('the claims to settle', 30_000, async () => {
    const { rows } = await admin.query(`SELECT count(*)::int AS n FROM ${S}.task_state s JOIN ${S}.task_members m ON m.id = s.owner WHERE NOT m.dead GROUP BY s.owner`);
    return rows.length === 3 && rows.every((r: { n: number }) => r.n === TASKS / 3);
  });
  await until(`every task to run ${LOSE_AFTER_RUNS} times`, 60_000, () => everyTaskRan(admin, S, LOSE_AFTER_RUNS));
  const lost = processes[2]!;
  const member = await memberOf(admin, S, lost.pid);
  const orphans = (await admin.query(`SELECT task_id FROM ${S}.task_state WHERE owner = $1 ORDER BY task_id`, [member])).rows.map((r: { task_id: string }) => r.task_id);
  const yardstick = (await admin.query(`SELECT task_id FROM ${S}.task_state WHERE owner = $1 ORDER BY task_id LIMIT 1`, [await memberOf(admin, S, processes[0]!.pid)])).rows[0].task_id as string;
  const lostAt = Date.now();
  let killedAt = lostAt;
  if (how === 'kill') {
    lost.kill9();
    killedAt = Date.now();
    assert.equal((await lost.exited).signal, 'SIGKILL');
  } else {
    proxy.cut();
  }
  await until(`every task to run ${END_AFTER_RUNS} times`, 120_000, () => everyTaskRan(admin, S, END_AFTER_RUNS));
  const { rows: owners } = await admin.query(
    `SELECT count(*)::int AS n FROM ${S}.task_state s JOIN ${S}.task_members m ON m.id = s.owner WHERE NOT m.dead AND m.expires_at > now() GROUP BY s.owner`,
  );
  await Promise.all(processes.slice(0, 2).map((p) => p.stop()));
  if (how === 'cut') {
    lost.kill9();
    await lost.exited;
  }
  await proxy.close();

  const attempts = processes.flatMap((p) => readAttempts(p.recordFile, p === lost && how === 'kill' ? killedAt : Infinity));
  {
    // The database may have recorded an attempt's start on the lost process that its handler never wrote a line for:
    // killed after the commit and before the handler's first line, or cut off with the commit's answer on its way
    // (the process then never began it). No one can tell that from a begun attempt cut short at once, and the run
    // is settled as one: it began, and ended when its process was lost.
    const { rows } = await admin.query(
      `SELECT l.task_id, l.scheduled_for, h.value AS entry
         FROM ${S}.task_run_log l, jsonb_array_elements(l.history) h
        WHERE h.value->>'status' = 'started' AND h.value->>'process' = $1`,
      [member],
    );
    for (const row of rows as Array<{ task_id: string; scheduled_for: number; entry: { when: number; attempt: number } }>) {
      const written = attempts.some((a) => a.process === lost.name && a.task === row.task_id && a.scheduledFor === row.scheduled_for && a.attempt === row.entry.attempt);
      if (!written) attempts.push({ task: row.task_id, scheduledFor: row.scheduled_for, process: lost.name, start: row.entry.when, end: killedAt, attempt: row.entry.attempt, cutShort: true });
    }
  }
  const log = (await admin.query(`SELECT task_id, scheduled_for, status, final_status, attempts, processes, history FROM ${S}.task_run_log`)).rows as LogRow[];
  const timeline = (
    await admin.query(
      `SELECT (extract(epoch FROM m.expires_at) * 1000)::bigint AS lease_end,
              (SELECT json_agg(json_build_object('task', s.task_id, 'claimedAt', (extract(epoch FROM s.claimed_at) * 1000)::bigint)) FROM ${S}.task_state s WHERE s.task_id = ANY ($2)) AS claims
         FROM ${S}.task_members m WHERE m.id = $1`,
      [member, orphans],
    )
  ).rows[0] as { lease_end: string; claims: Array<{ task: string; claimedAt: number }> };
  await dropSchema(admin, schema);
  return { timeline: { leaseEnd: Number(timeline.lease_end) - lostAt, claims: timeline.claims.map((c) => `${c.task} +${c.claimedAt - lostAt}`) }, log, schema, processes, attempts, lostAt, killedAt, orphans, yardstick, claims: owners.map((r: { n: number }) => r.n), lost };
}

function byTask(attempts: readonly Attempt[]): Map<string, Attempt[]> {
  const map = new Map<string, Attempt[]>();
  for (const a of attempts) {
    let list = map.get(a.task);
    if (list === undefined) map.set(a.task, (list = []));
    list.push(a);
  }
  for (const list of map.values()) list.sort((x, y) => x.start - y.start);
  return map;
}

/** A lease in periods of the tasks. */
const LEASE_PERIODS = Math.ceil(TTL_MS / EVERY_MS);

/** The checks both scenarios share; answers the slowest orphan's delay (lost → running again elsewhere), in periods. */
function checkRuns(s: Scenario): number {
  const tasks = byTask(s.attempts);
  assert.equal(tasks.size, TASKS, 'every task ran');
  const twice: string[] = [];
  const missing: string[] = [];
  const overlaps: string[] = [];
  for (const [task, list] of tasks) {
    const seen = new Set<number>();
    for (const a of list) {
      if (seen.has(a.scheduledFor)) twice.push(`${task}@${a.scheduledFor}`);
      seen.add(a.scheduledFor);
    }
    const times = [...seen].sort((x, y) => x - y);
    for (let t = times[0]!; t < times[times.length - 1]!; t += EVERY_MS) if (!seen.has(t)) missing.push(`${task}@${t}`);
    for (let i = 1; i < list.length; i++) {
      const before = list[i - 1]!;
      const next = list[i]!;
      if (next.start < before.end) overlaps.push(`${task}: ${before.process}@${before.scheduledFor} [${before.start}, ${before.end}] and ${next.process}@${next.scheduledFor} from ${next.start}`);
    }
  }
  assert.deepEqual(twice, [], `no (task, scheduledFor) ran twice: ${JSON.stringify(twice.map((key) => s.log.find((row) => `${row.task_id}@${row.scheduled_for}` === key)))}`);
  const about = (keys: string[]): string =>
    JSON.stringify(keys.map((key) => s.log.find((row) => `${row.task_id}@${row.scheduled_for}` === key) ?? key), null, 1) + ` (lost at ${s.lostAt})`;
  assert.deepEqual(missing, [], `with catchUp 'all', no scheduled time is missing: ${about(missing)}`);
  assert.deepEqual(overlaps, [], 'no two runs of a task overlapped (maxConcurrency 1 across the processes)');

  // The lost process's tasks ran again elsewhere within claimTtlMs + one period.
  assert.equal(s.orphans.length, TASKS / 3);
  const late: string[] = [];
  let slowest = 0;
  for (const task of s.orphans) {
    const again = tasks.get(task)!.find((a) => a.process !== s.lost.name && a.start >= s.lostAt);
    const delay = again === undefined ? Infinity : periodsBetween(s, s.lostAt, again.start);
    slowest = Math.max(slowest, delay);
    if (!(delay <= LEASE_PERIODS + 2)) {
      const entries = s.log
        .filter((row) => row.task_id === task)
        .flatMap((row) => (row.history as Array<{ when: number; status: string; attempt: number }>).map((h) => ({ sf: row.scheduled_for - s.lostAt, ...h, when: h.when - s.lostAt })))
        .filter((h) => h.when > 0)
        .sort((x, y) => x.when - y.when)
        .slice(0, 6)
        .map((h) => `${h.status}(${h.sf})@+${Math.round(h.when)}`);
      late.push(`${task}: ${delay} periods [${entries.join(' ')}]`);
    }
  }
  assert.deepEqual(late, [], `the orphaned tasks ran again within claimTtlMs + one period (${LEASE_PERIODS + 2} periods of ${s.yardstick}): ${JSON.stringify(s.timeline)}`);

  // Balanced after settling: 60 tasks over 2 live processes, ⌈60/2⌉ + 1 at most each.
  assert.equal(s.claims.reduce((a, b) => a + b, 0), TASKS);
  assert.equal(s.claims.length, 2);
  for (const n of s.claims) assert.ok(n <= Math.ceil(TASKS / 2) + 1, `a process holds ${n} claims`);
  return slowest;
}

describe('three engine processes sharing 60 tasks on PostgreSQL', { skip: skipWithoutDatabase, timeout: 300_000 }, () => {
  let admin: Pool;
  let dir: string;
  before(() => {
    admin = adminPool();
    dir = mkdtempSync(join(tmpdir(), 'tickpool-mp-tasks-'));
  });
  after(async () => {
    await admin?.end();
    rmSync(dir, { recursive: true, force: true });
  });

  test('one process killed with SIGKILL a third of the way', async (t) => {
    const s = await runScenario(admin, 'kill', dir);
    const slowest = checkRuns(s);
    t.diagnostic(`kill -9 → every orphaned task running elsewhere: ${slowest} periods (lease ended +${s.timeline.leaseEnd} ms; claims ${s.timeline.claims.slice(0, 3).join(', ')} …)`);
    const killed = s.attempts.filter((a) => a.process === s.lost.name);
    assert.ok(killed.length > 0, 'the killed process ran tasks before it died');
    assert.ok(killed.every((a) => a.end <= s.killedAt), 'nothing of the killed process runs after its kill');
  });

  test("one process's database connections cut a third of the way: it cancels its runs before its lease can pass", async (t) => {
    const s = await runScenario(admin, 'cut', dir);
    const slowest = checkRuns(s);
    t.diagnostic(`connections cut → every orphaned task running elsewhere: ${slowest} periods (lease ended +${s.timeline.leaseEnd} ms; claims ${s.timeline.claims.slice(0, 3).join(", ")} …)`);
    const cut = s.attempts.filter((a) => a.process === s.lost.name);
    assert.ok(cut.length > 0, 'the cut-off process ran tasks before the cut');
    assert.ok(cut.every((a) => a.end !== Infinity), 'every attempt of the cut-off process ended (it canceled them)');
    const lastEnd = Math.max(...cut.map((a) => a.end));
    // It renewed last before the cut, and lets go at half the lease after that renewal was sent.
    const halfLease = Math.ceil(LEASE_PERIODS / 2);
    const took = periodsBetween(s, s.lostAt, lastEnd);
    assert.ok(took <= halfLease + 1, `its last attempt ended ${took} periods of ${s.yardstick} after the cut (half the lease: ${halfLease})`);
    const firstElsewhere = Math.min(...s.attempts.filter((a) => a.process !== s.lost.name && s.orphans.includes(a.task) && a.start >= s.lostAt).map((a) => a.start));
    assert.ok(lastEnd < firstElsewhere, 'its tasks ran elsewhere only after its runs here had stopped');
  });
});
