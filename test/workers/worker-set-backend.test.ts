/**
 * `WorkerSet` as the broker's `LeaseKeeper`: `serve` registers it with the broker it serves, which then asks it
 * before a lease ends; and `cancelEvaluation` finds a delivery among its own workers without asking the broker.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { EvalBroker } from '../../src/broker/eval-broker.js';
import { ManualClock } from '../../src/clock.js';
import type { SchedulingWorker } from '../../src/engine/scheduling-worker.js';
import { WorkerSet } from '../../src/engine/worker-set.js';

interface Fake {
  current: { token: string; evaluation: { id: string } } | undefined;
  readonly calls: string[];
  progress: boolean | number;
  cancels: boolean;
}

function served(count: number): { set: WorkerSet; fakes: Fake[]; workers: SchedulingWorker[]; broker: EvalBroker; clock: ManualClock } {
  const clock = new ManualClock(0);
  // No extendNackDeadline option: the set is asked because `serve` registered it.
  const broker = new EvalBroker({ clock, logger: pino({ level: 'silent' }), nackTimeoutMs: 1000 });
  const set = new WorkerSet();
  const fakes: Fake[] = [];
  const workers: SchedulingWorker[] = [];
  set.serve(broker, count, (id) => {
    const fake: Fake = { current: undefined, calls: [], progress: true, cancels: true };
    const worker = {
      id,
      get current() {
        return fake.current;
      },
      cancelCurrent: () => (fake.calls.push('cancel'), fake.cancels),
      deadlineProgress: (token: string) => (fake.calls.push(`progress ${token}`), fake.progress),
    } as unknown as SchedulingWorker;
    fakes.push(fake);
    workers.push(worker);
    return worker;
  });
  return { set, fakes, workers, broker, clock };
}

test('serve makes the set the lease keeper of its broker: a holder with progress keeps its lease, one without loses it', () => {
  const { fakes, workers, set, broker, clock } = served(2);
  broker.enqueue({ id: 'e1', type: 'service' });
  const d = broker.tryDequeue(['service'])!;
  fakes[1]!.current = { token: d.token, evaluation: { id: 'e1' } };
  set.held(d.token, workers[1]!);
  clock.advance(1000);
  assert.deepEqual(fakes[1]!.calls, [`progress ${d.token}`]);
  assert.equal(broker.inspect('e1')?.state, 'unacked', 'extended');
  fakes[1]!.progress = false;
  clock.advance(1000);
  assert.equal(broker.inspect('e1')?.state, 'waiting', 'no progress: the lease ended');
  assert.deepEqual(fakes[1]!.calls, [`progress ${d.token}`, `progress ${d.token}`, 'cancel'], 'and its holder was told to stop');
  assert.equal(set.leaseProgress('e1', 'other-token'), false);
  assert.deepEqual(fakes[0]!.calls, []);
});

test('cancelEvaluation cancels what its workers hold of that evaluation, and says whether anything was canceled', () => {
  const { fakes, set } = served(3);
  fakes[0]!.current = { token: 't-old', evaluation: { id: 'e1' } };
  fakes[2]!.current = { token: 't-new', evaluation: { id: 'e1' } };
  fakes[1]!.current = { token: 't-x', evaluation: { id: 'e2' } };
  // The old delivery was already told to stop when its lease ended: a second cancel of it is refused by its slot.
  fakes[0]!.cancels = false;
  assert.equal(set.cancelEvaluation('e1'), true);
  assert.deepEqual(
    fakes.map((f) => f.calls),
    [['cancel'], [], ['cancel']],
  );
  fakes[2]!.cancels = false;
  assert.equal(set.cancelEvaluation('e1'), false, 'nothing new was canceled');
  assert.equal(set.cancelEvaluation('nobody'), false);
});
