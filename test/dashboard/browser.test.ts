/**
 * The dashboard in real headless Chromium (Debian's `chromium`, driven by puppeteer-core), against a real engine on
 * real threads: the counts move, a failed evaluation is opened (its `<img onerror>` payload shows as text and fires
 * nothing), replayed and acked; a type is paused and resumed; a task run is forced and shows in the run log; a
 * running item is canceled. Waits are for what the page or the engine shows, never for time.
 *
 * With TICKPOOL_DASHBOARD_SCREENSHOT=<file> it saves a screenshot of the page there (the README's).
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { createDashboard } from '../../src/dashboard/dashboard.js';
import { Gate, newGate, set, waitFor } from '../fixtures/gates.js';
import { evaluation, failures, fixture, started } from '../reliability/helpers.js';
import { openDashboard, shows, skipWithoutChromium as skip, TOKEN, XSS } from './page.js';

// What the functions evaluated in the page read there (the suite compiles without the DOM's types).
declare const location: { readonly hash: string };

test('an operator sees the engine move and steers it from the page in headless Chromium', { skip, timeout: 120_000 }, async () => {
  const engine = await started({
    threads: 2,
    schedulers: { work: fixture('noop'), flaky: fixture('faulty'), block: fixture('gated') },
    handlers: { h: fixture('task-handler') },
    broker: { deliveryLimit: 1, initialNackDelayMs: 0, subsequentNackDelayMs: 0 },
  });
  engine.tasks.add({ id: 'hourly', every: '1h', maxConcurrency: 1, handler: 'h', payload: { gate: newGate(), mode: 'ok' } });
  const { page, dialogs, pageErrors, close } = await openDashboard(engine);
  await shows(page, '[data-test=session]', (t) => t.includes('can change things'), 'that it may change things');
  assert.equal(await page.evaluate(() => location.hash), '', 'the token left the address');

  // The counts move: a paused type's evaluations pile up, and drain once it is resumed from the page.
  await engine.admin.pauseType('work');
  const runs = Array.from({ length: 30 }, (_, i) => engine.run(evaluation(`w${i}`, 'work')));
  await shows(page, '[data-test=total-ready] b', (t) => t === '30', '30 ready');
  await shows(page, '[data-test=queue-work]', (t) => t.includes('paused'), 'the paused type');
  await page.click('[data-test=resume-work]');
  for (const run of runs) assert.equal((await run).status, 'acked');
  await shows(page, '[data-test=total-ready] b', (t) => t === '0', 'the queue drained');
  await page.click('[data-test=pause-work]');
  await shows(page, '[data-test=queue-work]', (t) => t.includes('paused'), 'the type paused from the page');
  assert.deepEqual(await engine.admin.pausedTypes(), ['work']);
  await page.click('[data-test=resume-work]');
  await shows(page, '[data-test=queue-work]', (t) => t.includes('running'), 'the type resumed from the page');

  // A failed evaluation, opened: its payload is text.
  const failed = failures(engine, 1);
  void engine.run(evaluation('bad', 'flaky', { gate: newGate(), fault: 'throw', note: XSS })).catch(() => undefined);
  await failed;
  await page.click('[data-test=state-failed]');
  await page.waitForSelector('[data-test=eval-bad]');
  await page.click('[data-test=eval-bad]');
  const payload = await shows(page, '[data-test=detail-payload]', (t) => t.includes('onerror'), 'the payload');
  assert.ok(payload.includes(XSS), 'the payload shows as the text it is');
  assert.equal(await page.$$eval('#detail img, #detail script', (nodes) => nodes.length), 0, 'no markup came from the payload');
  await shows(page, '[data-test=detail-failure]', (t) => t.includes('ERR_DELIVERY_LIMIT'), 'the failure');
  const acked = new Promise<void>((resolve) => engine.broker.events.on('broker:ack', ({ evaluation: e }) => e.id === 'bad' && resolve()));
  await page.click('[data-test=replay]');
  await acked;
  await page.waitForSelector('[data-test=detail-gone]');

  // A forced task run shows in the run log.
  await page.click('[data-test=task-hourly]');
  await page.click('[data-test=run-hourly]');
  await shows(page, '[data-test=run-log]', (t) => t.includes('success'), 'the forced run in the run log');

  // A running item, canceled from its thread's row.
  const gate = newGate();
  const givenBack = new Promise<string>((resolve) => engine.broker.events.on('broker:give-back', ({ evaluation: e }) => resolve(e.id)));
  const long = engine.run(evaluation('long', 'block', { gate }));
  await waitFor(gate, Gate.STARTED, 1);
  const button = await page.waitForSelector('[data-test^=cancel-]', { timeout: 20_000 });
  await button!.click();
  assert.equal(await givenBack, 'long');
  set(gate, Gate.RELEASE, 1);
  assert.equal((await long).status, 'acked');

  const screenshot = process.env['TICKPOOL_DASHBOARD_SCREENSHOT'];
  if (screenshot !== undefined && screenshot !== '') await page.screenshot({ path: screenshot as `${string}.png`, fullPage: true });
  assert.deepEqual(dialogs, [], 'nothing the users wrote ran as script');
  assert.deepEqual(pageErrors, []);
  await close();
});

test('without a token the page is read-only, and a change from another origin is refused', { timeout: 60_000 }, async () => {
  const engine = await started({ threads: 1, schedulers: { work: fixture('noop') } });
  const dashboard = createDashboard(engine, { token: TOKEN });
  const local = createServer(dashboard);
  await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
  const { port } = local.address() as AddressInfo;
  try {
    const base = `http://127.0.0.1:${port}`;
    const session = (await (await fetch(`${base}/api/session`)).json()) as Record<string, unknown>;
    assert.deepEqual({ ...session, process: undefined }, { writable: false, by: 'dashboard', title: 'tickpool', process: undefined });
    assert.equal((session['process'] as { pid: number }).pid, process.pid);
    const anonymous = await fetch(`${base}/api/types/work/pause`, { method: 'POST', headers: { Origin: base } });
    assert.equal(anonymous.status, 403);
    const crossSite = await fetch(`${base}/api/types/work/pause`, { method: 'POST', headers: { Origin: 'https://evil.example', Authorization: `Bearer ${TOKEN}` } });
    assert.equal(crossSite.status, 403);
    const wrongToken = await fetch(`${base}/api/types/work/pause`, { method: 'POST', headers: { Origin: base, Authorization: `Bearer ${TOKEN}x` } });
    assert.equal(wrongToken.status, 403);
    const byGet = await fetch(`${base}/api/types/work/pause`, { headers: { Authorization: `Bearer ${TOKEN}` } });
    assert.equal(byGet.status, 404, 'a change never comes by GET');
    assert.deepEqual(await engine.admin.pausedTypes(), []);
    const allowed = await fetch(`${base}/api/types/work/pause`, { method: 'POST', headers: { Origin: base, Authorization: `Bearer ${TOKEN}` } });
    assert.equal(allowed.status, 200);
    assert.deepEqual(await engine.admin.pausedTypes(), ['work']);
    const page = await fetch(`${base}/`);
    assert.ok(!page.headers.get('content-security-policy')!.includes('unsafe-inline'));
    assert.ok((await page.text()).includes('<script src="assets/app.js" defer></script>'));
    const bad = await fetch(`${base}/api/evaluations?state=bogus`);
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as { error: { code: string } }).error.code, 'ERR_INVALID_ARGUMENT');
  } finally {
    dashboard.close();
    await new Promise((resolve) => local.close(resolve));
  }
});
