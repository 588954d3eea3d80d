import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidArgumentError, InvalidStateError, ReplicaGapError } from '../../src/errors.js';
import { Replica } from '../../src/state/replica.js';
import { StateStore } from '../../src/state/state-store.js';
import type { ChangeSet } from '../../src/state/types.js';
import { dump } from './helpers.js';

/** What a change set looks like after `postMessage`: a structured clone. */
function overTheWire(set: ChangeSet): ChangeSet {
  return structuredClone(set);
}

test('a replica fed by the change stream equals the store at the same index', () => {
  const store = new StateStore({ tables: ['nodes', 'allocs'] });
  const replica = new Replica();
  store.onChange((c) => replica.apply(overTheWire(c)));
  store.write((txn) => {
    txn.put('nodes', 'n1', { cpu: 4 });
    txn.put('allocs', 'a1', { node: 'n1' });
  });
  store.write((txn) => {
    txn.put('nodes', 'n1', { cpu: 2 });
    txn.delete('allocs', 'a1');
    txn.put('allocs', 'a2', { node: 'n1' });
  });
  assert.equal(replica.appliedIndex, 2);
  assert.deepEqual(dump(replica.snapshot(), store.tables()), dump(store.snapshot()));
  assert.equal(replica.snapshot().get('allocs', 'a1'), undefined);
  assert.equal(replica.snapshot().get('nodes', 'n1')?.createIndex, 1);
  assert.equal(replica.snapshot().get('nodes', 'n1')?.modifyIndex, 2);
});

test('a replica snapshot is immutable while later change sets are applied', () => {
  const store = new StateStore({ tables: ['t'] });
  const replica = new Replica();
  store.onChange((c) => replica.apply(overTheWire(c)));
  store.write((txn) => txn.put('t', 'k', { v: 1 }));
  const snap = replica.snapshot();
  store.write((txn) => txn.put('t', 'k', { v: 2 }));
  store.write((txn) => txn.delete('t', 'k'));
  assert.equal(snap.index, 1);
  assert.deepEqual(snap.get('t', 'k')?.value, { v: 1 });
  assert.equal(snap.size('t'), 1);
  assert.equal(replica.snapshot().get('t', 'k'), undefined);
  const record = snap.get<{ v: number }>('t', 'k')!;
  assert.ok(Object.isFrozen(record) && Object.isFrozen(record.value), 'values that arrived by message are frozen');
});

test('a replica learns tables from records and reads unknown tables as empty', () => {
  const replica = new Replica();
  assert.deepEqual(replica.snapshot().tables(), []);
  assert.equal(replica.snapshot().get('nodes', 'n1'), undefined);
  assert.equal(replica.snapshot().size('nodes'), 0);
  assert.deepEqual([...replica.snapshot().list('nodes')], []);
  replica.apply({ index: 1, changes: [{ table: 'nodes', key: 'n1', value: 1, createIndex: 1, modifyIndex: 1 }] });
  assert.deepEqual(replica.snapshot().tables(), ['nodes']);
});

test('apply ignores old change sets and throws a typed error on a gap, changing nothing', () => {
  const store = new StateStore({ tables: ['t'] });
  const sets: ChangeSet[] = [];
  store.onChange((c) => sets.push(c));
  for (let i = 1; i <= 4; i++) store.write((txn) => txn.put('t', `k${i}`, i));
  const replica = new Replica();
  replica.apply(sets[0]!);
  replica.apply(sets[1]!);
  replica.apply(sets[0]!); // redelivered: ignored
  assert.equal(replica.appliedIndex, 2);
  assert.equal(replica.snapshot().size('t'), 2);
  assert.throws(
    () => replica.apply(sets[3]!),
    (e: unknown) => e instanceof ReplicaGapError && e instanceof InvalidStateError && e.code === 'ERR_REPLICA_GAP' && /index 3.*got index 4/.test(e.message),
  );
  assert.equal(replica.appliedIndex, 2);
  assert.equal(replica.snapshot().size('t'), 2);
  // Catch up from the store's history.
  for (const set of store.changesSince(replica.appliedIndex) ?? []) replica.apply(set);
  assert.equal(replica.appliedIndex, 4);
  assert.deepEqual(dump(replica.snapshot()), dump(store.snapshot()));
});

