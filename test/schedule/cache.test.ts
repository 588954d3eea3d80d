import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate as tick } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { InvalidTaskError } from '../../src/errors.js';
import { ScheduleCache, type Schedule } from '../../src/tasks/schedule/index.js';

test('ScheduleCache: equal specs → the same object; different specs → different objects', () => {
  const cache = new ScheduleCache();
  const a = cache.get({ cron: '0 * * * *', timezone: 'America/New_York' });
  assert.equal(cache.get({ cron: '0  *  * * *', timezone: 'America/New_York' }), a);
  assert.equal(a.key, 'cron:0 * * * *@America/New_York');
  const b = cache.get({ every: '1m' });
  assert.equal(cache.get({ every: 60_000 }), b);
  assert.notEqual(cache.get({ cron: '0 * * * *' }), a);
  assert.equal(cache.size, 3);
  // Separate caches do not share.
  assert.notEqual(new ScheduleCache().get({ every: '1m' }), b);
});

test('ScheduleCache: a failed get adds nothing', () => {
  const cache = new ScheduleCache();
  assert.throws(() => cache.get({ cron: '61 * * * *' }), InvalidTaskError);
  assert.throws(() => cache.get({ every: -1 }), InvalidTaskError);
  assert.equal(cache.size, 0);
});

test('ScheduleCache: entries whose Schedule nobody holds are evicted after garbage collection', async () => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const cache = new ScheduleCache();
  const kept: Schedule[] = [cache.get({ every: '1s' })];
  for (let i = 1; i <= 200; i++) cache.get({ every: i * 1000 + 1 }); // dropped at once
  assert.equal(cache.size, 201);
  // A WeakRef target lives until the end of the current job; finalizers run in later tasks.
  for (let round = 0; round < 50 && cache.size > 1; round++) {
    await tick();
    gc();
    await tick();
  }
  assert.equal(cache.size, 1);
  assert.equal(cache.get({ every: 1000 }), kept[0]); // the held one is still shared
});
