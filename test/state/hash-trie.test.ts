import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { HashTrie, hashKey, newEditToken, type EditToken } from '../../src/state/hash-trie.js';

// Pairs of keys with equal 32-bit hashes (found by brute force), plus the same suffix on both sides, which keeps
// FNV-1a hashes equal: they exercise collision nodes at different depths.
const colliding = ['k32728', 'k261234', 'k32729', 'k261235', 'k32724', 'k261238', 'k32728x', 'k261234x'];

test('the colliding keys used below really collide', () => {
  assert.equal(hashKey('k32728'), hashKey('k261234'));
  assert.equal(hashKey('k32728x'), hashKey('k261234x'));
  assert.notEqual(hashKey('k32728'), hashKey('k32729'));
});

function contents<V>(trie: HashTrie<V>): Map<string, V> {
  const out = new Map<string, V>();
  for (const [key, value] of trie.values() as IterableIterator<[string, V]>) {
    assert.equal(out.has(key), false, `key ${key} listed twice`);
    out.set(key, value);
  }
  return out;
}

type Op = { kind: 'set'; key: string; value: number } | { kind: 'delete'; key: string } | { kind: 'publish' };

const keyArb = fc.oneof(fc.constantFrom(...colliding), fc.integer({ min: 0, max: 400 }).map((n) => `key-${n}`), fc.string({ maxLength: 3 }));
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant('set' as const), key: keyArb, value: fc.integer() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('delete' as const), key: keyArb }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'publish' as const }) },
);

test('HashTrie behaves like a Map, and every published version stays unchanged (with and without edit tokens)', () => {
  fc.assert(
    fc.property(fc.array(opArb, { maxLength: 300 }), fc.boolean(), (ops, useTokens) => {
      // Values are [key, value] pairs so a listing can be checked against the model.
      let trie = HashTrie.empty<[string, number]>();
      const model = new Map<string, [string, number]>();
      const published: Array<{ trie: HashTrie<[string, number]>; model: Map<string, [string, number]> }> = [];
      let edit: EditToken | undefined = useTokens ? newEditToken() : undefined;
      for (const op of ops) {
        if (op.kind === 'publish') {
          published.push({ trie, model: new Map(model) });
          // A published version must never be written under its token again.
          edit = useTokens ? newEditToken() : undefined;
        } else if (op.kind === 'set') {
          trie = trie.set(op.key, [op.key, op.value], edit);
          model.set(op.key, [op.key, op.value]);
        } else {
          trie = trie.delete(op.key, edit);
          model.delete(op.key);
        }
        assert.equal(trie.size, model.size);
      }
      published.push({ trie, model });
      for (const version of published) {
        assert.equal(version.trie.size, version.model.size);
        assert.deepEqual(contents(version.trie), new Map([...version.model].map(([k, v]) => [k, v[1]])));
        for (const key of [...colliding, 'key-1', 'key-2', '', 'absent']) {
          assert.deepEqual(version.trie.get(key), version.model.get(key));
        }
      }
    }),
    { numRuns: 300 },
  );
});

test('delete of an absent key returns the same trie', () => {
  const trie = HashTrie.empty<number>().set('a', 1).set('k32728', 2);
  assert.equal(trie.delete('b'), trie);
  assert.equal(trie.delete('k261234'), trie, 'same hash, other key');
  assert.equal(HashTrie.empty<number>().delete('a').size, 0);
});

test('a large trie keeps every key through inserts and deletes', () => {
  let trie = HashTrie.empty<number>();
  for (let i = 0; i < 20_000; i++) trie = trie.set(`id-${i}`, i);
  const before = trie;
  for (let i = 0; i < 20_000; i += 2) trie = trie.delete(`id-${i}`);
  assert.equal(before.size, 20_000);
  assert.equal(trie.size, 10_000);
  assert.equal(before.get('id-10'), 10);
  assert.equal(trie.get('id-10'), undefined);
  assert.equal(trie.get('id-11'), 11);
  let sum = 0;
  for (const v of trie.values()) sum += v;
  assert.equal(sum, Array.from({ length: 10_000 }, (_, k) => 2 * k + 1).reduce((a, b) => a + b, 0));
});
