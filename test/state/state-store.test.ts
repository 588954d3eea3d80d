import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgumentError, InvalidOptionError, InvalidStateError, UnknownTableError } from '../../src/errors.js';
import { StateStore } from '../../src/state/state-store.js';
import type { ChangeSet, WriteTxn } from '../../src/state/types.js';
import { captureLogger, dump } from './helpers.js';

function store(historyLimit?: number): StateStore {
  return new StateStore({ tables: ['nodes', 'allocs'], ...(historyLimit === undefined ? {} : { historyLimit }) });
}

test('options are validated with typed errors that say expected and received', () => {
  assert.throws(() => new StateStore({ tables: 'nodes' as never }), (e: unknown) => e instanceof InvalidOptionError && /`tables`.*"nodes"/.test(e.message));
  assert.throws(() => new StateStore({ tables: ['a', 'a'] }), InvalidOptionError);
  assert.throws(() => new StateStore({ tables: [''] }), InvalidOptionError);
  assert.throws(() => new StateStore({ historyLimit: -1 }), (e: unknown) => e instanceof InvalidOptionError && e.code === 'ERR_INVALID_OPTION');
  assert.throws(() => new StateStore({ logger: {} as never }), InvalidOptionError);
  assert.deepEqual(new StateStore().tables(), []);
  assert.deepEqual(store().tables(), ['nodes', 'allocs']);
});

test('each transaction that changes something commits at the next index with create and modify indexes', () => {
  const s = store();
  assert.equal(s.index, 0);
  const first = s.write((txn) => {
    txn.put('nodes', 'n1', { cpu: 4 });
    txn.put('nodes', 'n2', { cpu: 8 });
  });
  assert.equal(first.index, 1);
  assert.equal(s.index, 1);
  assert.deepEqual(
    first.changes.map((c) => [c.key, c.createIndex, c.modifyIndex]),
    [
      ['n1', 1, 1],
      ['n2', 1, 1],
    ],
  );
  const second = s.write((txn) => txn.put('nodes', 'n1', { cpu: 6 }));
  assert.equal(second.index, 2);
  const n1 = s.snapshot().get<{ cpu: number }>('nodes', 'n1');
  assert.deepEqual({ ...n1 }, { table: 'nodes', key: 'n1', value: { cpu: 6 }, createIndex: 1, modifyIndex: 2 });
  assert.equal(s.snapshot().get('nodes', 'n2')?.modifyIndex, 1);
});

test('a transaction with no net change commits nothing and does not bump the index', () => {
  const s = store();
  s.write((txn) => txn.put('nodes', 'n1', 1));
  const seen: number[] = [];
  s.onChange((c) => seen.push(c.index));
  assert.deepEqual(s.write(() => {}), { index: 1, changes: [] });
  const netZero = s.write((txn) => {
    txn.put('nodes', 'tmp', 1);
    txn.delete('nodes', 'tmp');
    txn.delete('nodes', 'never-existed');
  });
  assert.deepEqual(netZero, { index: 1, changes: [] });
  assert.equal(s.index, 1);
  assert.deepEqual(seen, []);
});

test('a transaction reads its own writes and reports one net change per record', () => {
  const s = store();
  s.write((txn) => txn.put('nodes', 'n1', 'a'));
  const set = s.write((txn) => {
    txn.put('nodes', 'n1', 'b');
    assert.equal(txn.get('nodes', 'n1')?.value, 'b');
    assert.equal(s.snapshot().get('nodes', 'n1')?.value, 'a', 'uncommitted writes are invisible outside the txn');
    txn.put('nodes', 'n1', 'c');
    txn.put('allocs', 'a1', 'x');
    txn.delete('nodes', 'n1');
  });
  assert.deepEqual(
    set.changes.map((c) => ({ ...c })),
    [
      { table: 'nodes', key: 'n1', value: undefined, createIndex: 1, modifyIndex: 2 },
      { table: 'allocs', key: 'a1', value: 'x', createIndex: 2, modifyIndex: 2 },
    ],
  );
  // Re-created after a delete: a new record, so a new createIndex.
  s.write((txn) => txn.put('nodes', 'n1', 'd'));
  assert.equal(s.snapshot().get('nodes', 'n1')?.createIndex, 3);
});

test('a throwing transaction commits nothing and the error propagates', () => {
  const s = store();
  s.write((txn) => txn.put('nodes', 'n1', 1));
  const before = s.snapshot();
  const boom = new Error('boom');
  assert.throws(
    () =>
      s.write((txn) => {
        txn.put('nodes', 'n1', 2);
        txn.put('nodes', 'n2', 2);
        throw boom;
      }),
    (e: unknown) => e === boom,
  );
  assert.equal(s.index, 1);
  assert.equal(s.snapshot(), before);
  assert.equal(s.snapshot().get('nodes', 'n1')?.value, 1);
  assert.equal(s.snapshot().get('nodes', 'n2'), undefined);
});

