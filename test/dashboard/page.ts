/**
 * What the dashboard's browser tests share: Debian's Chromium driven by puppeteer-core, a page on a dashboard served
 * on loopback, and waits for what the page shows (each refresh of the page is the event waited for, never time).
 */
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import type { Backend } from '../../src/backend/backend.js';
import { createDashboard, type DashboardHandler } from '../../src/dashboard/dashboard.js';
import type { Engine } from '../../src/engine/engine.js';

// What the functions evaluated in the page read there (the suite compiles without the DOM's types).
declare const document: { readonly body: { readonly dataset: Record<string, string | undefined> } };

export const TOKEN = 'browser-test-token-0123456789';
export const XSS = '<img src=x onerror=alert(1)>';

function findChromium(): string | undefined {
  const configured = process.env['CHROMIUM_PATH'];
  const candidates = configured !== undefined && configured !== '' ? [configured] : ['/usr/bin/chromium', '/usr/bin/chromium-browser'];
  return candidates.find((p) => existsSync(p));
}
export const chromium = findChromium();
/** Skipped without Chromium, except under CI, where it must run. */
export const skipWithoutChromium: string | false =
  chromium !== undefined || process.env['CI'] === 'true' ? false : 'Chromium is not installed: apt-get install -y chromium (Debian) to run the dashboard browser tests';

export interface OpenPage {
  readonly page: Page;
  /** Messages of dialogs the page opened (none may). */
  readonly dialogs: string[];
  /** Errors thrown in the page. */
  readonly pageErrors: string[];
  close(): Promise<void>;
}

/** Serves `engine`'s dashboard on loopback and opens it in headless Chromium with the token. */
export async function openDashboard(engine: Engine<Backend>): Promise<OpenPage> {
  if (chromium === undefined) throw new Error('CI runs the dashboard browser tests: install Debian’s chromium');
  const dashboard: DashboardHandler = createDashboard(engine, { token: TOKEN });
  const server: Server = createServer(dashboard);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const browser: Browser = await puppeteer.launch({ executablePath: chromium, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 1600 });
  const dialogs: string[] = [];
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
  const pageErrors: string[] = [];
  page.on('pageerror', (error) => pageErrors.push(String(error)));
  await page.goto(`http://127.0.0.1:${port}/#token=${TOKEN}`);
  return {
    page,
    dialogs,
    pageErrors,
    close: async () => {
      await browser.close();
      dashboard.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Waits until the page shows `selector` with text for which `check` holds (after each of its refreshes). */
export async function shows(page: Page, selector: string, check: (text: string) => boolean, what: string): Promise<string> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const text = await page.$eval(selector, (n) => n.textContent ?? '').catch(() => undefined);
    if (text !== undefined && check(text)) return text;
    if (Date.now() > deadline) throw new Error(`the page did not show ${what} (${selector}: ${JSON.stringify(text)})`);
    const before = await page.evaluate(() => document.body.dataset['refreshed']);
    await page.waitForFunction((b) => document.body.dataset['refreshed'] !== b, { timeout: 20_000 }, before);
  }
}
