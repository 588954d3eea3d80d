/**
 * The change log: commits written once into shared memory and read back in order by readers at their own pace. A
 * reader that falls more than a ring behind says so (`lapped`) instead of returning overwritten data: a property
 * test over random append/read interleavings on a small ring checks that what a reader returns is always exactly
 * the next commits, in order.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ChangeLogReader, ChangeLogWriter } from '../../src/protocol/change-log.js';
import type { ChangeSet } from '../../src/state/types.js';

function commit(index: number, writes: number, size = 8): ChangeSet {
  const changes = Array.from({ length: writes }, (_, i) => ({
    table: 't',
    key: `k${index}/${i}`,
    value: i % 3 === 2 ? undefined : { n: index, pad: 'x'.repeat(size) },
    createIndex: index - (i % 2),
    modifyIndex: index,
  }));
  return { index, changes };
}

test('a reader reads every commit appended after its position, in order, puts and deletes alike', () => {
  const writer = new ChangeLogWriter(4096);
  const reader = new ChangeLogReader(writer.buffer, writer.position);
  assert.equal(reader.behind, false);
  const sent = [commit(1, 3), commit(2, 1), commit(3, 0)];
  for (const c of sent) assert.equal(writer.append(c), true);
  assert.equal(reader.behind, true);
  const got: ChangeSet[] = [];
  assert.equal(reader.catchUp((c) => got.push(c)), 'caught-up');
  assert.deepEqual(got, sent);
  assert.equal(reader.behind, false);
});

test('records wrap round the ring; a reader a ring behind is told it lapped; a commit bigger than the ring is refused', () => {
  const writer = new ChangeLogWriter(4096);
  const reader = new ChangeLogReader(writer.buffer, writer.position);
  const late = new ChangeLogReader(writer.buffer, writer.position);
  let index = 0;
  const got: number[] = [];
  for (let round = 0; round < 50; round++) {
    writer.append(commit(++index, 2, 100));
    reader.catchUp((c) => got.push(c.index));
  }
  assert.deepEqual(got, Array.from({ length: 50 }, (_, i) => i + 1), 'the reader that kept up saw every commit across the wraps');
  assert.equal(late.catchUp(() => assert.fail('nothing overwritten may be returned')), 'lapped');
  late.reset(writer.position);
  writer.append(commit(++index, 1));
  const after: number[] = [];
  assert.equal(late.catchUp((c) => after.push(c.index)), 'caught-up');
  assert.deepEqual(after, [index], 'after a reset at the current position it reads on');
  assert.equal(writer.append(commit(++index, 1, 5000)), false);
});

test('property: a reader returns exactly the next commits in order, or says it lapped, whatever the interleaving', () => {
  const step = fc.oneof(
    fc.record({ kind: fc.constant('append' as const), writes: fc.nat(6), size: fc.nat(300) }),
    fc.record({ kind: fc.constant('read' as const), reader: fc.nat(2) }),
  );
  fc.assert(
    fc.property(fc.array(step, { maxLength: 120 }), (steps) => {
      const writer = new ChangeLogWriter(4096);
      const readers = [0, 1, 2].map(() => ({ log: new ChangeLogReader(writer.buffer, 0), next: 1, lapped: false }));
      let index = 0;
      const sent = new Map<number, ChangeSet>();
      for (const s of steps) {
        if (s.kind === 'append') {
          const c = commit(++index, s.writes, s.size);
          if (!writer.append(c)) return; // bigger than the ring: refused, and the test is over
          sent.set(index, c);
          continue;
        }
        const r = readers[s.reader]!;
        if (r.lapped) continue;
        const result = r.log.catchUp((c) => {
          assert.deepEqual(c, sent.get(r.next), `reader ${s.reader} expected commit ${r.next}`);
          r.next++;
        });
        if (result === 'lapped') r.lapped = true;
        else assert.equal(r.next, index + 1, 'caught up to the last commit');
      }
    }),
    { numRuns: 400 },
  );
});
