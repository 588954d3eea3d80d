/**
 * The demo, end to end: run the compiled `examples/cluster/main.js` headless as a child process with small sizes
 * and check its JSON report — work was done, no evaluation was lost, and the final state respects every node's
 * capacity. Also: bad flags exit with code 2, and `--metrics-port` serves Prometheus text while the demo runs.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseStrictJson } from '../helpers/strict-json.js';

const MAIN = fileURLToPath(new URL('../../examples/cluster/main.js', import.meta.url));

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function runDemo(args: readonly string[], onStderr?: (text: string) => void): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
      onStderr?.(stderr);
    });
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The report is the last line of stdout (pool threads may print their own lines before it). */
function lastJsonLine(stdout: string): Record<string, any> {
  const lines = stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1]!) as Record<string, any>;
}

test('the demo runs headless and its report holds: placements, nothing lost, capacity respected', { timeout: 60_000 }, async () => {
  const run = await runDemo(['--headless', '--duration', '3', '--nodes', '100', '--jobs', '150', '--threads', '2', '--rate', '300', '--log-level', 'warn']);
  assert.equal(run.code, 0, `exit code 0 expected; stderr:\n${run.stderr}`);
  const report = lastJsonLine(run.stdout);

  assert.equal(report['config'].nodes, 100);
  assert.equal(report['config'].threads, 2);

  const e = report['evaluations'];
  assert.ok(e.enqueued > 0, 'evaluations were enqueued');
  assert.ok(e.acked > 0, 'evaluations were acked');
  const b = e.inBroker;
  assert.equal(b.unacked, 0, 'nothing is left unacked after stop()');
  assert.equal(
    e.acked + e.superseded + b.ready + b.pending + b.unacked + b.waiting + b.cancelable + b.failed,
    e.enqueued,
    'every evaluation enqueued was acked, superseded, or is still in the broker (failed ones wait in _failed)',
  );
  assert.equal(e.lost, 0);
  assert.equal(b.failed, e.failed, 'every failed evaluation is in the _failed queue');

  assert.ok(report['placements'].allocsWritten > 0, 'placements were made');
  assert.ok(report['plans'].submitted > 0, 'plans were submitted');
  assert.ok(report['latencyMs'].dispatch.count > 0, 'dispatch latency was measured');
  assert.ok(report['latencyMs'].dispatch.p50 <= report['latencyMs'].dispatch.p99);
  const byType = report['latencyMs'].dispatchByType;
  assert.equal(
    Object.values<{ count: number }>(byType).reduce((n, l) => n + l.count, 0),
    report['latencyMs'].dispatch.count,
    'per-type dispatch latencies cover every measured evaluation',
  );

  const c = report['capacity'];
  assert.equal(c.nodes, 100);
  assert.ok(c.allocs > 0, 'the final state holds allocations');
  assert.equal(c.overcommitted, 0, 'no node uses more CPU or memory than it has');
  assert.equal(c.mismatched, 0, "every node's used capacity is the sum of its allocations");
  assert.equal(c.orphanAllocs, 0, 'every allocation is on a known node');

  const t = report['tasks'];
  assert.ok(t.runsStarted >= 1, 'the every-second task ran');
  assert.equal(t.onTime + t.late, t.runsStarted);
  assert.ok(t.finished.success >= 1, 'a task run succeeded');
  // Every started run ends in one final status; a run created but not started yet when the engine stops ends canceled.
  assert.ok(t.finished.success + t.finished.failed <= t.runsStarted);
  assert.ok(t.finished.success + t.finished.failed + t.finished.canceled >= t.runsStarted, 'every started run ended');
  assert.equal(t.lastSummary?.nodes, 100, 'the downsample task summarized every node');
});

test('bad flags print what is wrong and exit with code 2', async () => {
  for (const args of [['--threads', '0'], ['--nope'], ['--duration', 'soon'], ['--log-level', 'loud'], ['positional']]) {
    const run = await runDemo(args);
    assert.equal(run.code, 2, `exit code 2 for ${args.join(' ')}`);
    assert.match(run.stderr, /^error: /, `an error line for ${args.join(' ')}`);
    assert.match(run.stderr, /Usage:/);
    assert.equal(run.stdout, '');
  }
});

test('--metrics-port serves the engine registry on 127.0.0.1 during the run', { timeout: 60_000 }, async () => {
  let scraped: Promise<string> | undefined;
  const run = await runDemo(
    ['--headless', '--duration', '2', '--nodes', '50', '--jobs', '50', '--threads', '1', '--rate', '100', '--metrics-port', '0', '--log-level', 'info'],
    (stderr) => {
      const url = /"url":"(http:\/\/127\.0\.0\.1:\d+\/metrics)"/.exec(stderr)?.[1];
      if (url !== undefined && scraped === undefined) scraped = fetch(url).then((r) => r.text());
    },
  );
  assert.equal(run.code, 0, run.stderr);
  assert.ok(scraped !== undefined, 'the demo logged the metrics URL');
  const text = await scraped;
  assert.match(text, /^# HELP tickpool_broker_total_ready /m);
  assert.match(text, /^tickpool_plan_submitted_total /m);
});

test('with stderr redirected, the demo writes only JSON log lines there (no live line), each key once', { timeout: 60_000 }, async () => {
  const run = await runDemo(['--duration', '6', '--nodes', '50', '--jobs', '50', '--threads', '1', '--rate', '100', '--log-level', 'info']);
  assert.equal(run.code, 0, `exit code 0 expected; stderr:\n${run.stderr}`);
  const lines = run.stderr.split('\n').filter((l) => l !== '');
  assert.ok(lines.length > 0);
  for (const line of lines) assert.doesNotThrow(() => parseStrictJson(line), `a JSON line with unique keys: ${line}`);
  const progress = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l['msg'] === 'progress');
  assert.ok(progress.length >= 1, 'progress is logged as JSON every few seconds');
  assert.equal(typeof progress[0]!['done'], 'number');
  assert.match(run.stdout, /Evaluations/, 'the report still goes to stdout');
});
