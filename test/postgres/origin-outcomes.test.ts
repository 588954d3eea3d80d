/**
 * An outcome notification goes to the channel of the process that enqueued the evaluation, not to a channel every
 * process listens on (migration 13): an ack in one process wakes the origin alone.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PoolClient } from 'pg';
import { schemaNames } from '../../src/postgres/names.js';
import { openBackend } from './backend-harness.js';
import { adminPool, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';

requireDatabaseInCI();

test("an ack's outcome notification reaches its origin's channel, and only that one", { skip: skipWithoutDatabase, timeout: 30_000 }, async () => {
  const schema = schemaName('origin');
  const admin = adminPool();
  const front = await openBackend({ schema, pollMs: 600_000 });
  const worker = await openBackend({ schema, pollMs: 600_000 });
  const names = schemaNames(schema);
  const listener: PoolClient = await admin.connect();
  try {
    const heard: { channel: string; payload: string }[] = [];
    let onHeard = (): void => undefined;
    listener.on('notification', (m) => {
      heard.push({ channel: m.channel, payload: m.payload ?? '' });
      onHeard();
    });
    const own = names.processChannel('outcome', front.nodeId);
    const others = names.processChannel('outcome', worker.nodeId);
    for (const channel of [names.channels.outcome, own, others]) await listener.query(`LISTEN "${channel}"`);

    const handle = front.broker.enqueue({ id: 'e1', jobId: 'job-1', type: 'service' });
    await handle.accepted;
    const delivery = (await worker.broker.dequeue(['service'], 10_000))!;
    const arrived = new Promise<void>((resolve) => (onHeard = () => heard.length > 0 && resolve()));
    await worker.broker.ack('e1', delivery.token);
    await arrived;
    assert.equal((await handle.done).status, 'acked', 'the origin heard it');
    // Notifications of one transaction arrive together, and a round trip on the same connection comes after them.
    await listener.query('SELECT 1');
    assert.deepEqual(
      heard.map((h) => ({ channel: h.channel, payload: JSON.parse(h.payload) as unknown })),
      [{ channel: own, payload: { ids: ['e1'], origin: front.nodeId } }],
    );
  } finally {
    listener.release();
    await front.close();
    await worker.close();
    await dropSchema(admin, schema);
    await admin.end();
  }
});
