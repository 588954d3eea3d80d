/**
 * Error codes are a closed, literal set: `code` is typed `ErrorCode`, every class's code is in `errorCodes`, and an
 * error that crossed from a thread keeps a tickpool code but never claims a foreign one (that is `remoteCode`).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import * as errors from '../src/errors.js';
import { errorCodes, fromWire, SupersededError, TickpoolError, toWire, type ErrorCode } from '../src/errors.js';

// Compile-time half: these lines do not build unless `code` is the literal union.
const known: ErrorCode = new SupersededError('a', 'b').code;
// @ts-expect-error a string that is no tickpool code is not an ErrorCode
const unknown: ErrorCode = 'ERR_NOT_A_CODE';
void unknown;

test('SupersededError names the evaluation and the one that superseded it', () => {
  const error = new SupersededError('e1', 'e2');
  assert.ok(error instanceof TickpoolError);
  assert.equal(error.code, 'ERR_SUPERSEDED');
  assert.equal(known, 'ERR_SUPERSEDED');
  assert.equal(error.evalId, 'e1');
  assert.equal(error.supersededBy, 'e2');
  assert.deepEqual(error.details, { evalId: 'e1', supersededBy: 'e2' });
  assert.match(error.message, /"e1".*"e2"/);
});

test('errorCodes lists exactly the codes of the error classes, each once', () => {
  const classes = Object.values(errors as Record<string, unknown>).filter((v) => typeof v === 'function' && (v as { prototype?: unknown }).prototype instanceof Error);
  const source = readFileSync(new URL('../../src/errors.ts', import.meta.url), 'utf8');
  const declared = [...source.matchAll(/readonly code: ErrorCode = '(ERR_[A-Z_]+)'/g)].map((m) => m[1]!);
  assert.ok(classes.length >= 30, `found ${classes.length} error classes`);
  assert.equal(new Set(errorCodes).size, errorCodes.length, 'no code twice');
  assert.deepEqual([...errorCodes].sort(), [...new Set(declared)].sort());
});

test('a remote error keeps a tickpool code, and a foreign code only as remoteCode', () => {
  const tickpool = fromWire(toWire(new errors.SyncLimitError(3, 1, 10)));
  assert.equal(tickpool.code, 'ERR_SYNC_LIMIT');
  assert.equal((tickpool as errors.RemoteError).remoteCode, 'ERR_SYNC_LIMIT');
  const foreign = fromWire(toWire(Object.assign(new Error('boom'), { code: 'E_FIXTURE' })));
  assert.equal(foreign.code, 'ERR_USER_CODE');
  assert.equal((foreign as errors.RemoteError).remoteCode, 'E_FIXTURE');
  const none = fromWire(toWire(new Error('plain')));
  assert.equal(none.code, 'ERR_USER_CODE');
  assert.equal((none as errors.RemoteError).remoteCode, undefined);
});