test('bad input to a transaction throws typed errors and leaves the transaction usable', () => {
  const s = store();
  const set = s.write((txn) => {
    assert.throws(() => txn.put('jobs', 'j1', 1), (e: unknown) => e instanceof UnknownTableError && e.code === 'ERR_UNKNOWN_TABLE' && /nodes, allocs/.test(e.message));
    assert.throws(() => txn.put('nodes', '', 1), InvalidArgumentError);
    assert.throws(() => txn.put('nodes', 'n1', undefined), InvalidArgumentError);
    assert.throws(() => txn.put('nodes', 'n1', { f: () => 1 }), (e: unknown) => e instanceof InvalidArgumentError && /structured-cloneable/.test(e.message));
    assert.throws(() => txn.put('nodes', 'n1', Symbol('s')), InvalidArgumentError);
    assert.throws(() => txn.delete('jobs', 'j1'), UnknownTableError);
    txn.put('nodes', 'n1', 'ok');
  });
  assert.equal(set.index, 1);
  assert.deepEqual(
    set.changes.map((c) => c.value),
    ['ok'],
  );
  assert.throws(() => s.snapshot().get('jobs', 'x'), UnknownTableError);
  assert.throws(() => s.snapshot().size('jobs'), UnknownTableError);
  assert.throws(() => s.snapshot().get('nodes', 42 as never), InvalidArgumentError);
});

test('write() refuses nesting, async callbacks and transactions used after they ended', async () => {
  const s = store();
  assert.throws(() => s.write('x' as never), InvalidArgumentError);
  assert.throws(() => s.write(() => s.write(() => {})), InvalidStateError);
  assert.throws(
    () =>
      s.write((async (txn: WriteTxn) => {
        txn.put('nodes', 'n1', 1);
        await Promise.resolve();
      }) as never),
    (e: unknown) => e instanceof InvalidArgumentError && /synchronous/.test(e.message),
  );
  assert.equal(s.index, 0, 'nothing of the async transaction committed');
  let escaped: WriteTxn | undefined;
  s.write((txn) => {
    escaped = txn;
    txn.put('nodes', 'n1', 1);
  });
  assert.throws(() => escaped!.put('nodes', 'n2', 2), InvalidStateError);
  assert.throws(() => escaped!.get('nodes', 'n1'), InvalidStateError);
  assert.equal(s.index, 1);
  assert.equal(s.snapshot().get('nodes', 'n2'), undefined);
});

test('stored values are private frozen copies', () => {
  const s = store();
  const value = { cpu: 4, tags: ['a'], meta: new Map([['k', { deep: 1 }]]) };
  s.write((txn) => txn.put('nodes', 'n1', value));
  value.cpu = 99;
  value.tags.push('b');
  const stored = s.snapshot().get<typeof value>('nodes', 'n1')!;
  assert.equal(stored.value.cpu, 4);
  assert.deepEqual(stored.value.tags, ['a']);
  assert.ok(Object.isFrozen(stored));
  assert.ok(Object.isFrozen(stored.value));
  assert.ok(Object.isFrozen(stored.value.tags));
  assert.ok(Object.isFrozen(stored.value.meta.get('k')));
  assert.throws(() => {
    (stored.value as { cpu: number }).cpu = 1;
  }, TypeError);
  // Writing back a value read from the store keeps the very same (already owned) object.
  s.write((txn) => txn.put('nodes', 'n2', stored.value));
  assert.equal(s.snapshot().get('nodes', 'n2')?.value, stored.value);
});

test('values holding shared memory are refused: a copy would stay aliased to the caller', () => {
  const s = store();
  const mine = new Int32Array(new SharedArrayBuffer(8));
  const cases: Array<[string, unknown]> = [
    ['a view on shared memory', { counts: mine }],
    ['the buffer itself', { buffer: mine.buffer }],
    ['at the top', mine],
    ['inside a Map', new Map([['k', [new DataView(new SharedArrayBuffer(4))]]])],
    ['inside a Set', new Set([{ deep: new Uint8Array(new SharedArrayBuffer(4)) }])],
  ];
  for (const [what, value] of cases) {
    assert.throws(
      () => s.write((txn) => txn.put('nodes', 'n1', value)),
      (e: unknown) =>
        e instanceof InvalidArgumentError &&
        e.code === 'ERR_INVALID_ARGUMENT' &&
        /Expected `value of nodes\/n1` to be a value without shared memory.*, got /.test(e.message),
      what,
    );
  }
  assert.equal(s.index, 0, 'nothing was committed');
  // Views over ordinary memory are copied, so the caller's later changes do not show through.
  const plain = new Int32Array(2);
  s.write((txn) => txn.put('nodes', 'n1', { counts: plain }));
  plain[0] = 999;
  assert.deepEqual([...s.snapshot().get<{ counts: Int32Array }>('nodes', 'n1')!.value.counts], [0, 0]);
});

