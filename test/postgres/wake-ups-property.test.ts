/**
 * No wake-up is lost between offers, named notifications, give-backs and quiet processes (migrations 11 and 12):
 * for any interleaving of enqueues (one at a time or in pairs, from either of two processes or from plain SQL),
 * dequeues and aborted dequeues on two processes, once enough dequeues wait every evaluation is delivered, exactly
 * once, to a dequeue that was waiting for it, and the database shows each leased to the process that has it. The
 * manual clocks never move: no poll, no lead and no lease end can deliver anything, only the notifications.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import fc from 'fast-check';
import type { Pool } from 'pg';
import type { Delivery } from '../../src/broker/eval-broker.js';
import { adminPool, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';
import { openRecordedBackend, type RecordedBackend } from './recorded-backend.js';
import { enqueueInSql } from './sql-enqueue.js';

requireDatabaseInCI();

type Op =
  | { readonly kind: 'dequeue'; readonly on: 0 | 1 }
  | { readonly kind: 'abort'; readonly on: 0 | 1 }
  | { readonly kind: 'enqueue'; readonly from: 0 | 1 | 'sql'; readonly count: 1 | 2 };

const on = fc.constantFrom<0 | 1>(0, 1);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('dequeue' as const), on }),
  fc.record({ kind: fc.constant('abort' as const), on }),
  fc.record({ kind: fc.constant('enqueue' as const), from: fc.constantFrom<0 | 1 | 'sql'>(0, 1, 'sql'), count: fc.constantFrom<1 | 2>(1, 2) }),
);

interface Waiting {
  readonly controller: AbortController;
  readonly result: Promise<Delivery | undefined | Error>;
}

const admin: Pool | undefined = skipWithoutDatabase === false ? adminPool() : undefined;
after(async () => {
  await admin?.end();
});

test('every evaluation reaches a waiting dequeue by notifications alone, exactly once', { skip: skipWithoutDatabase, timeout: 240_000 }, async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 12 }), async (ops) => {
      const schema = schemaName('wakeups');
      const procs: RecordedBackend[] = [];
      try {
        procs.push(await openRecordedBackend(schema, 600_000, 60_000), await openRecordedBackend(schema, 600_000, 60_000));
        const waiting: Waiting[][] = [[], []];
        const delivered = new Map<string, { by: number; token: string }[]>();
        const settled: Promise<unknown>[] = [];
        const dequeue = (i: 0 | 1): void => {
          const controller = new AbortController();
          const result = procs[i]!.backend.broker.dequeue(['service'], 600_000, controller.signal).catch((error: unknown) => error as Error);
          waiting[i]!.push({ controller, result });
          settled.push(
            result.then((d) => {
              if (d === undefined || d instanceof Error) return;
              const list = delivered.get(d.evaluation.id) ?? [];
              list.push({ by: i, token: d.token });
              delivered.set(d.evaluation.id, list);
            }),
          );
        };
        const ids: string[] = [];
        for (const op of ops) {
          if (op.kind === 'dequeue') dequeue(op.on);
          else if (op.kind === 'abort') waiting[op.on]!.shift()?.controller.abort();
          else {
            const batch = Array.from({ length: op.count }, () => `e${ids.length + 1}`).map((id, k) => `${id}-${k}`);
            ids.push(...batch);
            if (op.from === 'sql') await enqueueInSql(admin!, `"${schema}"`, batch, 'service');
            else await Promise.all(batch.map((id) => procs[op.from as 0 | 1]!.backend.broker.enqueue({ id, jobId: id, type: 'service' }).accepted));
          }
        }
        // Enough dequeues for everything, on both processes.
        for (let k = 0; k < ids.length; k++) dequeue((k % 2) as 0 | 1);
        const deadline = Date.now() + 10_000;
        while (delivered.size < ids.length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 2));
        const { rows } = await admin!.query<{ id: string; state: string; holder: string | null; token: string | null; deliveries: number }>(
          `SELECT id, state, holder, token, deliveries FROM "${schema}".evals ORDER BY id`,
        );
        assert.equal(delivered.size, ids.length, `every evaluation delivered; in the database: ${JSON.stringify(rows)}`);
        for (const row of rows) {
          const got = delivered.get(row.id)!;
          assert.equal(got.length, 1, `${row.id} delivered once`);
          assert.equal(row.state, 'unacked');
          assert.equal(row.holder, procs[got[0]!.by]!.backend.nodeId, `${row.id} leased to the process that has it`);
          assert.equal(row.token, got[0]!.token);
          assert.equal(row.deliveries, 1, `${row.id}: a given-back delivery is not charged`);
        }
        for (const w of waiting.flat()) w.controller.abort();
        await Promise.all(settled);
      } finally {
        for (const p of procs) {
          await p.backend.close();
          await p.pool.end();
        }
        await dropSchema(admin!, schema);
      }
    }),
    { numRuns: 25 },
  );
});
