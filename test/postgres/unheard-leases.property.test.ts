/**
 * The ledger that keeps a poll's look for unheard leases from taking a delivery twice (`UnheardLeases`), as the
 * broker drives it: offers leased to this process whose notifications come late or never, looks whose snapshot is
 * taken at any point while they are out, deliveries that end, are given back or are let go. Invariant: each
 * delivery is taken at most once, by its notification or by a look, and none is taken again after this process let
 * it go. No database: the model is the database's view of what is leased to this process.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { UnheardLeases } from '../../src/postgres/broker/unheard-leases.js';

type Op =
  | { kind: 'lease' | 'notify' | 'finish' | 'giveBack' | 'gaveBack' | 'abandon' | 'reap'; token: number }
  | { kind: 'lookBegin' | 'lookSnapshot' | 'lookEnd' };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constantFrom('lease', 'notify', 'finish', 'giveBack', 'gaveBack', 'abandon', 'reap'), token: fc.integer({ min: 0, max: 2 }) }) as fc.Arbitrary<Op>,
  fc.record({ kind: fc.constantFrom('lookBegin', 'lookSnapshot', 'lookEnd') }) as fc.Arbitrary<Op>,
);

test('property: a delivery is taken at most once, by its notification or a look, and never after it was let go', () => {
  fc.assert(
    fc.property(fc.array(op, { minLength: 10, maxLength: 60, size: 'max' }), (ops) => {
      const ledger = new UnheardLeases();
      /** What the database shows as leased to this process. */
      const leased = new Set<string>();
      const notified = new Set<string>();
      const held = new Set<string>();
      const givingBack = new Set<string>();
      const letGo = new Set<string>();
      const taken = new Map<string, number>();
      let look: { exclude: Set<string>; rows: string[] | undefined } | undefined;
      const take = (token: string): void => {
        assert.ok(!letGo.has(token), `${token} taken after it was let go`);
        taken.set(token, (taken.get(token) ?? 0) + 1);
        assert.equal(taken.get(token), 1, `${token} taken twice`);
        held.add(token);
      };
      for (const o of ops) {
        const t = 'token' in o ? `t${o.token}` : '';
        switch (o.kind) {
          case 'lease':
            // Each token is leased once (a fresh token per lease).
            if (!taken.has(t) && !letGo.has(t) && !leased.has(t)) leased.add(t);
            break;
          case 'notify':
            // Its offer's notification, once, if it was leased; the broker ignores it when held or no news.
            if (leased.has(t) && !notified.has(t)) {
              notified.add(t);
              if (!held.has(t) && ledger.heard(t)) take(t);
            }
            break;
          case 'finish':
            // Acked: the database has it before this process drops it.
            if (held.has(t)) {
              leased.delete(t);
              held.delete(t);
              letGo.add(t);
            }
            break;
          case 'giveBack':
            if (held.has(t)) {
              held.delete(t);
              letGo.add(t);
              givingBack.add(t);
              ledger.givingBack([t]);
            }
            break;
          case 'gaveBack':
            if (givingBack.has(t)) {
              givingBack.delete(t);
              leased.delete(t);
              ledger.gaveBack([t]);
            }
            break;
          case 'abandon':
            // Its end failed: dropped here, still leased in the database until reaped.
            if (held.has(t)) {
              held.delete(t);
              letGo.add(t);
              ledger.abandoned(t);
            }
            break;
          case 'reap':
            if (!held.has(t) && !givingBack.has(t)) leased.delete(t);
            break;
          case 'lookBegin':
            if (look === undefined) look = { exclude: new Set(ledger.begin([...held])), rows: undefined };
            break;
          case 'lookSnapshot':
            if (look !== undefined && look.rows === undefined) look.rows = [...leased].filter((x) => !look!.exclude.has(x));
            break;
          case 'lookEnd':
            if (look !== undefined && look.rows !== undefined) {
              const fresh = ledger.end((x) => held.has(x));
              for (const row of look.rows) if (fresh(row)) take(row);
              look = undefined;
            }
            break;
        }
      }
    }),
    { numRuns: 5_000 },
  );
});
