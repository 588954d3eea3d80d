/**
 * The load: job registrations at a steady rate. Each tick writes the registrations due since the last one into
 * the state store in one transaction (as a Raft apply would batch them) and enqueues one evaluation per
 * registration, with the commit's index as `modifyIndex` so the scheduler's thread waits until its replica has
 * the job. Registrations cycle through `jobs` job ids: the first one creates a job, later ones are new versions.
 */
import type { Engine } from '../../src/index.js';
import { generateJob, nextVersion } from './cluster-state.js';
import { Table, type JobRecord } from './model.js';
import type { Probe } from './probe.js';

export interface LoadGeneratorOptions {
  readonly engine: Engine;
  readonly probe: Probe;
  /** Evaluations per second. */
  readonly rate: number;
  readonly jobs: number;
  readonly random: () => number;
}

const TICK_MS = 10;

export class LoadGenerator {
  readonly #o: LoadGeneratorOptions;
  readonly #jobs = new Map<string, JobRecord>();
  #timer: NodeJS.Timeout | undefined;
  #startedAt = 0;
  #next = 0;
  #enqueued = 0;

  constructor(options: LoadGeneratorOptions) {
    this.#o = options;
  }

  /** Evaluations accepted by the engine. */
  get enqueued(): number {
    return this.#enqueued;
  }

  start(): void {
    this.#startedAt = performance.now();
    this.#timer = setInterval(() => this.#tick(), TICK_MS);
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #tick(): void {
    const { engine, probe, rate, jobs, random } = this.#o;
    const due = Math.floor((rate * (performance.now() - this.#startedAt)) / 1000) - this.#next;
    // A stalled event loop catches up, but in steps of at most 100 ms of load.
    const count = Math.min(due, Math.max(1, Math.ceil(rate / 10)));
    if (count <= 0) return;
    const batch: JobRecord[] = [];
    for (let i = 0; i < count; i++) {
      const id = `job-${String((this.#next++ % jobs) + 1).padStart(5, '0')}`;
      const previous = this.#jobs.get(id);
      const job = previous === undefined ? generateJob(random, id) : nextVersion(random, previous);
      this.#jobs.set(id, job);
      batch.push(job);
    }
    const { index } = engine.state.write((txn) => {
      for (const job of batch) txn.put(Table.JOBS, job.id, job);
    });
    for (const job of batch) {
      // Throws only for an invalid evaluation, which would be a bug here: let it crash the demo.
      engine.enqueue({
        id: `eval-${job.id}-v${job.version}`,
        jobId: job.id,
        type: job.type,
        priority: job.priority,
        modifyIndex: index,
        createIndex: index,
        triggeredBy: job.version === 1 ? 'job-register' : 'job-update',
        payload: { probe: probe.stampEnqueue() },
      });
      this.#enqueued++;
    }
  }
}
