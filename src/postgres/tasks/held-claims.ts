/**
 * What this process holds of the shared task store: its claims (task → epoch and the progress it plans from) and
 * the fence of each run it created (run → task and epoch), which every write about that run carries.
 *
 * A claim is `held` while this process schedules the task, `handing-over` while it gives the task to another process
 * (no new run starts; the runs in flight end, their writes still under the claim), and `lost` once it is gone: the
 * lease ended, the task was taken or deleted. A lost claim's writes are not sent: the database would refuse them, and
 * the process that claims the task next settles its runs.
 */
import type { Schedule } from '../../tasks/schedule/index.js';
import { scheduleOf, type Task } from '../../tasks/task.js';

export const ClaimState = Object.freeze({ HELD: 'held', HANDING_OVER: 'handing-over', LOST: 'lost' } as const);
export type ClaimStateValue = (typeof ClaimState)[keyof typeof ClaimState];

export class HeldClaim {
  readonly taskId: string;
  /** The member (this process's incarnation) that holds the claim. */
  readonly member: string;
  readonly epoch: number;
  task: Task;
  hash: string;
  schedule: Schedule;
  state: ClaimStateValue = ClaimState.HELD;
  /** The newest scheduled time this claim has planned past (handed out or skipped by catch-up). */
  cursor: number;
  /** `latest_scheduled` as the database last said: the expected value of the next compare-and-set. */
  latestScheduled: number;
  /** Runs queued in the database for this task (manual, or resumed after a lost process): handed out first. */
  queued: number;
  /** Scheduled times after the cursor that had a run when the task was claimed: planning skips them. */
  readonly taken: ReadonlySet<number>;

  constructor(
    taskId: string,
    member: string,
    epoch: number,
    task: Task,
    hash: string,
    latestScheduled: number,
    latestCompleted: number,
    queued: number,
    taken: ReadonlySet<number> = new Set(),
  ) {
    this.taskId = taskId;
    this.member = member;
    this.epoch = epoch;
    this.task = task;
    this.hash = hash;
    this.schedule = scheduleOf(task);
    // A new claim continues from the last completed time: the catch-up policy decides what of the rest runs, and the
    // unique run key skips every time that already has a run.
    this.cursor = latestCompleted;
    this.latestScheduled = latestScheduled;
    this.queued = queued;
    this.taken = taken;
  }

  #starts: Promise<unknown> = Promise.resolve();

  /**
   * Runs `start` after the starts of this task's runs queued before it: attempts begin in the order they were asked
   * to (a task's runs are created in order, and would otherwise race to the database on separate connections).
   */
  queueStart<T>(start: () => Promise<T>): Promise<T> {
    const next = this.#starts.then(start, start);
    this.#starts = next.then(
      () => undefined,
      () => undefined,
    );
    return next;
  }

  /** The definition changed (declared again elsewhere): new runs take it; progress stays. */
  replace(task: Task, hash: string): void {
    this.task = task;
    this.hash = hash;
    this.schedule = scheduleOf(task);
  }

  get current(): boolean {
    return this.state !== ClaimState.LOST;
  }
}

/** The fence of one run: its claim, and its writes in order (a write about a run waits for the one before). */
export class RunFence {
  readonly claim: HeldClaim;
  readonly runId: string;
  /** Attempts the run had made when it was handed out (a resumed run's lost attempts). */
  readonly attemptsBefore: number;
  /** The finish recorded the final status with it: the final log write that follows has nothing to add. */
  finalized = false;
  /** The latest attempt whose start the database recorded and the scheduler asked for (`startRun`). */
  startedAttempt = 0;
  /**
   * The run's creation recorded its first attempt as begun (`task_create_started_run`) and the scheduler has not yet
   * asked for that start: `startRun` of attempt 1 then writes nothing, and a cancel before it takes the start back.
   */
  firstStartWritten = false;
  #chain: Promise<void> = Promise.resolve();

  constructor(claim: HeldClaim, runId: string, attemptsBefore: number) {
    this.claim = claim;
    this.runId = runId;
    this.attemptsBefore = attemptsBefore;
  }

  /** Runs `write` after the writes queued before it (whatever they answered); resolves or rejects as it does. */
  queue<T>(write: () => Promise<T>): Promise<T> {
    const next = this.#chain.then(write);
    this.#chain = next.then(
      () => undefined,
      () => undefined,
    );
    return next;
  }

  /** Resolves once every write queued so far has settled. */
  settled(): Promise<void> {
    return this.#chain;
  }
}

export class HeldClaims {
  readonly #claims = new Map<string, HeldClaim>();
  readonly #runs = new Map<string, RunFence>();

  get size(): number {
    return this.#claims.size;
  }

  get(taskId: string): HeldClaim | undefined {
    return this.#claims.get(taskId);
  }

  /** The claim of `taskId` if it is held (scheduling), else `undefined`. */
  scheduling(taskId: string): HeldClaim | undefined {
    const claim = this.#claims.get(taskId);
    return claim?.state === ClaimState.HELD ? claim : undefined;
  }

  set(claim: HeldClaim): void {
    this.#claims.set(claim.taskId, claim);
  }

  /** Forgets the claim (it stays `lost` for the runs that still refer to it). */
  delete(claim: HeldClaim): void {
    claim.state = ClaimState.LOST;
    if (this.#claims.get(claim.taskId) === claim) this.#claims.delete(claim.taskId);
  }

  claims(): HeldClaim[] {
    return [...this.#claims.values()];
  }

  addRun(fence: RunFence): void {
    this.#runs.set(fence.runId, fence);
  }

  run(runId: string): RunFence | undefined {
    return this.#runs.get(runId);
  }

  deleteRun(fence: RunFence): void {
    if (this.#runs.get(fence.runId) === fence) this.#runs.delete(fence.runId);
  }

  /** Fences of the runs of one claim. */
  runsOf(claim: HeldClaim): RunFence[] {
    return [...this.#runs.values()].filter((fence) => fence.claim === claim);
  }

  /** Resolves once every queued write of every run has settled. */
  async settled(): Promise<void> {
    await Promise.all([...this.#runs.values()].map((fence) => fence.settled()));
  }
}
