/**
 * The demo's dashboard: `createDashboard` on 127.0.0.1 only, with a fresh token in the printed URL (the page keeps
 * it out of the address bar), so the page on this machine may replay, pause and cancel, and nothing else can.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Backend } from '../../src/backend/backend.js';
import type { Engine } from '../../src/engine/engine.js';
import { createDashboard } from '../../src/dashboard/index.js';

export interface DashboardServer {
  /** The page, with its token. */
  readonly url: string;
  close(): Promise<void>;
}

export async function serveDashboard(engine: Engine<Backend>, port: number): Promise<DashboardServer> {
  const token = randomBytes(18).toString('base64url');
  const handler = createDashboard(engine, { token, title: 'tickpool demo' });
  const server = createServer(handler);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}/#token=${token}`,
    close: () =>
      new Promise<void>((resolve) => {
        handler.close();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
