/**
 * The demo runs on PostgreSQL too: `npm start -- --postgres URL --processes 3`, headless, a short run: every
 * evaluation enqueued is acked, superseded, failed or still in the broker (durable), none lost, and each process
 * has its line in the report.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { databaseUrl, requireDatabaseInCI, skipWithoutDatabase } from './helpers.js';

requireDatabaseInCI();

const main = fileURLToPath(new URL('../../examples/cluster/main.js', import.meta.url));

test('npm start -- --postgres URL --processes 3: a report per process and in total, nothing lost', { skip: skipWithoutDatabase, timeout: 180_000 }, async () => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [main, '--postgres', databaseUrl!, '--processes', '3', '--duration', '2', '--rate', '100', '--nodes', '200', '--jobs', '100', '--headless'],
    { timeout: 170_000 },
  );
  const report = JSON.parse(stdout) as {
    processes: { name: string; acked: number }[];
    total: { enqueued: number; acked: number; lost: number; leftInBroker: number };
    capacity: { overcommitted: number; orphanAllocs: number };
  };
  assert.deepEqual(report.processes.map((p) => p.name), ['p1', 'p2', 'p3']);
  assert.ok(report.total.enqueued > 0);
  assert.equal(report.total.lost, 0);
  assert.equal(report.total.acked, report.processes.reduce((n, p) => n + p.acked, 0));
  assert.equal(report.capacity.overcommitted, 0, 'the fit check held across processes');
  assert.equal(report.capacity.orphanAllocs, 0);
});

test('--processes without --postgres is a usage error', async () => {
  await assert.rejects(promisify(execFile)(process.execPath, [main, '--processes', '2']), (e: { code?: number; stderr?: string }) => e.code === 2 && /--processes needs --postgres/.test(e.stderr ?? ''));
});
