import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidTaskError } from '../../src/errors.js';
import { isValidatedTask, parseOffset, validateTask, validateTaskMeta } from '../../src/tasks/task.js';

const base = { id: 't', every: '10s', maxConcurrency: 1, handler: 'h' };

function rejects(input: unknown, field: string): void {
  assert.throws(
    () => validateTask(input),
    (error: unknown) => {
      assert.ok(error instanceof InvalidTaskError, `expected InvalidTaskError, got ${String(error)}`);
      assert.equal(error.code, 'ERR_INVALID_TASK');
      assert.equal(error.details?.['name'], field, error.message);
      return true;
    },
  );
}

test('validateTask returns a frozen copy with every/offset in ms and only the given fields', () => {
  const input = { ...base, offset: '-1m30s', payload: { n: 1 } };
  const task = validateTask(input);
  assert.deepEqual({ ...task }, { id: 't', every: 10_000, offset: -90_000, maxConcurrency: 1, handler: 'h', payload: { n: 1 } });
  assert.ok(Object.isFrozen(task));
  assert.notEqual(task, input);
  assert.ok(isValidatedTask(task));
  assert.ok(!isValidatedTask(input));
  assert.equal(validateTask(task), task, 'a validated task is not copied again');
  assert.equal(JSON.stringify(task), JSON.stringify({ id: 't', every: 10_000, offset: -90_000, maxConcurrency: 1, handler: 'h', payload: { n: 1 } }));
});

test('cron tasks keep their expression and zone', () => {
  const task = validateTask({ id: 'c', cron: '0 9 * * 1-5', timezone: 'America/New_York', maxConcurrency: 3, retry: 2, catchUp: 'latest', handler: 'h' });
  assert.equal(task.cron, '0 9 * * 1-5');
  assert.equal(task.timezone, 'America/New_York');
  assert.equal(task.retry, 2);
  assert.equal(task.catchUp, 'latest');
});

test('each bad field is named in the InvalidTaskError', () => {
  rejects(null, 'task');
  rejects({ ...base, id: '' }, 'id');
  rejects({ ...base, id: 7 }, 'id');
  rejects({ id: 't', maxConcurrency: 1, handler: 'h' }, 'cron');
  rejects({ ...base, cron: '* * * * *' }, 'every');
  rejects({ ...base, every: 0 }, 'every');
  rejects({ ...base, every: '10 seconds' }, 'every');
  rejects({ id: 't', cron: '* * *', maxConcurrency: 1, handler: 'h' }, 'cron');
  rejects({ id: 't', cron: '0 9 * * *', timezone: 'Mars/Olympus', maxConcurrency: 1, handler: 'h' }, 'timezone');
  rejects({ ...base, maxConcurrency: 0 }, 'maxConcurrency');
  rejects({ ...base, maxConcurrency: 101 }, 'maxConcurrency');
  rejects({ ...base, maxConcurrency: 1.5 }, 'maxConcurrency');
  rejects({ ...base, maxConcurrency: undefined }, 'maxConcurrency');
  rejects({ ...base, retry: -1 }, 'retry');
  rejects({ ...base, catchUp: 'some' }, 'catchUp');
  rejects({ ...base, handler: '' }, 'handler');
  rejects({ ...base, offset: '5 min' }, 'offset');
  rejects({ ...base, offset: 1.5 }, 'offset');
  rejects({ ...base, maxconcurrency: 2 }, 'maxconcurrency');
});

test('parseOffset takes ms, durations, negatives and zero', () => {
  assert.equal(parseOffset(0), 0);
  assert.equal(parseOffset('0'), 0);
  assert.equal(parseOffset('-0'), 0);
  assert.equal(parseOffset(-250), -250);
  assert.equal(parseOffset('30s'), 30_000);
  assert.equal(parseOffset('-5m'), -300_000);
  assert.equal(parseOffset('1h30m'), 5_400_000);
  assert.throws(() => parseOffset('--5m'), InvalidTaskError);
  assert.throws(() => parseOffset(Number.NaN), InvalidTaskError);
});

test('validateTaskMeta checks latestCompleted', () => {
  assert.deepEqual(validateTaskMeta(undefined), {});
  assert.deepEqual(validateTaskMeta({}), {});
  assert.deepEqual(validateTaskMeta({ latestCompleted: 5 }), { latestCompleted: 5 });
  assert.throws(() => validateTaskMeta({ latestCompleted: '5' }), InvalidTaskError);
  assert.throws(() => validateTaskMeta({ latestCompleted: Infinity }), InvalidTaskError);
  assert.throws(() => validateTaskMeta(3), InvalidTaskError);
});
