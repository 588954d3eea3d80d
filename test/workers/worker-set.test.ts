/**
 * `WorkerSet`: the token → worker index behind nack deadline extensions, cancels and aborts, and the broker's
 * `broker:nack` hook, on stand-in workers (only what the set reads of a worker).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EvalBroker } from '../../src/broker/eval-broker.js';
import { ManualClock } from '../../src/clock.js';
import type { SchedulingWorker } from '../../src/engine/scheduling-worker.js';
import { WorkerSet } from '../../src/engine/worker-set.js';
import { pino } from 'pino';

interface Fake {
  readonly id: number;
  current: { token: string; evaluation: { id: string } } | undefined;
  readonly calls: string[];
  reads: number;
  progress: boolean | number;
}

function fakeWorker(id: number): { fake: Fake; worker: SchedulingWorker } {
  const fake: Fake = { id, current: undefined, calls: [], reads: 0, progress: 42 };
  const worker = {
    id,
    get current() {
      fake.reads++;
      return fake.current;
    },
    cancelCurrent: () => (fake.calls.push('cancel'), true),
    abortCurrent: (token: string) => (fake.calls.push(`abort ${token}`), true),
    deadlineProgress: (token: string) => (fake.calls.push(`progress ${token}`), fake.progress),
    givenBack: id,
  };
  return { fake, worker: worker as unknown as SchedulingWorker };
}

function setOf(count: number): { set: WorkerSet; fakes: Fake[]; workers: SchedulingWorker[]; clock: ManualClock; broker: EvalBroker } {
  const clock = new ManualClock(0);
  const set = new WorkerSet();
  const broker = new EvalBroker({ clock, logger: pino({ level: 'silent' }), nackTimeoutMs: 1000, extendNackDeadline: set.extendNackDeadline });
  const fakes: Fake[] = [];
  const workers: SchedulingWorker[] = [];
  set.serve(broker, count, (id) => {
    const { fake, worker } = fakeWorker(id);
    fakes.push(fake);
    workers.push(worker);
    return worker;
  });
  return { set, fakes, workers, clock, broker };
}

test('a delivery is found by its token without looking at the other workers', () => {
  const { set, fakes, workers } = setOf(64);
  const holder = fakes[40]!;
  holder.current = { token: 't1', evaluation: { id: 'e1' } };
  set.held('t1', workers[40]!);
  for (const f of fakes) f.reads = 0;
  assert.equal(set.extendNackDeadline('e1', 't1'), 42);
  assert.equal(set.cancel('e1', 't1'), true);
  assert.equal(set.abort('e1', 't1', 'why'), true);
  assert.deepEqual(holder.calls, ['progress t1', 'cancel', 'abort t1']);
  assert.equal(fakes.reduce((n, f) => n + (f === holder ? 0 : f.reads), 0), 0, 'no other worker was read');
});

test('a token that was released, or names another evaluation, finds no worker', () => {
  const { set, fakes, workers } = setOf(2);
  fakes[0]!.current = { token: 't1', evaluation: { id: 'e1' } };
  set.held('t1', workers[0]!);
  assert.equal(set.extendNackDeadline('other', 't1'), false, 'by id as well as token');
  assert.equal(set.cancel('e1', 'nope'), false);
  // The worker moved on to a new delivery: the old token no longer matches what it holds.
  fakes[0]!.current = { token: 't2', evaluation: { id: 'e1' } };
  assert.equal(set.cancel('e1', 't1'), false);
  set.released('t1');
  fakes[0]!.current = { token: 't1', evaluation: { id: 'e1' } };
  assert.equal(set.cancel('e1', 't1'), false, 'released');
  assert.deepEqual(fakes[0]!.calls, []);
  assert.equal(set.size, 2);
  assert.equal(set.givenBack, 1, 'summed over the workers');
});

test('a nack deadline that fires cancels the old delivery on the worker that still holds it; a plain nack does not', () => {
  const { set, fakes, workers, clock, broker } = setOf(2);
  broker.enqueue({ id: 'e1', jobId: 'j', type: 'service', priority: 50 });
  const first = broker.tryDequeue(['service'])!;
  fakes[1]!.current = { token: first.token, evaluation: { id: 'e1' } };
  set.held(first.token, workers[1]!);
  broker.nack('e1', first.token);
  assert.deepEqual(fakes[1]!.calls, [], 'a plain nack is the worker\'s own');
  clock.advance(60_000);
  const second = broker.tryDequeue(['service'])!;
  fakes[0]!.current = { token: second.token, evaluation: { id: 'e1' } };
  set.held(second.token, workers[0]!);
  fakes[0]!.progress = false;
  clock.advance(1000);
  assert.deepEqual(fakes[0]!.calls, [`progress ${second.token}`, 'cancel']);
});
