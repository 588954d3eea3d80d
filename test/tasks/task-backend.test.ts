/**
 * `engine.tasks` keeps its tasks through the `TaskBackend` seam only: `add` stores through `storeTask` (and takes a
 * failed claim back with its `undo`), `remove` deletes through `deleteTask`, and waits for a store that deletes
 * asynchronously.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StoredTask } from '../../src/backend/task-backend.js';
import { MemoryTaskStore } from '../../src/tasks/memory-task-store.js';
import { engineTasks } from './engine-tasks-harness.js';

/** The in-memory store, recording the seam's calls; `deleteTask` answers with a promise the test settles. */
class RecordingStore extends MemoryTaskStore {
  readonly calls: string[] = [];
  release: (() => void) | undefined;

  override storeTask(task: unknown, meta?: unknown): StoredTask {
    const stored = super.storeTask(task, meta);
    this.calls.push(`store ${stored.task.id}`);
    return {
      task: stored.task,
      undo: () => {
        this.calls.push(`undo ${stored.task.id}`);
        stored.undo();
      },
    };
  }

  override deleteTask(taskId: string): Promise<void> {
    this.calls.push(`delete ${taskId}`);
    return new Promise<void>((resolve) => {
      this.release = () => {
        super.deleteTask(taskId);
        resolve();
      };
    });
  }
}

test('add stores through the seam and a failed claim takes the put back through its undo', () => {
  let store!: RecordingStore;
  const e = engineTasks({ maxSlots: 4, store: (clock) => (store = new RecordingStore({ clock })) });
  e.tasks.add({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' });
  assert.throws(() => e.tasks.add({ id: 'b', every: '1m', maxConcurrency: 9, handler: 'h' }));
  assert.deepEqual(store.calls, ['store a', 'store b', 'undo b']);
  assert.equal(store.desiredState.getTask('b'), undefined);
});

test('remove resolves once the store has deleted the task, when it deletes asynchronously', async () => {
  let store!: RecordingStore;
  const e = engineTasks({ store: (clock) => (store = new RecordingStore({ clock })) });
  e.tasks.add({ id: 'a', every: '1m', maxConcurrency: 1, handler: 'h' });
  let removed = false;
  const removing = e.tasks.remove('a').then(() => (removed = true));
  assert.deepEqual(store.calls, ['store a', 'delete a']);
  for (let i = 0; i < 5; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  assert.equal(removed, false, 'the store has not deleted it yet');
  assert.equal(e.tasks.taskStats('a'), undefined, 'released at once all the same');
  store.release!();
  await removing;
  assert.equal(store.desiredState.getTask('a'), undefined);
});
