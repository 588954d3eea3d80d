/**
 * `engine.workers`: what a caller may see and do of each scheduling worker. A view rather than the worker itself,
 * so that the worker's own machinery (its loop's `start`/`stop`, heartbeat bookkeeping, cancel of the delivery in
 * hand) stays the engine's.
 */
import type { SchedulingWorker } from './scheduling-worker.js';
import type { WorkerActivityValue, WorkerStatusValue } from './worker-status.js';

export interface EngineWorker {
  readonly id: number;
  /** `starting`, `running`, `paused`, `stopping`, `stopped`. */
  readonly status: WorkerStatusValue;
  /** What it is doing now; while a thread runs its evaluation, read from shared memory. */
  readonly activity: WorkerActivityValue;
  /** The evaluation it holds, if any. */
  readonly evaluationId: string | undefined;
  /** Evaluations it has finished processing (acked, nacked, failed or given back). */
  readonly processed: number;
  /** Takes effect at its next dequeue: the evaluation in hand is finished first. */
  pause(): void;
  resume(): void;
}

export class WorkerView implements EngineWorker {
  readonly #worker: SchedulingWorker;

  constructor(worker: SchedulingWorker) {
    this.#worker = worker;
  }

  get id(): number {
    return this.#worker.id;
  }

  get status(): WorkerStatusValue {
    return this.#worker.status;
  }

  get activity(): WorkerActivityValue {
    return this.#worker.activity;
  }

  get evaluationId(): string | undefined {
    return this.#worker.current?.evaluation.id;
  }

  get processed(): number {
    return this.#worker.processed;
  }

  pause(): void {
    this.#worker.pause();
  }

  resume(): void {
    this.#worker.resume();
  }
}
