/**
 * Every failure a caller sees is a `TickpoolError`: a task handler that fails by returning a `RunResult` `{ error }`
 * reaches the caller as one that throws does, a `RemoteError` (`ERR_USER_CODE`, the handler's own code as
 * `remoteCode`), in its `done` and in the run log.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RemoteError, TickpoolError } from '../../src/errors.js';
import { fixture, started } from './helpers.js';

test("a returned RunResult's error reaches the caller as a RemoteError, as a thrown one does", async () => {
  const engine = await started({ threads: 1, handlers: { returns: fixture('returns-failure') } });
  engine.tasks.add({ id: 'r', every: '1h', maxConcurrency: 1, handler: 'returns' });
  const { runId, done } = await engine.tasks.forceRun('r');
  const error = await done.then(
    () => assert.fail('the run must fail'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof TickpoolError, 'a TickpoolError');
  assert.ok(error instanceof RemoteError);
  assert.equal(error.code, 'ERR_USER_CODE');
  assert.equal(error.remoteCode, 'E_RETURNED');
  assert.equal(error.message, 'no luck this time');
  const logged = (await engine.tasks.runLog.runs('r')).find((r) => r.runId === runId);
  assert.equal(logged?.finalStatus, 'failed');
  assert.ok(logged?.error instanceof RemoteError, 'the run log holds the same error');
});
