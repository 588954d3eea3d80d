import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ManualClock } from '../../src/clock.js';
import { TaskAlreadyClaimedError, TaskNotClaimedError } from '../../src/errors.js';
import { SlotTable } from '../../src/slots/slot-table.js';
import { MemoryDesiredState } from '../../src/tasks/memory-desired-state.js';
import { MemoryRunLog } from '../../src/tasks/memory-run-log.js';
import { TaskScheduler } from '../../src/tasks/task-scheduler.js';
import type { CatchUpPolicy } from '../../src/tasks/task.js';
import type { DesiredState, QueuedRun, RunCreation } from '../../src/tasks/types.js';
import { FakeExecutor, quietLogger, settled } from './fixtures.js';

const MIN = 60_000;
const FINAL = new Set(['success', 'failed', 'canceled']);

/** Wraps the store: records what it created and finished, and answers synchronously or with promises. */
class RecordingState implements DesiredState {
  readonly created = new Map<string, QueuedRun>();
  readonly manual = new Set<string>();
  readonly finished = new Map<string, number>();
  constructor(
    readonly inner: MemoryDesiredState,
    readonly async: boolean,
  ) {}
  createNextRun(taskId: string, now: number): RunCreation | Promise<RunCreation> {
    const answer = (): RunCreation => {
      const creation = this.inner.createNextRun(taskId, now);
      this.created.set(creation.created.runId, creation.created);
      return creation;
    };
    return this.async ? Promise.resolve().then(answer) : answer();
  }
  finishRun(taskId: string, runId: string): void | Promise<void> {
    const finish = (): void => {
      this.finished.set(runId, (this.finished.get(runId) ?? 0) + 1);
      this.inner.finishRun(taskId, runId);
    };
    return this.async ? Promise.resolve().then(finish) : finish();
  }
  forceRun(taskId: string, scheduledFor: number, now: number): QueuedRun {
    const run = this.inner.forceRun(taskId, scheduledFor, now);
    this.manual.add(run.runId);
    return run;
  }
}

type Op =
  | { readonly kind: 'claim'; readonly k: number; readonly backlog: number; readonly delta: number }
  | { readonly kind: 'release'; readonly k: number }
  | { readonly kind: 'tick'; readonly dt: number }
  | { readonly kind: 'finish'; readonly i: number; readonly result: 'ok' | 'fail' | 'retry' }
  | { readonly kind: 'cancel'; readonly i: number }
  | { readonly kind: 'stop'; readonly i: number }
  | { readonly kind: 'force'; readonly k: number; readonly minute: number }
  | { readonly kind: 'pause' }
  | { readonly kind: 'resume' };

const TASKS = 3;
const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('claim' as const), k: fc.nat(TASKS - 1), backlog: fc.nat(4), delta: fc.integer({ min: -1, max: 1 }) }),
  fc.record({ kind: fc.constant('release' as const), k: fc.nat(TASKS - 1) }),
  fc.record({ kind: fc.constant('tick' as const), dt: fc.integer({ min: 1, max: 3 * MIN }) }),
  fc.record({ kind: fc.constant('finish' as const), i: fc.nat(9), result: fc.constantFrom('ok' as const, 'fail' as const, 'retry' as const) }),
  fc.record({ kind: fc.constant('cancel' as const), i: fc.nat(9) }),
  fc.record({ kind: fc.constant('stop' as const), i: fc.nat(9) }),
  fc.record({ kind: fc.constant('force' as const), k: fc.nat(TASKS - 1), minute: fc.nat(10) }),
  fc.constant({ kind: 'pause' as const }),
  fc.constant({ kind: 'resume' as const }),
);
const taskArb = fc.record({
  maxConcurrency: fc.integer({ min: 1, max: 3 }),
  catchUp: fc.constantFrom<CatchUpPolicy>('all', 'latest', 'none'),
  retry: fc.nat(2),
  offset: fc.integer({ min: -20_000, max: 20_000 }),
});

