/**
 * What the claimed tasks have in flight: a `TaskActivity` per busy task (runs, error backoff, retired slot ranges,
 * release waiters), and the counts of runs and of claimed runner slots across them. Idle claimed tasks have no
 * object at all, so a scheduler with a million idle tasks holds nothing here.
 *
 * Invariants: `runsActive` is the number of runs in the activities; `slotsBusy` counts slot generations claimed and
 * not yet finished; a drained claim (released, no runs left) has its slots released and its index freed.
 */
import type { SlotTable } from '../slots/slot-table.js';
import { TaskActivity, type ActiveRun } from './active-run.js';
import { ClaimState, type ClaimedTasks } from './claimed-tasks.js';

export class TaskActivities {
  readonly #byIndex = new Map<number, TaskActivity>();
  readonly #claims: ClaimedTasks;
  readonly #slots: SlotTable;
  #runsActive = 0;
  #slotsBusy = 0;

  constructor(claims: ClaimedTasks, slots: SlotTable) {
    this.#claims = claims;
    this.#slots = slots;
  }

  get runsActive(): number {
    return this.#runsActive;
  }

  get slotsBusy(): number {
    return this.#slotsBusy;
  }

  get(index: number): TaskActivity | undefined {
    return this.#byIndex.get(index);
  }

  /** The task's activity, made when it has none. */
  of(index: number): TaskActivity {
    let activity = this.#byIndex.get(index);
    if (activity === undefined) {
      activity = new TaskActivity();
      this.#byIndex.set(index, activity);
    }
    return activity;
  }

  /** A snapshot of every busy task's activity. */
  all(): TaskActivity[] {
    return [...this.#byIndex.values()];
  }

  /** A runner slot's generation was claimed (for a run, or back for a run's next attempt). */
  slotClaimed(): void {
    this.#slotsBusy++;
  }

  /** The run joins its task's activity (its slot is claimed already). */
  addRun(run: ActiveRun): TaskActivity {
    const activity = this.of(run.index);
    activity.runs.push(run);
    this.#runsActive++;
    return activity;
  }

  /** Frees the run's slot generation (the execution has stopped, or never began). */
  freeSlot(run: ActiveRun): void {
    if (!run.holdsSlot) return;
    run.holdsSlot = false;
    this.#slots.finish(run.slot, run.generation);
    this.#slotsBusy--;
  }

  /** The run is over: its slot is freed and it leaves its task's activity. */
  removeRun(run: ActiveRun): void {
    this.freeSlot(run);
    const activity = this.#byIndex.get(run.index);
    const at = activity === undefined ? -1 : activity.runs.indexOf(run);
    if (at < 0) return;
    activity!.runs.splice(at, 1);
    this.#runsActive--;
  }

  /** Releases what a task no longer needs: retired slot ranges, a drained claim, resolved waiters, idle activity. */
  tidy(index: number): void {
    const activity = this.#byIndex.get(index);
    if (this.#claims.state(index) === ClaimState.DRAINING && (activity === undefined || activity.runs.length === 0)) {
      const task = this.#claims.task(index);
      this.#slots.release(this.#claims.slotBase(index), task.maxConcurrency);
      for (const range of activity?.retired ?? []) this.#slots.release(range.base, range.count);
      this.#claims.free(index);
      this.#byIndex.delete(index);
      for (const waiter of activity?.waiters ?? []) waiter.resolve();
      return;
    }
    if (activity === undefined) return;
    if (activity.waiters !== undefined) {
      const pending = activity.waiters.filter((waiter) => activity.runs.some((run) => run.epoch < waiter.epoch));
      for (const waiter of activity.waiters) if (!pending.includes(waiter)) waiter.resolve();
      activity.waiters = pending.length > 0 ? pending : undefined;
    }
    if (activity.retired !== undefined) {
      const busy = activity.retired.filter((range) => this.#slots.busy(range.base, range.count) > 0);
      for (const range of activity.retired) if (!busy.includes(range)) this.#slots.release(range.base, range.count);
      activity.retired = busy.length > 0 ? busy : undefined;
    }
    if (activity.isIdle()) this.#byIndex.delete(index);
  }
}
