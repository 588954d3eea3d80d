import assert from 'node:assert/strict';
import { test } from 'node:test';
import { randomId } from '../../src/broker/random-id.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test('randomId: version-4 UUIDs, all different, across many entropy batches', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 20_000; i++) {
    const id = randomId();
    assert.match(id, UUID_V4);
    seen.add(id);
  }
  assert.equal(seen.size, 20_000);
});

test('randomId: every hex digit appears in every free position (the bytes are random, not a pattern)', () => {
  const digits = Array.from({ length: 36 }, () => new Set<string>());
  for (let i = 0; i < 5_000; i++) {
    const id = randomId();
    for (let p = 0; p < 36; p++) digits[p]!.add(id[p]!);
  }
  for (let p = 0; p < 36; p++) {
    const fixed = p === 8 || p === 13 || p === 18 || p === 23 ? 1 : p === 14 ? 1 : p === 19 ? 4 : 16;
    assert.equal(digits[p]!.size, fixed, `position ${p}`);
  }
});
