/**
 * `claimTtlMs` with a shared backend: a process that cannot renew its claims cancels their runs at half the lease,
 * and a handler that ignores the cancel is terminated `cancelGraceMs` later; both must happen before another
 * process may claim the task, so half the lease (`claimTtlMs` less its renewal interval) must exceed
 * `cancelGraceMs`. `createEngine` refuses a shorter one, naming a least value that always suffices; nothing
 * connects. In memory the option is ignored.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createEngine } from '../../src/index.js';
import { postgresBackend } from '../../src/postgres/index.js';

// Never reached: createEngine does not connect.
const backend = (): ReturnType<typeof postgresBackend> => postgresBackend({ connectionString: 'postgres://nobody@127.0.0.1:1/none' });

test('claimTtlMs must leave half its lease above cancelGraceMs with PostgreSQL: refused typed at createEngine, with the least value', async () => {
  for (const [claimTtlMs, cancelGraceMs, least] of [
    [2_000, undefined, 2_502],
    [10_000, 5_000, 12_502],
  ] as const) {
    assert.throws(
      () => createEngine({ backend: backend(), schedulers: {}, claimTtlMs, ...(cancelGraceMs === undefined ? {} : { cancelGraceMs }) }),
      (e: unknown) =>
        (e as { code?: unknown }).code === 'ERR_INVALID_OPTION' &&
        (e as Error).message.includes('`claimTtlMs`') &&
        (e as Error).message.includes(`at least ${least} ms`) &&
        (e as Error).message.includes(`got \`${claimTtlMs}\``),
      `claimTtlMs ${claimTtlMs}`,
    );
  }
  // The least value it names is accepted; and in memory the bound does not apply.
  for (const engine of [createEngine({ backend: backend(), schedulers: {}, claimTtlMs: 2_502 }), createEngine({ schedulers: {}, claimTtlMs: 2_000 })]) {
    await engine.stop();
  }
});
