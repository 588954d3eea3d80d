/**
 * The job registrations of the demo's load, at a steady rate: `take(now)` answers the ones due since the last take,
 * cycling through `jobs` job ids (the first registration of an id creates the job, later ones are new versions).
 * `registration(job, index)` is the evaluation of one, enqueued with the index of the commit that wrote the job, so
 * the scheduler's thread waits until its replica has it. The in-memory load generator and the PostgreSQL front
 * both write and enqueue what this answers.
 */
import type { EvaluationInput } from '../../src/index.js';
import { generateJob, nextVersion } from './cluster-state.js';
import type { JobRecord } from './model.js';

export class Registrations {
  readonly #random: () => number;
  readonly #rate: number;
  readonly #jobs: number;
  readonly #versions = new Map<string, JobRecord>();
  readonly #startedAt: number;
  #next = 0;

  /** `rate` registrations a second from `startedAt` (a `performance.now()` time) on. */
  constructor(random: () => number, rate: number, jobs: number, startedAt: number) {
    this.#random = random;
    this.#rate = rate;
    this.#jobs = jobs;
    this.#startedAt = startedAt;
  }

  /** The registrations due at `now` and not taken yet; a stalled event loop catches up in steps of at most 100 ms of load. */
  take(now: number): JobRecord[] {
    const due = Math.floor((this.#rate * (now - this.#startedAt)) / 1000) - this.#next;
    const count = Math.min(due, Math.max(1, Math.ceil(this.#rate / 10)));
    const batch: JobRecord[] = [];
    for (let i = 0; i < count; i++) {
      const id = `job-${String((this.#next++ % this.#jobs) + 1).padStart(5, '0')}`;
      const previous = this.#versions.get(id);
      const job = previous === undefined ? generateJob(this.#random, id) : nextVersion(this.#random, previous);
      this.#versions.set(id, job);
      batch.push(job);
    }
    return batch;
  }
}

/** The evaluation of one registration, written at `index`. */
export function registration(job: JobRecord, index: number): EvaluationInput {
  return {
    id: `eval-${job.id}-v${job.version}`,
    jobId: job.id,
    type: job.type,
    priority: job.priority,
    modifyIndex: index,
    createIndex: index,
    triggeredBy: job.version === 1 ? 'job-register' : 'job-update',
  };
}
