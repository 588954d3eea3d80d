/**
 * `createDashboard(engine, options?)`: a Node request handler (`(req, res) => void`) serving a live page of one
 * engine and the JSON it reads: throughput and latency over the last minutes, queue depths per type, evaluations by
 * state with their detail (replay, discard), paused types, tasks with their run log (force a run, disable, enable),
 * threads with what they run (cancel), and the processes. Mount it anywhere (`node:http`, Express, Fastify's
 * `middie`, Koa through a wrapper); it answers the paths under where it is mounted (or under `basePath`).
 *
 * The page polls every second; its assets (and uPlot, the chart library) are served from the package, never a CDN.
 * Access rules are `access.ts`'s.
 */
import { readFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { Backend } from '../backend/backend.js';
import type { Engine } from '../engine/engine.js';
import { InvalidOptionError, TickpoolError } from '../errors.js';
import { accessOf, originAllowed, secureHeaders, type AccessOptions } from './access.js';
import { LiveSeries } from './live-series.js';

export interface DashboardOptions {
  /** Requests carrying it (`Authorization: Bearer <token>`) may change things. Compared in constant time. */
  readonly token?: string;
  /** Decides whether a request may change things: false, true, or the caller's name (logged with each change). */
  readonly authorize?: (req: IncomingMessage) => boolean | string | Promise<boolean | string>;
  /** Origins besides the dashboard's own whose pages may POST (the page's origin behind a proxy). */
  readonly allowedOrigins?: readonly string[];
  /** The path it is mounted under, when the server hands it full paths (`node:http`); default none. */
  readonly basePath?: string;
  /** The page's title. Default `tickpool`. */
  readonly title?: string;
}

/** A Node request handler, with `close()` to stop its sampler. */
export interface DashboardHandler {
  (req: IncomingMessage, res: ServerResponse): void;
  close(): void;
}

const requireHere = createRequire(import.meta.url);
const ASSETS: Readonly<Record<string, { readonly file: string; readonly type: string }>> = Object.freeze({
  'app.js': { file: new URL('./assets/app.js', import.meta.url).pathname, type: 'text/javascript; charset=utf-8' },
  'app.css': { file: new URL('./assets/app.css', import.meta.url).pathname, type: 'text/css; charset=utf-8' },
  'uplot.js': { file: requireHere.resolve('uplot/dist/uPlot.iife.min.js'), type: 'text/javascript; charset=utf-8' },
  'uplot.css': { file: requireHere.resolve('uplot/dist/uPlot.min.css'), type: 'text/css; charset=utf-8' },
});
const INDEX = new URL('./assets/index.html', import.meta.url).pathname;
/** A payload is shown as JSON text, cut at this many characters. */
const MAX_PAYLOAD_TEXT = 64 * 1024;
const MAX_BODY_BYTES = 16 * 1024;
/** Counts the page shows stop here ("10,000+"): a database answers them in milliseconds at any size. */
const DEPTH_CAP = 10_000;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function checkOptions(options: unknown): DashboardOptions {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object') throw new InvalidOptionError('options', 'an object { token?, authorize?, allowedOrigins?, basePath?, title? }', options);
  const o = options as Record<string, unknown>;
  const known = ['token', 'authorize', 'allowedOrigins', 'basePath', 'title'];
  for (const key of Object.keys(o)) if (!known.includes(key)) throw new InvalidOptionError(key, `one of ${known.join(', ')}`, o[key]);
  if (o['token'] !== undefined && (typeof o['token'] !== 'string' || o['token'].length < 16)) throw new InvalidOptionError('token', 'a string of at least 16 characters', o['token']);
  if (o['authorize'] !== undefined && typeof o['authorize'] !== 'function') throw new InvalidOptionError('authorize', 'a function (req) => boolean | string', o['authorize']);
  const origins = o['allowedOrigins'];
  if (origins !== undefined && (!Array.isArray(origins) || !origins.every((x) => typeof x === 'string' && /^https?:\/\/[^/]+$/.test(x)))) {
    throw new InvalidOptionError('allowedOrigins', 'an array of origins like "https://ops.example.com"', origins);
  }
  const base = o['basePath'];
  if (base !== undefined && (typeof base !== 'string' || !/^(\/[A-Za-z0-9._~-]+)*$/.test(base))) throw new InvalidOptionError('basePath', 'a path like "/admin" (no trailing slash)', base);
  if (o['title'] !== undefined && typeof o['title'] !== 'string') throw new InvalidOptionError('title', 'a string', o['title']);
  return o as DashboardOptions;
}

/** JSON of what the API answers: bigints as text, nothing that cannot be written. */
function json(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v instanceof Error ? { name: v.name, message: v.message, code: (v as { code?: unknown }).code } : v));
}

function payloadText(payload: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(payload, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : ArrayBuffer.isView(v) ? `<${v.constructor.name} of ${v.byteLength} bytes>` : v), 2) ?? String(payload);
  } catch {
    text = String(payload);
  }
  return text.length > MAX_PAYLOAD_TEXT ? `${text.slice(0, MAX_PAYLOAD_TEXT)}… (${text.length} characters)` : text;
}

function send(res: ServerResponse, status: number, type: string, body: string | Buffer): void {
  secureHeaders(res);
  res.statusCode = status;
  res.setHeader('Content-Type', type);
  res.end(body);
}

async function readBody(req: IncomingMessage): Promise<void> {
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, 'request body too large');
  }
}

