/**
 * The in-memory task store: a `MemoryDesiredState` (tasks, their progress, runs) and a `MemoryRunLog`, synchronous
 * throughout. The default `TaskBackend` of an engine.
 */
import type { LocalTaskBackend, StoredTask } from '../backend/task-backend.js';
import type { Clock } from '../clock.js';
import { MemoryDesiredState, putTaskUndoably } from './memory-desired-state.js';
import { MemoryRunLog } from './memory-run-log.js';

export class MemoryTaskStore implements LocalTaskBackend<MemoryDesiredState, MemoryRunLog> {
  readonly desiredState: MemoryDesiredState;
  readonly runLog: MemoryRunLog;

  constructor(options: { readonly clock: Clock }) {
    this.desiredState = new MemoryDesiredState({ clock: options.clock });
    this.runLog = new MemoryRunLog();
  }

  storeTask(task: unknown, meta?: unknown): StoredTask {
    return putTaskUndoably(this.desiredState, task, meta);
  }

  deleteTask(taskId: string): void {
    this.desiredState.deleteTask(taskId);
  }
}
