/**
 * The benchmark suite's own logic, without running a benchmark and without timing anything: command-line parsing,
 * floors (pass, fail naming the benchmark, a missing result, best of several runs), the normalisers and the
 * histogram arithmetic of the report.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fanOutFlatness, type FanOutPoint } from '../../bench/fan-out.bench.js';
import { bestOf, checkFloors, describeFailures, FLOORS, type Floor } from '../../bench/floors.js';
import { defaultSweepThreads, parseArgs, UsageError } from '../../bench/lib/cli.js';
import { fromBroker, fromSchedule, fromState, fromTasks, slug } from '../../bench/lib/normalise.js';
import type { BenchResult } from '../../bench/lib/types.js';
import { histogramOf, logBins, ninesOf } from '../../bench/report/histogram.js';
import { main } from '../../bench/run.js';

test('defaults: every scope, full profile, threads = cores, sweeps on, floors reported but not enforced', () => {
  const o = parseArgs([], 2);
  assert.deepEqual(o.scopes, ['broker', 'engine', 'tasks']);
  assert.equal(o.profile, 'full');
  assert.equal(o.quick, false);
  assert.equal(o.threads, 2);
  assert.deepEqual(o.sweepThreads, [1, 2, 3, 4]);
  assert.equal(o.sweeps, true);
  assert.equal(o.check, false);
  assert.equal(o.json, undefined);
  assert.equal(o.report, undefined);
});

test('--profile ci: quick, floors enforced, no sweeps (unless asked for)', () => {
  const o = parseArgs(['--profile', 'ci'], 2);
  assert.equal(o.profile, 'ci');
  assert.equal(o.quick, true);
  assert.equal(o.check, true);
  assert.equal(o.sweeps, false);
  assert.equal(parseArgs(['--profile=ci', '--sweeps'], 2).sweeps, true);
});

test('--scope takes one part, repeats and comma lists, without duplicates', () => {
  assert.deepEqual(parseArgs(['--scope', 'broker'], 4).scopes, ['broker']);
  assert.deepEqual(parseArgs(['--scope', 'tasks,engine', '--scope', 'engine'], 4).scopes, ['tasks', 'engine']);
  assert.deepEqual(parseArgs(['--scope=engine'], 4).scopes, ['engine']);
});

test('--json, --report, --threads, --sweep-threads, --check, --quick, --no-sweeps', () => {
  const o = parseArgs(['--json', 'out/b.json', '--report', 'rep', '--threads', '3', '--sweep-threads', '4,1,2,2', '--check', '--quick', '--no-sweeps'], 8);
  assert.equal(o.json, 'out/b.json');
  assert.equal(o.report, 'rep');
  assert.equal(o.threads, 3);
  assert.deepEqual(o.sweepThreads, [1, 2, 4]);
  assert.equal(o.check, true);
  assert.equal(o.quick, true);
  assert.equal(o.sweeps, false);
});

test('bad arguments are usage errors that say what was expected and what was received', () => {
  assert.throws(() => parseArgs(['--scope', 'state'], 2), (e: unknown) => e instanceof UsageError && /broker, engine, tasks.*"state"/.test(e.message));
  assert.throws(() => parseArgs(['--profile', 'fast'], 2), /full, ci.*"fast"/);
  assert.throws(() => parseArgs(['--threads', '0'], 2), /--threads expects an integer from 1 to 512, received "0"/);
  assert.throws(() => parseArgs(['--threads', 'two'], 2), /received "two"/);
  assert.throws(() => parseArgs(['--json'], 2), /--json expects a value/);
  assert.throws(() => parseArgs(['--json', '--quick'], 2), /--json expects a value/);
  assert.throws(() => parseArgs(['--sweep-threads', '1,x'], 2), /--sweep-threads/);
  assert.throws(() => parseArgs(['--frobnicate'], 2), /unknown argument "--frobnicate"/);
});

test('default sweep: 1..2×cores up to 8 points, then powers of two plus cores and 2×cores', () => {
  assert.deepEqual(defaultSweepThreads(1), [1, 2]);
  assert.deepEqual(defaultSweepThreads(2), [1, 2, 3, 4]);
  assert.deepEqual(defaultSweepThreads(4), [1, 2, 3, 4, 5, 6, 7, 8]);
  assert.deepEqual(defaultSweepThreads(6), [1, 2, 4, 6, 8, 12]);
  assert.deepEqual(defaultSweepThreads(16), [1, 2, 4, 8, 16, 32]);
});

test('main: --help prints usage and exits 0; a usage error exits 2 (no benchmark runs)', async () => {
  const logs: string[] = [];
  const original = { log: console.log, error: console.error };
  console.log = (...args: unknown[]) => void logs.push(args.join(' '));
  console.error = (...args: unknown[]) => void logs.push(args.join(' '));
  try {
    assert.equal(await main(['--help']), 0);
    assert.equal(await main(['--scope', 'nope']), 2);
  } finally {
    console.log = original.log;
    console.error = original.error;
  }
  assert.match(logs.join('\n'), /--profile full\|ci/);
  assert.match(logs.join('\n'), /--scope expects one of broker, engine, tasks, received "nope"/);
});

const engineThroughput = (ratio: number): BenchResult => ({ scope: 'engine', id: 'engine.throughput', name: 'throughput: no-op evaluations', ratio });
const brokerCycle = (name: string, opsPerSec: number): BenchResult => fromBroker([{ name, opsPerSec }])[0]!;
const tick = (ratio: number): BenchResult => ({ scope: 'tasks', id: 'tasks.tick-vs-scan', name: 'tick vs scan, 1% due', ratio });
const fairness = (ratio: number): BenchResult => ({ scope: 'engine', id: 'engine.fairness-60', name: 'mixed load at 60%', ratio });
const flatness = (ratio: number): BenchResult => ({ scope: 'engine', id: 'engine.fan-out.flatness.cost-0.2.writes-10', name: 'fan-out flatness', ratio });

test('every floor has a positive minimum, a unit and a goal, and the issue floors are there', () => {
  assert.ok(FLOORS.length >= 3);
  for (const f of FLOORS) {
    assert.ok(f.min > 0 && f.unit.length > 0 && f.goal.length > 0, f.id);
  }
  const byScope = (scope: string) => FLOORS.filter((f) => f.scope === scope).map((f) => f.min);
  assert.deepEqual(byScope('engine'), [1.0, 0.9, 0.67]);
  assert.deepEqual(byScope('broker'), [200_000]);
  assert.deepEqual(byScope('tasks'), [10]);
});

test('floors pass at the floor and fail below it, naming the benchmark', () => {
  const results = [engineThroughput(1.0), brokerCycle('cycle, 1k ready across 1k jobs', 199_999), brokerCycle('cycle, 100k deadlines', 900_000), tick(50), fairness(0.89), flatness(0.66)];
  const checks = checkFloors(results, ['broker', 'engine', 'tasks']);
  assert.equal(checks.length, 6);
  assert.deepEqual(checks.map((c) => c.pass), [true, false, true, true, false, false]);
  const failures = describeFailures(checks);
  assert.equal(failures.length, 3);
  assert.match(failures[2]!, /^FAIL fan-out flatness: 0.66× < floor 0.67×/);
  assert.match(failures[0]!, /^FAIL cycle, 1k ready across 1k jobs: 199,999 cycles\/s < floor 200,000 cycles\/s/);
  assert.match(failures[1]!, /^FAIL mixed load at 60%: 0.89× < floor 0.90×/);
});

test('a floor whose benchmark produced no result fails; a scope that did not run is not checked', () => {
  const checks = checkFloors([engineThroughput(3), fairness(1.1), flatness(0.9)], ['engine', 'broker']);
  assert.deepEqual(
    checks.map((c) => [c.floor, c.pass]),
    [
      ['engine throughput / raw piscina.run()', true],
      ['broker cycles/s', false],
      ["mixed-load fairness at 60%: short jobs' p99 / piscina's", true],
      ['fan-out: main CPU per evaluation at 2 threads / at 16', true],
    ],
  );
  assert.match(describeFailures(checks)[0]!, /FAIL broker cycles\/s: no result/);
  assert.deepEqual(checkFloors([engineThroughput(0.5)], ['tasks']).map((c) => c.floor), ['tasks tick vs scan at 1% due'], 'the engine floor is not checked when engine did not run');
  assert.equal(checkFloors([engineThroughput(0.5)], []).length, 0);
});

test('fan-out flatness is main CPU at 2 threads over at 16, per job cost and write count measured at both', () => {
  const point = (threads: number, writes: number, mainUsPerEval: number): FanOutPoint => ({
    costMs: 0.2, threads, writes, evaluations: 1000, mainUsPerEval, evalsPerSec: 1, piscinaMainUsPerTask: 40, piscinaPerSec: 1,
  });
  const results = fanOutFlatness([point(2, 10, 24), point(16, 10, 30), point(2, 0, 10), point(8, 0, 10)]);
  assert.deepEqual(results.map((r) => [r.id, r.ratio]), [['engine.fan-out.flatness.cost-0.2.writes-10', 0.8]], 'no flatness without a 16-thread point');
  assert.equal(checkFloors(results, ['engine']).find((c) => c.resultId === results[0]!.id)?.pass, true);
});

test('a ratio that is not a finite number fails', () => {
  const checks = checkFloors([{ ...engineThroughput(1), ratio: Number.NaN }], ['engine']);
  assert.equal(checks[0]!.pass, false);
  assert.equal(checks[0]!.value, undefined);
});

test('bestOf keeps the better run of each floor figure and leaves other figures alone', () => {
  const first = [engineThroughput(0.9), { scope: 'engine', id: 'engine.idle-latency', name: 'idle', ratio: 0.3 } as BenchResult];
  const second = [engineThroughput(1.4), { scope: 'engine', id: 'engine.idle-latency', name: 'idle', ratio: 0.9 } as BenchResult];
  const merged = bestOf(first, second);
  assert.equal(merged.find((r) => r.id === 'engine.throughput')!.ratio, 1.4);
  assert.equal(merged.find((r) => r.id === 'engine.idle-latency')!.ratio, 0.3, 'no floor reads it: the first run stands');
  const third = bestOf(merged, [engineThroughput(1.1)]);
  assert.equal(third.find((r) => r.id === 'engine.throughput')!.ratio, 1.4, 'a worse run does not replace a better one');
  const floors: Floor[] = [{ ...FLOORS[0]!, applies: () => false }];
  assert.equal(bestOf(first, second, floors)[0]!.ratio, 0.9);
});

test('attempt counts are reported with each check', () => {
  const checks = checkFloors([engineThroughput(1.2)], ['engine'], FLOORS, new Map([['engine.throughput', 3]]));
  assert.equal(checks[0]!.attempts, 3);
});

test('normalisers: stable ids, derived ratios against the baseline measured in the same run', () => {
  assert.equal(slug('cycle, 1k ready + 100k unacked deadlines pending'), 'cycle-1k-ready-100k-unacked-deadlines-pending');
  assert.equal(slug('tick, 1% due'), 'tick-1pct-due');
  const broker = fromBroker([{ name: 'cycle, 1k ready', opsPerSec: 1e6, p50Us: 1, notes: 'n' }]);
  assert.deepEqual(broker[0], { scope: 'broker', id: 'broker.cycle-1k-ready', name: 'cycle, 1k ready', opsPerSec: 1e6, p50Us: 1, notes: 'n', unit: 'cycles/s' });
  const schedule = fromSchedule([
    { name: 'cron-parser next(), America/New_York', opsPerSec: 20_000 },
    { name: 'Schedule.next() shared, 1000 tasks, America/New_York', opsPerSec: 20_000_000 },
    { name: 'Schedule.next() miss, UTC', opsPerSec: 5 },
  ]);
  assert.equal(schedule[1]!.ratio, 1000);
  assert.equal(schedule[1]!.baseline, 'cron-parser next(), America/New_York');
  assert.equal(schedule[2]!.ratio, undefined, 'no UTC baseline in this run: no ratio');
  const state = fromState([
    { name: 'snapshot+write, COW Map, 1,000 records', opsPerSec: 100 },
    { name: 'snapshot+write, hash trie, 1,000 records', opsPerSec: 25_000 },
    { name: 'get, Map, 1,000 records', opsPerSec: 40 },
    { name: 'get, StateStore snapshot, 1,000 records', opsPerSec: 10 },
  ]);
  assert.equal(state[1]!.ratio, 250);
  assert.equal(state[3]!.ratio, 0.25);
  assert.equal(state[1]!.scope, 'engine');
  assert.equal(state[1]!.name, 'state: snapshot+write, hash trie, 1,000 records');
});

test('report histogram: shares sum to 100% and land where the samples are', () => {
  const distribution = {
    label: 'x',
    count: 100,
    quantiles: [
      [0, 10],
      [50, 10],
      [90, 100],
      [100, 1000],
    ] as Array<[number, number]>,
  };
  const edges = logBins([distribution], 30);
  assert.equal(edges.length, 31);
  const shares = histogramOf(distribution, edges);
  assert.ok(Math.abs(shares.reduce((a, b) => a + b, 0) - 100) < 1e-9);
  assert.ok(shares[0]! >= 50, 'the point mass at 10 µs is in the first bin');
  assert.equal(ninesOf(0), 0);
  assert.ok(Math.abs(ninesOf(99) - 2) < 1e-9);
  assert.ok(Math.abs(ninesOf(99.9) - 3) < 1e-9);
});

test('tasks results keep their own ids; a malformed result is an error, not a silent pass', () => {
  const [tick] = fromTasks([{ id: 'tasks.tick-vs-scan', name: 'tick, 1% due', ratio: 40, baseline: 'scan', opsPerSec: 10_000, extra: 'dropped' }]);
  assert.deepEqual(tick, { scope: 'tasks', id: 'tasks.tick-vs-scan', name: 'tick, 1% due', ratio: 40, baseline: 'scan', opsPerSec: 10_000 });
  assert.equal(checkFloors([tick!], ['tasks'])[0]!.pass, true);
  assert.equal(fromTasks([{ name: 'bytes per task', bytesPerTask: 190 }])[0]!.id, 'tasks.bytes-per-task');
  assert.throws(() => fromTasks({}), /expected an array/);
  assert.throws(() => fromTasks([{ ratio: 1 }]), /result 0 has no name/);
});