export function createDashboard(engine: Engine<Backend>, options?: DashboardOptions): DashboardHandler {
  const o = checkOptions(options);
  const access: AccessOptions = { token: o.token, authorize: o.authorize, allowedOrigins: o.allowedOrigins };
  const title = o.title ?? 'tickpool';
  const admin = engine.admin;
  const live = new LiveSeries({
    registry: engine.options.registry,
    finished: () => engine.stats().workers.reduce((sum, w) => sum + w.processed, 0),
    depths: async () => {
      const { totals } = await admin.depths(DEPTH_CAP);
      return { ready: totals.ready, unacked: totals.unacked, failed: totals.failed };
    },
  });

  async function overview(): Promise<unknown> {
    const [depths, paused, threads, processes] = await Promise.all([admin.depths(DEPTH_CAP), admin.pausedTypes(), admin.threads(), admin.processes()]);
    return {
      title,
      totals: depths.totals,
      byType: depths.byType,
      cap: depths.cap,
      paused,
      series: live.points(),
      threads,
      processes,
    };
  }

  async function get(path: string[], query: URLSearchParams): Promise<unknown> {
    const [head, id, ...rest] = path;
    if (rest.length > 0) throw new HttpError(404, 'not found');
    switch (head) {
      case 'overview':
        if (id === undefined) return overview();
        break;
      case 'evaluations':
        if (id === undefined) {
          const q: Record<string, unknown> = { state: query.get('state') ?? 'ready' };
          for (const key of ['type', 'jobId', 'namespace', 'order', 'cursor']) if (query.get(key)) q[key] = query.get(key);
          if (query.get('limit')) q['limit'] = Number(query.get('limit'));
          return admin.evaluations(q as never);
        } else {
          const detail = await admin.evaluation(id);
          if (detail === undefined) throw new HttpError(404, 'no such evaluation');
          return { ...detail, payload: undefined, payloadText: payloadText(detail.payload) };
        }
      case 'tasks':
        if (id === undefined) return admin.tasks();
        else {
          const task = await admin.task(id);
          if (task === undefined) throw new HttpError(404, 'no such task');
          return { ...task, payload: undefined, payloadText: payloadText(task.payload) };
        }
    }
    throw new HttpError(404, 'not found');
  }

  async function post(path: string[], by: string): Promise<unknown> {
    const [head, id, action, ...rest] = path;
    if (id === undefined || action === undefined || rest.length > 0) throw new HttpError(404, 'not found');
    const actor = { by };
    switch (`${head}/${action}`) {
      case 'evaluations/replay':
        return { done: await admin.replay(id, actor) };
      case 'evaluations/discard':
        return { done: await admin.discard(id, actor) };
      case 'failed/replay':
        return { count: await admin.replayFailed(id, actor) };
      case 'failed/discard':
        return { count: await admin.discardFailed(id, actor) };
      case 'types/pause':
        await admin.pauseType(id, actor);
        return { done: true };
      case 'types/resume':
        await admin.resumeType(id, actor);
        return { done: true };
      case 'tasks/run':
        return admin.forceRun(id, actor);
      case 'tasks/disable':
        await admin.disableTask(id, actor);
        return { done: true };
      case 'tasks/enable':
        await admin.enableTask(id, actor);
        return { done: true };
      case 'threads/cancel':
        return { done: await admin.cancel(Number(id), actor) };
    }
    throw new HttpError(404, 'not found');
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://dashboard.invalid');
    let pathname = url.pathname;
    if (o.basePath !== undefined && o.basePath !== '') {
      if (pathname !== o.basePath && !pathname.startsWith(`${o.basePath}/`)) throw new HttpError(404, 'not found');
      pathname = pathname.slice(o.basePath.length);
    }
    const parts = pathname.split('/').filter((p) => p !== '').map((p) => decodeURIComponent(p));
    if (parts.length === 0) {
      if (req.method !== 'GET' && req.method !== 'HEAD') throw new HttpError(405, 'method not allowed');
      const html = (await readFile(INDEX, 'utf8')).replaceAll('{{title}}', title.replace(/[<>&"']/g, ''));
      send(res, 200, 'text/html; charset=utf-8', html);
      return;
    }
    if (parts[0] === 'assets' && parts.length === 2) {
      const asset = ASSETS[parts[1]!];
      if (asset === undefined || req.method !== 'GET') throw new HttpError(404, 'not found');
      send(res, 200, asset.type, await readFile(asset.file));
      return;
    }
    if (parts[0] !== 'api') throw new HttpError(404, 'not found');
    const api = parts.slice(1);
    const who = await accessOf(req, access);
    if (api[0] === 'session' && api.length === 1 && req.method === 'GET') {
      send(res, 200, 'application/json', json({ writable: who.writable, by: who.by, title, process: { host: hostname(), pid: process.pid } }));
      return;
    }
    if (req.method === 'GET') {
      send(res, 200, 'application/json', json(await get(api, url.searchParams)));
      return;
    }
    if (req.method !== 'POST') throw new HttpError(405, 'method not allowed');
    if (!originAllowed(req, access)) throw new HttpError(403, 'a change must come from the dashboard’s own origin');
    if (!who.writable) throw new HttpError(403, 'this dashboard is read-only for this request (no token, or authorize() refused)');
    await readBody(req);
    send(res, 200, 'application/json', json(await post(api, who.by)));
  }

  const handler = ((req: IncomingMessage, res: ServerResponse): void => {
    handle(req, res).catch((error: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (error instanceof HttpError) send(res, error.status, 'application/json', json({ error: { message: error.message } }));
      else if (error instanceof TickpoolError) send(res, 400, 'application/json', json({ error: { code: error.code, message: error.message } }));
      else {
        engine.options.logger.error({ err: error }, 'dashboard request failed');
        send(res, 500, 'application/json', json({ error: { message: 'internal error' } }));
      }
    });
  }) as DashboardHandler;
  handler.close = () => live.close();
  return handler;
}
