/** Options of the in-memory store and run log are validated at the constructor, with typed errors. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { InvalidOptionError } from '../../src/errors.js';
import { MemoryDesiredState } from '../../src/tasks/memory-desired-state.js';
import { MemoryRunLog } from '../../src/tasks/memory-run-log.js';

function invalidOption(name: string, expected: RegExp): (error: unknown) => boolean {
  return (error: unknown) => {
    assert.ok(error instanceof InvalidOptionError, `expected InvalidOptionError, got ${String(error)}`);
    assert.equal(error.code, 'ERR_INVALID_OPTION');
    assert.equal(error.details?.['name'], name);
    assert.match(error.message, expected);
    return true;
  };
}

test('MemoryRunLog: options are undefined or an object', () => {
  for (const options of [null, 5, 'x', [], () => ({})]) {
    assert.throws(() => new MemoryRunLog(options as never), invalidOption('options', /^Expected `options` to be an object/));
  }
  assert.throws(() => new MemoryRunLog({ maxRunsPerTask: 0 }), invalidOption('maxRunsPerTask', /a positive integer, got `0`/));
  assert.throws(() => new MemoryRunLog({ maxRunsPerTask: 1.5 }), invalidOption('maxRunsPerTask', /got `1.5`/));
  new MemoryRunLog();
  new MemoryRunLog(undefined);
  new MemoryRunLog({});
  new MemoryRunLog({ maxRunsPerTask: 1 });
});

test('MemoryDesiredState: options are undefined or an object; clock is a Clock', () => {
  for (const options of [null, 5, 'x', [], () => ({})]) {
    assert.throws(() => new MemoryDesiredState(options as never), invalidOption('options', /^Expected `options` to be an object/));
  }
  for (const clock of [5, 'now', {}, { now: () => 0 }, { now: () => 0, setTimer: () => ({ due: 0 }) }, () => 0]) {
    assert.throws(
      () => new MemoryDesiredState({ clock } as never),
      invalidOption('clock', /^Expected `clock` to be a Clock \(now, setTimer, clearTimer\), got /),
    );
  }
  const clock = new ManualClock(1234);
  const store = new MemoryDesiredState({ clock });
  store.putTask({ id: 'x', every: '1s', maxConcurrency: 1, handler: 'h' });
  assert.equal(store.getMeta('x')?.latestCompleted, 1234, 'the clock given is the one read');
  new MemoryDesiredState();
  new MemoryDesiredState(undefined);
  new MemoryDesiredState({});
});