test('reset replaces everything with a full copy', () => {
  const store = new StateStore({ tables: ['t', 'u'] });
  store.write((txn) => txn.put('t', 'a', 1));
  store.write((txn) => {
    txn.put('t', 'b', 2);
    txn.put('u', 'c', 3);
  });
  const replica = new Replica();
  replica.apply({ index: 1, changes: [{ table: 't', key: 'stale', value: 'x', createIndex: 1, modifyIndex: 1 }] });
  const before = replica.snapshot();
  replica.reset(overTheWire(store.full()));
  assert.equal(replica.appliedIndex, 2);
  assert.deepEqual(dump(replica.snapshot()), dump(store.snapshot()));
  assert.equal(replica.snapshot().get('t', 'stale'), undefined);
  assert.equal(before.get('t', 'stale')?.value, 'x', 'the old snapshot is untouched by reset');
  // After a reset the stream continues from the full copy's index.
  store.write((txn) => txn.put('t', 'a', 9));
  replica.apply(store.changesSince(2)![0]!);
  assert.equal(replica.snapshot().get('t', 'a')?.value, 9);
});

test('malformed change sets are refused before anything is applied', () => {
  const replica = new Replica();
  assert.throws(() => replica.apply(null as never), InvalidArgumentError);
  assert.throws(() => replica.apply({ index: 1.5, changes: [] }), InvalidArgumentError);
  assert.throws(() => replica.apply({ index: 1, changes: {} as never }), InvalidArgumentError);
  assert.throws(
    () =>
      replica.apply({
        index: 1,
        changes: [
          { table: 't', key: 'ok', value: 1, createIndex: 1, modifyIndex: 1 },
          { table: 't', key: 7, value: 1, createIndex: 1, modifyIndex: 1 } as never,
        ],
      }),
    InvalidArgumentError,
  );
  assert.equal(replica.appliedIndex, 0);
  assert.equal(replica.snapshot().size('t'), 0);
  assert.throws(() => replica.reset({ index: -1, changes: [] }), InvalidArgumentError);
});

test('a replica on a worker thread follows change sets sent by postMessage', async () => {
  const { Worker } = await import('node:worker_threads');
  const replicaUrl = new URL('../../src/state/replica.js', import.meta.url).href;
  // The thread imports only the replica module: proof that it needs nothing from the main thread.
  const worker = new Worker(
    `const { parentPort } = require('node:worker_threads');
     import(${JSON.stringify(replicaUrl)}).then(({ Replica }) => {
       const replica = new Replica();
       parentPort.on('message', (msg) => {
         if (msg.type === 'reset') replica.reset(msg.set);
         else if (msg.type === 'apply') replica.apply(msg.set);
         else {
           const snap = replica.snapshot();
           const out = [];
           for (const table of snap.tables()) for (const r of snap.list(table)) out.push({ ...r });
           parentPort.postMessage({ index: replica.appliedIndex, records: out });
         }
       });
       parentPort.postMessage('ready');
     });`,
    { eval: true },
  );
  try {
    const replies: unknown[] = [];
    const waiters: Array<(value: unknown) => void> = [];
    worker.on('message', (m: unknown) => {
      const waiter = waiters.shift();
      if (waiter) waiter(m);
      else replies.push(m);
    });
    const next = (): Promise<unknown> => (replies.length > 0 ? Promise.resolve(replies.shift()) : new Promise((resolve) => waiters.push(resolve)));
    assert.equal(await next(), 'ready');

    const store = new StateStore({ tables: ['nodes', 'allocs'] });
    store.write((txn) => txn.put('nodes', 'n1', { cpu: 4, labels: new Map([['zone', 'a']]) }));
    worker.postMessage({ type: 'reset', set: store.full() });
    store.onChange((set) => worker.postMessage({ type: 'apply', set }));
    store.write((txn) => txn.put('allocs', 'a1', { node: 'n1', started: new Date(0) }));
    store.write((txn) => txn.delete('nodes', 'n1'));
    worker.postMessage({ type: 'dump' });
    const reply = (await next()) as { index: number; records: unknown[] };
    assert.equal(reply.index, 3);
    const expected = dump(store.snapshot()).map((r) => ({ ...r }));
    assert.deepEqual(reply.records, expected);
  } finally {
    await worker.terminate();
  }
});