test('a snapshot never sees later writes', () => {
  const s = store();
  s.write((txn) => {
    for (let i = 0; i < 100; i++) txn.put('allocs', `a${i}`, i);
  });
  const snap = s.snapshot();
  const before = dump(snap);
  assert.equal(s.snapshot(), snap, 'no write in between: the same immutable version');
  for (let round = 0; round < 20; round++) {
    s.write((txn) => {
      txn.put('allocs', `a${round}`, -round);
      txn.delete('allocs', `a${99 - round}`);
      txn.put('nodes', `n${round}`, round);
    });
  }
  assert.equal(snap.index, 1);
  assert.equal(snap.size('allocs'), 100);
  assert.equal(snap.size('nodes'), 0);
  assert.equal(snap.get('allocs', 'a5')?.value, 5);
  assert.deepEqual(dump(snap), before);
  assert.equal(s.snapshot().index, 21);
  assert.equal(s.snapshot().size('allocs'), 80);
  assert.equal(s.snapshot().get('allocs', 'a5')?.value, -5);
});

test('the change stream delivers every commit in order, also when a listener writes', () => {
  const s = store();
  const { logger, entries } = captureLogger();
  const withLogger = new StateStore({ tables: ['t'], logger });
  const first: number[] = [];
  const second: number[] = [];
  s.onChange((c) => {
    first.push(c.index);
    // A listener that reacts to index 1 with another write: index 2 must still reach `second` after index 1.
    if (c.index === 1) s.write((txn) => txn.put('nodes', 'follow-up', 1));
  });
  s.onChange((c) => second.push(c.index));
  s.write((txn) => txn.put('nodes', 'n1', 1));
  s.write((txn) => txn.put('nodes', 'n2', 1));
  assert.deepEqual(first, [1, 2, 3]);
  assert.deepEqual(second, [1, 2, 3]);

  const got: ChangeSet[] = [];
  withLogger.onChange(() => {
    throw new Error('listener bug');
  });
  const off = withLogger.onChange((c) => got.push(c));
  const committed = withLogger.write((txn) => txn.put('t', 'k', 1));
  assert.equal(committed.index, 1, 'a throwing listener does not undo the commit');
  assert.equal(got[0], committed, 'listeners get the very change set write() returns');
  assert.ok(Object.isFrozen(committed) && Object.isFrozen(committed.changes));
  assert.equal(entries.filter((e) => e.level === 'error').length, 1);
  off();
  withLogger.write((txn) => txn.put('t', 'k', 2));
  assert.equal(got.length, 1, 'unsubscribed');
  assert.throws(() => s.onChange(null as never), InvalidArgumentError);
});

test('changesSince replays history and says when it was trimmed', () => {
  const s = store(3);
  for (let i = 1; i <= 5; i++) s.write((txn) => txn.put('nodes', `n${i}`, i));
  assert.deepEqual(
    s.changesSince(2)?.map((c) => c.index),
    [3, 4, 5],
  );
  assert.deepEqual(s.changesSince(5), []);
  assert.equal(s.changesSince(1), undefined, 'index 2 was trimmed');
  assert.equal(s.changesSince(0), undefined);
  assert.throws(() => s.changesSince(6), InvalidArgumentError);
  assert.throws(() => s.changesSince(-1), InvalidArgumentError);
  assert.throws(() => s.changesSince(1.5), InvalidArgumentError);

  const none = store(0);
  none.write((txn) => txn.put('nodes', 'n', 1));
  assert.equal(none.changesSince(0), undefined);
  assert.deepEqual(none.changesSince(1), []);

  // Many more commits than the limit: compaction keeps exactly the last `limit` sets.
  const long = store(4);
  for (let i = 1; i <= 50; i++) long.write((txn) => txn.put('nodes', 'n', i));
  assert.deepEqual(
    long.changesSince(46)?.map((c) => c.index),
    [47, 48, 49, 50],
  );
  assert.equal(long.changesSince(45), undefined);
});

test('full() is the whole state at the current index', () => {
  const s = store();
  s.write((txn) => {
    txn.put('nodes', 'n1', 1);
    txn.put('allocs', 'a1', 2);
  });
  s.write((txn) => txn.put('nodes', 'n1', 3));
  const full = s.full();
  assert.equal(full.index, 2);
  assert.deepEqual(
    full.changes.map((c) => ({ ...c })).sort((a, b) => a.key.localeCompare(b.key)),
    [
      { table: 'allocs', key: 'a1', value: 2, createIndex: 1, modifyIndex: 1 },
      { table: 'nodes', key: 'n1', value: 3, createIndex: 1, modifyIndex: 2 },
    ],
  );
  assert.ok(Object.isFrozen(full.changes));
});
