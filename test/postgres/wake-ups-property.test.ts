/**
 * No wake-up is lost between offers, named notifications, declines, give-backs and quiet processes (migrations 11
 * and 12): for any interleaving of enqueues (one at a time or in pairs, from either of two processes or from plain
 * SQL, with bodies that fit in an offer or not), dequeues, aborted dequeues, and spells in which a process's threads
 * are all busy (it then declines the offers made to it and passes named notifications on), once enough dequeues wait
 * on the processes that are free every evaluation is delivered, exactly once, to a dequeue that was waiting for it,
 * and the database shows each leased to the process that has it, uncharged by what was declined. The manual clocks
 * never move: no poll, no lead, no pacing recheck and no lease end can deliver anything, only the notifications and
 * the dequeues themselves.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import fc from 'fast-check';
import type { Pool } from 'pg';
import type { Delivery } from '../../src/broker/eval-broker.js';
import { adminPool, dropSchema, MAX_OFFER_BODY_BYTES, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';
import { openRecordedBackend, type RecordedBackend } from './recorded-backend.js';
import { enqueueInSql } from './sql-enqueue.js';

requireDatabaseInCI();

type Op =
  | { readonly kind: 'dequeue'; readonly on: 0 | 1 }
  | { readonly kind: 'abort'; readonly on: 0 | 1 }
  /** Process `on`'s threads become all busy, or free again: as the engine's pool reports them (`paceBy`). */
  | { readonly kind: 'busy'; readonly on: 0 | 1 }
  /** `big`: a body too big to ride in an offer, so the process is named instead (and, if busy, passes it on). */
  | { readonly kind: 'enqueue'; readonly from: 0 | 1 | 'sql'; readonly count: 1 | 2; readonly big: boolean };

const on = fc.constantFrom<0 | 1>(0, 1);
// Weighted so that a process often stands as waiting and then turns busy before an enqueue offers to it.
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('dequeue' as const), on }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('abort' as const), on }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('busy' as const), on }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('enqueue' as const),
      from: fc.constantFrom<0 | 1 | 'sql'>(0, 1, 'sql'),
      count: fc.constantFrom<1 | 2>(1, 2),
      big: fc.boolean(),
    }),
  },
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
        const busy = [false, false];
        const setBusy = (i: 0 | 1, value: boolean): void => {
          busy[i] = value;
          procs[i]!.backend.broker.paceBy!(
            () => 0,
            () => (busy[i] ? 0 : 1),
          );
        };
        const ids: string[] = [];
        for (const op of ops) {
          if (op.kind === 'dequeue') dequeue(op.on);
          else if (op.kind === 'abort') waiting[op.on]!.shift()?.controller.abort();
          else if (op.kind === 'busy') {
            // What the process asked for so far has its answer: a dequeue that found nothing stands before the
            // threads turn busy, so that an enqueue can offer to a process that must decline.
            await procs[op.on]!.fetchesAnswered();
            setBusy(op.on, !busy[op.on]);
          } else {
            const batch = Array.from({ length: op.count }, () => `e${ids.length + 1}`).map((id, k) => `${id}-${k}`);
            ids.push(...batch);
            const pad = op.big ? MAX_OFFER_BODY_BYTES + 1 : 0;
            if (op.from === 'sql') await enqueueInSql(admin!, `"${schema}"`, batch, 'service', pad);
            else {
              const broker = procs[op.from]!.backend.broker;
              await Promise.all(batch.map((id) => broker.enqueue({ id, jobId: id, type: 'service', ...(pad > 0 ? { payload: 'x'.repeat(pad) } : {}) }).accepted));
            }
          }
        }
        // Enough dequeues for everything, on the processes whose threads are free (one is freed if neither is, as a
        // pool whose threads finished: a freed thread's worker dequeues). A busy process stays busy: what was offered
        // or named to it must have reached the free one by the decline or the notification it passed on.
        if (busy[0] && busy[1]) setBusy(1, false);
        const free = ([0, 1] as const).filter((i) => !busy[i]);
        for (let k = 0; k < ids.length; k++) dequeue(free[k % free.length]!);
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
    {
      numRuns: 60,
      // A process that stands as waiting, then turns busy before the enqueue that offers to it: it must decline.
      examples: [
        [
          [
            { kind: 'dequeue', on: 0 },
            { kind: 'busy', on: 0 },
            { kind: 'enqueue', from: 'sql', count: 1, big: false },
          ],
        ],
        // The same with a body too big for an offer: the busy process is named, and passes the notification on.
        [
          [
            { kind: 'dequeue', on: 0 },
            { kind: 'busy', on: 0 },
            { kind: 'dequeue', on: 1 },
            { kind: 'enqueue', from: 'sql', count: 1, big: true },
          ],
        ],
        [
          [
            { kind: 'dequeue', on: 0 },
            { kind: 'dequeue', on: 1 },
            { kind: 'busy', on: 0 },
            { kind: 'enqueue', from: 1, count: 2, big: false },
          ],
        ],
      ],
    },
  );
});