test('random claim/release/tick/finish/cancel sequences keep every scheduler invariant (property)', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(taskArb, { minLength: TASKS, maxLength: TASKS }), fc.boolean(), fc.array(opArb, { maxLength: 40 }), async (specs, async, ops) => {
      const clock = new ManualClock(10 * MIN);
      const store = new MemoryDesiredState({ clock });
      const state = new RecordingState(store, async);
      const log = new MemoryRunLog({ maxRunsPerTask: 10_000 });
      const executor = new FakeExecutor();
      executor.lingerOnCancel = true; // canceled threads keep running until a 'stop' op
      const slots = SlotTable.create({ initialSlots: 16 });
      const scheduler = new TaskScheduler({
        desiredState: state,
        executor,
        logWriter: log,
        clock,
        now: clock.now(),
        slots,
        logger: quietLogger,
        tickMs: 0,
        backoff: { baselineMs: 1_000, limitMs: 4_000, factor: 2 },
      });
      const ids = specs.map((_, k) => `t${k}`);
      const claimed = new Set<string>();
      const nth = <T>(list: readonly T[], i: number): T | undefined => (list.length === 0 ? undefined : list[i % list.length]);

      const check = (): void => {
        // Concurrency: no execution starts while its task already has maxConcurrency physically running
        // (canceled runs that have not stopped included), whatever the maxConcurrency of earlier claims was.
        assert.deepEqual(executor.violations, []);
        specs.forEach((spec, k) => {
          const id = ids[k]!;
          assert.ok((executor.maxRunning.get(id) ?? 0) <= spec.maxConcurrency + 1, `${id} ran ${executor.maxRunning.get(id)} at once`);
        });
        // No two live runs of a task for one scheduled time; the schedule never hands a time out twice.
        for (const id of ids) {
          const live = store.runningRuns(id).map((r) => r.scheduledFor);
          assert.equal(new Set(live).size, live.length, `${id} live runs share a scheduledFor: ${live}`);
          const scheduled = [...state.created.values()].filter((r) => r.taskId === id && !state.manual.has(r.runId)).map((r) => r.scheduledFor);
          assert.equal(new Set(scheduled).size, scheduled.length, `${id} scheduled a time twice: ${scheduled}`);
        }
        // A released task whose canceled runs have stopped has no runs and no busy slots.
        for (const id of ids) {
          if (claimed.has(id)) continue;
          assert.deepEqual(executor.pending(id), [], `${id} released, but an execution was not canceled`);
          const stillRunning = executor.executions.some((e) => e.queued.taskId === id && !e.physicallyStopped);
          if (!stillRunning && !(async && hasPendingCreation(scheduler, id))) {
            assert.equal(scheduler.taskStats(id), undefined, `${id} released and stopped, but still tracked`);
          }
        }
        // The scheduler's slot count matches the shared table.
        assert.equal(scheduler.stats().slotsBusy, slots.busy(0, slots.capacity));
        assert.equal(scheduler.stats().claimedTasks, claimed.size);
      };

      let stopping: Promise<void> | undefined;
      for (const op of ops) {
        const executionsBefore = executor.executions.length;
        const paused = scheduler.state === 'stopping' || scheduler.state === 'stopped';
        switch (op.kind) {
          case 'claim': {
            const id = ids[op.k]!;
            const spec = specs[op.k]!;
            const latestCompleted = clock.now() - op.backlog * MIN;
            // A claim may change the slot count (a re-claim then retires the old range until it drains).
            const task = { id, every: '1m', handler: 'h', ...spec, maxConcurrency: Math.max(1, spec.maxConcurrency + op.delta) };
            if (claimed.has(id)) {
              assert.throws(() => scheduler.claimTask(task), TaskAlreadyClaimedError);
            } else {
              scheduler.claimTask(store.putTask(task, { latestCompleted }), { latestCompleted });
              claimed.add(id);
            }
            break;
          }
          case 'release': {
            const id = ids[op.k]!;
            if (claimed.has(id)) {
              void scheduler.releaseTask(id);
              claimed.delete(id);
            } else {
              assert.throws(() => scheduler.releaseTask(id), TaskNotClaimedError);
            }
            break;
          }
          case 'tick':
            clock.advance(op.dt);
            scheduler.tick(clock.now());
            break;
          case 'finish': {
            const execution = nth(executor.pending(), op.i);
            if (op.result === 'ok') execution?.complete({ value: 1 });
            else execution?.complete({ error: new Error(op.result), retryable: op.result === 'retry' });
            break;
          }
          case 'cancel':
            nth(executor.pending(), op.i)?.cancel();
            break;
          case 'stop':
            nth(executor.lingering(), op.i)?.stop();
            break;
          case 'force': {
            const id = ids[op.k]!;
            await scheduler.forceRun(id, op.minute * MIN).catch((error: unknown) => {
              assert.ok(error instanceof Error && /ERR_(DUPLICATE_RUN|TASK_NOT_CLAIMED)/.test((error as { code?: string }).code ?? ''), String(error));
            });
            break;
          }
          case 'pause':
            // stop(): cancels every run; nothing starts until start().
            stopping = scheduler.stop();
            break;
          case 'resume':
            if (scheduler.state === 'stopped') scheduler.start();
            break;
        }
        await settled(async ? 8 : 4);
        check();
        if (paused && op.kind !== 'resume') assert.equal(executor.executions.length, executionsBefore, 'a run started while stopped');
      }

      // Drain: release everything, let every thread stop, and every run end.
      for (const id of [...claimed]) void scheduler.releaseTask(id);
      claimed.clear();
      for (let round = 0; round < 20; round++) {
        for (const e of executor.pending()) e.complete();
        for (const e of executor.lingering()) e.stop();
        clock.advance(10_000);
        await settled(async ? 8 : 4);
      }
      if (stopping !== undefined) await stopping; // resolves once every canceled thread has stopped
      check();
      assert.equal(scheduler.stats().runsActive, 0);
      assert.equal(scheduler.stats().slotsBusy, 0);
      assert.equal(slots.allocated, 0, 'every slot range went back to the table');
      // Every created run ended in exactly one final status, and finishRun was called once for it.
      for (const [runId, run] of state.created) {
        const record = log.findRun(run.taskId, runId);
        assert.ok(record !== undefined, `run ${runId} never logged`);
        const finals = record.history.filter((c) => FINAL.has(c.status));
        assert.equal(finals.length, 1, `run ${runId}: ${record.history.map((c) => c.status).join(',')}`);
        assert.equal(state.finished.get(runId), 1, `run ${runId} finished ${state.finished.get(runId) ?? 0} times`);
      }
      // And nothing was logged for a run the desired state did not create.
      for (const id of ids) for (const record of log.runs(id)) assert.ok(state.created.has(record.runId));
    }),
    { numRuns: 200 },
  );
});

/** A release with an async desired state may still wait for a creation that holds no executor-visible run. */
function hasPendingCreation(scheduler: TaskScheduler, id: string): boolean {
  const stats = scheduler.taskStats(id);
  return stats !== undefined && stats.state === 'draining' && stats.runs > 0;
}
