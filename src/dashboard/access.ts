/**
 * Who may change things through the dashboard, and the headers every answer carries. Safe by default:
 * - reading is open to whoever can reach the handler (it listens only where the user mounts it);
 * - a change needs the `authorize(req)` hook to allow the request, or the request to carry the `token`
 *   (`Authorization: Bearer <token>`, compared in constant time); with neither option the dashboard is read-only;
 * - a change comes only by POST, and a POST from a browser (it sends `Origin`) must come from the dashboard's own
 *   origin or one of `allowedOrigins` (no cross-site request forgery); one without `Origin` needs the token;
 * - the page runs under a Content-Security-Policy without `unsafe-inline`, and renders what users wrote as text.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface AccessOptions {
  readonly token?: string | undefined;
  readonly authorize?: ((req: IncomingMessage) => boolean | string | Promise<boolean | string>) | undefined;
  readonly allowedOrigins?: readonly string[] | undefined;
}

/** The answer for a request: may it change things, and as whom (for the log and the `admin:*` events). */
export interface Access {
  readonly writable: boolean;
  readonly by: string;
}

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/** Whether `given` is `expected`, in time that does not depend on where they differ (or on their lengths). */
export function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

function bearer(req: IncomingMessage): string | undefined {
  const header = req.headers['authorization'];
  if (typeof header !== 'string') return undefined;
  const match = /^Bearer ([^\s]+)$/.exec(header);
  return match?.[1];
}

export async function accessOf(req: IncomingMessage, options: AccessOptions): Promise<Access> {
  const token = bearer(req);
  if (options.token !== undefined && token !== undefined && sameSecret(token, options.token)) return { writable: true, by: 'dashboard:token' };
  if (options.authorize !== undefined) {
    const allowed = await options.authorize(req);
    if (allowed === true) return { writable: true, by: 'dashboard' };
    if (typeof allowed === 'string' && allowed !== '') return { writable: true, by: `dashboard:${allowed}` };
  }
  return { writable: false, by: 'dashboard' };
}

/** The origin a browser on the dashboard's own page sends. */
function ownOrigin(req: IncomingMessage): string | undefined {
  const host = req.headers['host'];
  if (typeof host !== 'string' || host === '') return undefined;
  const encrypted = (req.socket as { encrypted?: boolean }).encrypted === true;
  return `${encrypted ? 'https' : 'http'}://${host}`;
}

/** Whether a POST may change things from where it came: its `Origin` is ours, or it carries the token. */
export function originAllowed(req: IncomingMessage, options: AccessOptions): boolean {
  const origin = req.headers['origin'];
  if (origin === undefined) {
    const token = bearer(req);
    return options.token !== undefined && token !== undefined && sameSecret(token, options.token);
  }
  if (typeof origin !== 'string') return false;
  return origin === ownOrigin(req) || (options.allowedOrigins ?? []).includes(origin);
}

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** The headers of every answer. */
export function secureHeaders(res: ServerResponse): void {
  res.setHeader('Content-Security-Policy', CSP);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'no-referrer');
  res.setHeader('Cache-Control', 'no-store');
  res.setHeader('X-Frame-Options', 'DENY');
}
