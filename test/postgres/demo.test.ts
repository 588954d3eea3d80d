/**
 * The demo runs on PostgreSQL too: `npm start -- --postgres URL --processes 3`, headless, a short run: every
 * evaluation enqueued is acked, superseded, failed or still in the broker (durable), none lost, and each process
 * has its line in the report; with the database away for a while mid-run, the same.
 */
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { databaseUrl, requireDatabaseInCI, skipWithoutDatabase } from './helpers.js';
import { Partition } from './proxy.js';

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

test('the database away mid-run (connections dropped, new ones refused): the demo waits, registers again, and loses nothing', { skip: skipWithoutDatabase, timeout: 180_000 }, async () => {
  const partition = new Partition(Number(new URL(databaseUrl!).port));
  const url = new URL(databaseUrl!);
  url.port = String(await partition.port);
  try {
    const child = spawn(process.execPath, [main, '--postgres', url.toString(), '--processes', '2', '--duration', '3', '--rate', '200', '--nodes', '200', '--jobs', '100', '--headless'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    // Events, not sleeps: the cut once the engine processes run, the return once the front has seen a write fail.
    const lines = createInterface({ input: child.stderr });
    let severed = false;
    let healed = false;
    lines.on('line', (line) => {
      if (!severed && /engine processes on schema/.test(line)) {
        severed = true;
        partition.sever();
      } else if (severed && !healed && line.includes('a registration write failed; retrying at the next tick')) {
        healed = true;
        partition.heal();
      }
    });
    const [code] = (await once(child, 'exit')) as [number | null];
    assert.equal(code, 0, 'the demo exits 0');
    assert.ok(healed, 'the front saw a registration write fail while the database was away, and said so');
    const report = JSON.parse(stdout) as { total: { enqueued: number; lost: number }; capacity: { overcommitted: number } };
    assert.ok(report.total.enqueued > 0);
    assert.equal(report.total.lost, 0);
    assert.equal(report.capacity.overcommitted, 0);
  } finally {
    await partition.close();
  }
});
