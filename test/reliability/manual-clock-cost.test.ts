/**
 * A manual clock stays cheap to advance with an engine on it: idle workers wait for work on the broker (a stop or a
 * pause ends the wait), not on a dequeue timeout each, so advancing a simulated day wakes the task ticker and the
 * runs it starts, and no idle worker. Counted in dequeues and timers, not in milliseconds.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock, type TimerHandle } from '../../src/clock.js';
import { fixture, finished, started } from './helpers.js';

/** A manual clock that counts the timers armed on it. */
class CountingClock extends ManualClock {
  armed = 0;
  override setTimer(callback: () => void, delayMs: number): TimerHandle {
    this.armed++;
    return super.setTimer(callback, delayMs);
  }
}

const HOUR = 3_600_000;

for (const workers of [16, 512]) {
  test(`advancing a day arms the ticker's timers and the runs', none per idle worker (${workers} workers)`, async () => {
    const clock = new CountingClock(Date.UTC(2026, 0, 1));
    const engine = await started({ threads: 2, workers, clock, schedulers: { idle: fixture('noop') }, handlers: { work: fixture('noop') } });
    for (let i = 0; i < 3; i++) engine.tasks.add({ id: `t${i}`, every: '1h', maxConcurrency: 1, handler: 'work' });
    const ran = finished(engine, 3);
    clock.advance(HOUR);
    await ran;
    let dequeues = 0;
    const broker = engine.broker;
    const dequeueWith = broker.dequeueWith.bind(broker);
    broker.dequeueWith = (...args) => {
      dequeues++;
      dequeueWith(...args);
    };
    clock.armed = 0;
    clock.advance(24 * HOUR);
    assert.equal(dequeues, 0, 'no idle worker woke to dequeue again');
    const perSecond = clock.armed / (24 * 3600);
    // The ticker wakes once per `tickMs` (1 s) while tasks are claimed; each run arms a few timers of its own.
    assert.ok(perSecond < 1.1, `${clock.armed} timers armed in a simulated day (${perSecond.toFixed(3)} per second)`);
    await engine.stop();
  });
}
