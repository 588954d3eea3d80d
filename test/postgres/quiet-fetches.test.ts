/**
 * A process whose last fetch found less than it asked for, and stood as waiting, fetches again only once it hears
 * that something may have become ready for it (a notification, a poll), not for every dequeue
 * that comes: at idle, each finished evaluation's next dequeue used to cost an empty fetch. The manual clock does not
 * move unless the test moves it, so no poll runs by itself.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { requireDatabaseInCI, skipWithoutDatabase } from './helpers.js';
import type { RecordedBackend } from './recorded-backend.js';
import { suiteResources } from './suite-resources.js';
import { enqueueInSql } from './sql-enqueue.js';

requireDatabaseInCI();

const POLL_MS = 60_000;

describe('a quiet process does not fetch for every dequeue', { skip: skipWithoutDatabase, timeout: 30_000 }, () => {
  const { admin, ...resources } = suiteResources();

  /** A backend with one dequeue that fetched, found nothing and stands as waiting. */
  async function standing(): Promise<{ schema: string; r: RecordedBackend; first: Promise<unknown> }> {
    const schema = resources.schema('quiet');
    const r = await resources.open(schema, 600_000, POLL_MS);
    const first = r.backend.broker.dequeue(['service'], 600_000);
    await r.backend.broker.idle();
    assert.deepEqual(r.sent, ['lease 1']);
    return { schema, r, first };
  }

  test('a second dequeue does not fetch; a notification that something is ready does, for both', async () => {
    const { schema, r, first } = await standing();
    const second = r.backend.broker.dequeue(['service'], 600_000);
    await r.backend.broker.idle();
    assert.deepEqual(r.sent, ['lease 1'], 'nothing was heard since the empty fetch: no fetch');
    // A batch notifies everyone (an empty payload).
    await enqueueInSql(admin!, `"${schema}"`, ['q1', 'q2'], 'service');
    const ids = ((await Promise.all([first, second])) as { evaluation: { id: string } }[]).map((d) => d.evaluation.id).sort();
    assert.deepEqual(ids, ['q1', 'q2']);
    assert.deepEqual(r.sent, ['lease 1', 'lease 2']);
  });

  test('the poll fetches though nothing was heard', async () => {
    const { schema, r, first } = await standing();
    // Ready for another type: its notification goes to everyone, and the look it brings finds nothing for `service`.
    await enqueueInSql(admin!, `"${schema}"`, ['missed'], 'other');
    while (r.sent.length < 2) await new Promise((resolve) => setImmediate(resolve));
    await r.backend.broker.idle();
    // Then ready for `service` without a notification (as if it had been missed): only the poll can find it.
    await admin!.query(`UPDATE "${schema}".evals SET type = 'service', queue = 'service' WHERE id = 'missed'`);
    const before = r.sent.length;
    r.clock.advance(POLL_MS);
    assert.equal(((await first) as { evaluation: { id: string } }).evaluation.id, 'missed');
    assert.ok(r.sent.length > before, 'the poll fetched');
  });

  test('a dead letter is heard by a quiet consumer of _failed', { timeout: 10_000 }, async () => {
    const schema = resources.schema('quiet');
    const worker = await resources.open(schema, 600_000, POLL_MS);
    await worker.backend.broker.enqueue({ id: 'doomed', jobId: 'job-doomed', type: 'service' }).accepted;
    const delivery = (await worker.backend.broker.dequeue(['service'], 600_000))!;
    // Opened after that enqueue, so that its notification cannot reach the consumer during the consumer's fetch.
    const consumer = await resources.open(schema, 600_000, POLL_MS);
    const dead = consumer.backend.broker.dequeue(['_failed'], 600_000);
    await consumer.backend.broker.idle();
    assert.deepEqual(consumer.sent, ['lease 1'], 'found nothing, stands, quiet');
    await worker.backend.broker.fail('doomed', delivery.token, new Error('given up'));
    assert.equal((await dead)?.evaluation.id, 'doomed');
  });
});
