/**
 * The dashboard in headless Chromium on the PostgreSQL backend: two engine processes on one schema (this one,
 * which serves the page, and a child process, `fixtures/cluster-process.ts`). The counts move cluster-wide, a type
 * paused by the other engine shows paused and is resumed from the page, a failed evaluation (its `<img onerror>`
 * payload shown as text) is fixed and replayed and the cluster acks it, a task run is forced and shows in the shared
 * run log, and an item running on the page's engine is canceled from its thread's row.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BroadcastChannel } from 'node:worker_threads';
import { after, test } from 'node:test';
import { createEngine, type Engine } from '../../src/engine/engine.js';
import { postgresBackend, type PostgresBackend } from '../../src/postgres/index.js';
import { fileURLToPath } from 'node:url';
import { ForkedChild } from '../postgres/child-process.js';
import { adminPool, databaseUrl, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from '../postgres/helpers.js';
import { evaluation, fixture, logger } from '../reliability/helpers.js';
import { openDashboard, shows, skipWithoutChromium, XSS } from './page.js';

requireDatabaseInCI();

type PgEngine = Engine<PostgresBackend>;
const skip = skipWithoutDatabase !== false ? skipWithoutDatabase : skipWithoutChromium;
const schedulers = { work: fixture('noop'), flaky: fixture('fails-until-file'), block: fixture('channel-gated') };
const dir = mkdtempSync(join(tmpdir(), 'tickpool-dash-pg-'));
const schema = schemaName('dash');
const engines: PgEngine[] = [];
const children: ForkedChild[] = [];
after(async () => {
  await Promise.all(children.map((c) => c.stop()));
  await Promise.all(engines.map((e) => e.stop({ graceMs: 100 })));
  rmSync(dir, { recursive: true, force: true });
  if (databaseUrl === undefined) return;
  const pool = adminPool();
  await dropSchema(pool, schema);
  await pool.end();
});

async function engineOnSchema(): Promise<PgEngine> {
  const engine = createEngine({
    threads: 2,
    workers: 8,
    logger,
    schedulers,
    handlers: { h: new URL('../postgres/tasks/fixtures/value-handler.js', import.meta.url) },
    broker: { deliveryLimit: 1, initialNackDelayMs: 0, subsequentNackDelayMs: 0 },
    backend: postgresBackend({ connectionString: databaseUrl!, schema, pollMs: 200 }),
  });
  engines.push(engine);
  await engine.start();
  return engine;
}

test('an operator steers a two-process PostgreSQL cluster from the page in headless Chromium', { skip, timeout: 180_000 }, async () => {
  const front = await engineOnSchema();
  const entry = fileURLToPath(new URL('./fixtures/cluster-process.js', import.meta.url));
  const { child: other, ready } = await ForkedChild.start<{ type: 'ready'; pid: number }>('the other engine process', entry, { TICKPOOL_CHILD_URL: databaseUrl!, TICKPOOL_CHILD_SCHEMA: schema });
  children.push(other);
  assert.notEqual(ready.pid, process.pid);
  const { page, dialogs, pageErrors, close } = await openDashboard(front as never);
  try {
    await shows(page, '[data-test=session]', (t) => t.includes('can change things'), 'that it may change things');

    // Paused by the other process, the type's evaluations pile up, counted for the whole cluster.
    await other.ask({ type: 'pause-type', name: 'work' }, 'done');
    const handles = Array.from({ length: 20 }, (_, i) => front.enqueue(evaluation(`w${i}`, 'work')));
    await Promise.all(handles.map((h) => h.accepted));
    await shows(page, '[data-test=total-ready] b', (t) => t === '20', '20 ready');
    await shows(page, '[data-test=queue-work]', (t) => t.includes('paused'), 'the type paused by the other process');
    await page.click('[data-test=resume-work]');
    for (const h of handles) assert.equal((await h.done).status, 'acked');
    await shows(page, '[data-test=total-ready] b', (t) => t === '0', 'the queue drained');

    // A failed evaluation: its payload is text; once its cause is fixed, a replay from the page runs it.
    const file = join(dir, 'fixed');
    const bad = front.enqueue(evaluation('bad', 'flaky', { file, note: XSS }));
    await assert.rejects(bad.done, { code: 'ERR_DELIVERY_LIMIT' });
    await page.click('[data-test=state-failed]');
    await page.waitForSelector('[data-test=eval-bad]', { timeout: 20_000 });
    await page.click('[data-test=eval-bad]');
    const payload = await shows(page, '[data-test=detail-payload]', (t) => t.includes('onerror'), 'the payload');
    assert.ok(payload.includes(XSS));
    assert.equal(await page.$$eval('#detail img, #detail script', (nodes) => nodes.length), 0);
    await shows(page, '[data-test=detail-failure]', (t) => t.includes('ERR_DELIVERY_LIMIT'), 'the failure');
    writeFileSync(file, 'fixed');
    await page.click('[data-test=replay]');
    await page.waitForSelector('[data-test=detail-gone]', { timeout: 20_000 });
    assert.equal((await bad.done).status, 'acked', 'replayed, it was acked (its done, read again, settles with the new outcome)');

    // A forced run of a task this process claimed (the two share the tasks), in the shared run log.
    await front.tasks.add({ id: 'hourly-a', every: '1h', maxConcurrency: 1, handler: 'h', payload: { n: 1 } });
    await front.tasks.add({ id: 'hourly-b', every: '1h', maxConcurrency: 1, handler: 'h', payload: { n: 1 } });
    const mine = await (async () => {
      for (;;) {
        // The catalogue is the cluster's: a run is forced by the process that claims the task.
        const claimedHere = (await front.admin.tasks()).find((t) => t.claimedBy?.pid === process.pid);
        if (claimedHere !== undefined) return claimedHere.id;
        await new Promise((resolve) => front.tasks.events.on('task:claim', resolve));
      }
    })();
    await page.waitForSelector(`[data-test=task-${mine}]`, { timeout: 20_000 });
    await page.click(`[data-test=task-${mine}]`);
    await page.click(`[data-test=run-${mine}]`);
    await shows(page, '[data-test=run-log]', (t) => t.includes('success'), 'the forced run in the run log');

    // An item on the page's engine, canceled from its thread's row: the other engine's workers stand aside.
    await other.ask({ type: 'pause-workers' }, 'done');
    const channel = new BroadcastChannel('dash-pg-block');
    let canceled = false;
    channel.onmessage = (event) => {
      if ((event as MessageEvent).data === 'started' && canceled) channel.postMessage('release');
    };
    const givenBack = new Promise<string>((resolve) => front.broker.events.on('broker:give-back', ({ evaluation: e }) => resolve(e.id)));
    const long = front.enqueue(evaluation('long', 'block', { channel: 'dash-pg-block' }));
    const button = await page.waitForSelector('[data-test^=cancel-]', { timeout: 20_000 });
    await button!.click();
    assert.equal(await givenBack, 'long');
    canceled = true;
    channel.postMessage('release');
    assert.equal((await long.done).status, 'acked');
    channel.close();
    await other.ask({ type: 'resume-workers' }, 'done');

    assert.deepEqual(dialogs, [], 'nothing the users wrote ran as script');
    assert.deepEqual(pageErrors, []);
  } finally {
    await close();
  }
});
