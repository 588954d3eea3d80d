/**
 * The two task stores under one task-scheduler suite: the in-memory store (`MemoryTaskStore`, the scheduler claims
 * what is added) and the PostgreSQL store (`PgTaskStore`: declared into the shared catalogue, claimed by the
 * store's claim keeper, every run write fenced in the database). Both run a `TaskScheduler` with a fake executor
 * whose runs the test ends, on a ManualClock for the schedules. The suite awaits every answer and waits for
 * what a shared store does asynchronously.
 */
import { ManualClock } from '../../../src/clock.js';
import { MemoryTaskStore } from '../../../src/tasks/memory-task-store.js';
import { sameTaskDefinition } from '../../../src/tasks/task-definition.js';
import { validateTask, validateTaskMeta, type TaskInput, type TaskMeta } from '../../../src/tasks/task.js';
import { TaskScheduler } from '../../../src/tasks/task-scheduler.js';
import type { RunRecord } from '../../../src/tasks/types.js';
import { FakeExecutor } from '../../tasks/fixtures.js';
import { skipWithoutDatabase } from '../helpers.js';
import { cluster, fakeScheduler, held, waitFor } from '../tasks/harness.js';

export interface TaskSubject {
  readonly scheduler: TaskScheduler;
  readonly executor: FakeExecutor;
  readonly clock: ManualClock;
  /** Adds a task as `engine.tasks.add` does, and resolves once this process has claimed it. */
  add(task: TaskInput, meta?: TaskMeta): Promise<void>;
  /** Deletes a task as `engine.tasks.remove` does. */
  remove(taskId: string): Promise<void>;
  /** The logged runs of a task, oldest first. */
  runs(taskId: string): Promise<RunRecord[]>;
  close(): Promise<void>;
}

export interface TaskSubjectFactory {
  readonly name: string;
  readonly skip: string | false;
  make(start: number): Promise<TaskSubject>;
}

const memory: TaskSubjectFactory = {
  name: 'memory',
  skip: false,
  async make(start) {
    const clock = new ManualClock(start);
    const store = new MemoryTaskStore({ clock });
    const { scheduler, executor } = fakeScheduler(store, clock);
    scheduler.start();
    return {
      scheduler,
      executor,
      clock,
      async add(task, meta) {
        // What EngineTasks.add does with a local store.
        const valid = validateTask(task);
        const claimed = scheduler.claimedTask(valid.id);
        if (claimed !== undefined && sameTaskDefinition(claimed, valid)) return;
        const put = store.storeTask(valid, meta);
        if (claimed === undefined) scheduler.claimTask(put.task, meta);
        else scheduler.replaceTask(put.task);
      },
      async remove(taskId) {
        const stopped = scheduler.releaseTask(taskId);
        store.deleteTask(taskId);
        await stopped;
      },
      async runs(taskId) {
        return store.runLog.runs(taskId);
      },
      async close() {
        await scheduler.stop();
      },
    };
  },
};

const postgres: TaskSubjectFactory = {
  name: 'postgres',
  skip: skipWithoutDatabase,
  async make(start) {
    const c = await cluster(start);
    const node = await c.node();
    return {
      scheduler: node.scheduler,
      executor: node.executor,
      clock: c.clock,
      async add(task, meta) {
        const valid = validateTask(task);
        await node.store.declareTask(valid, validateTaskMeta(meta));
        await waitFor(`the claim of ${valid.id}`, () => held(node) > 0 && node.scheduler.claimedTask(valid.id) !== undefined);
        // A replaced definition reaches the scheduler with the keeper's next look at the catalogue.
        await waitFor(`the definition of ${valid.id}`, () => sameTaskDefinition(node.scheduler.claimedTask(valid.id)!, valid));
      },
      async remove(taskId) {
        await node.store.removeTask(taskId);
      },
      async runs(taskId) {
        return (await node.store.runLog.runs(taskId)).reverse();
      },
      async close() {
        await c.close();
      },
    };
  },
};

export const taskSubjects: readonly TaskSubjectFactory[] = [memory, postgres];
