#!/usr/bin/env node
/**
 * A TCP proxy that delays every chunk by a fixed time in each direction, in order: a database "across a network"
 * on one machine, for benchmarks whose result depends on round trips (how long a lock is held across them).
 *
 *   node scripts/delay-proxy.mjs --target 127.0.0.1:55432 --port 55433 --delay-ms 0.5
 */
import { createServer, connect } from 'node:net';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: { target: { type: 'string' }, port: { type: 'string', default: '0' }, 'delay-ms': { type: 'string', default: '0.5' } },
});
const [host, targetPort] = (values.target ?? '').split(':');
const delay = Number(values['delay-ms']);
if (!host || !Number(targetPort) || !(delay >= 0)) {
  console.error('usage: delay-proxy.mjs --target HOST:PORT [--port N] [--delay-ms MS]');
  process.exit(2);
}

// Timers of one duration fire in the order they were set, so each direction keeps its byte order.
const relay = (from, to) => {
  from.on('data', (chunk) => setTimeout(() => to.write(chunk), delay));
  from.on('end', () => setTimeout(() => to.end(), delay));
  from.on('error', () => to.destroy());
  from.on('close', () => setTimeout(() => to.destroy(), delay));
};
const server = createServer((client) => {
  client.setNoDelay(true);
  const upstream = connect(Number(targetPort), host);
  upstream.setNoDelay(true);
  relay(client, upstream);
  relay(upstream, client);
});
server.listen(Number(values.port), '127.0.0.1', () => {
  console.log(`delay-proxy: 127.0.0.1:${server.address().port} -> ${host}:${targetPort}, ${delay} ms each way`);
});
