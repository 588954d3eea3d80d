/**
 * The load: job registrations at a steady rate (`Registrations`). Each tick writes the registrations due since the
 * last one into the state store in one transaction (as a Raft apply would batch them) and enqueues one evaluation
 * per registration, stamped by the probe.
 */
import type { Engine } from '../../src/index.js';
import { Table } from './model.js';
import type { Probe } from './probe.js';
import { registration, Registrations } from './registrations.js';

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
  #registrations: Registrations | undefined;
  #timer: NodeJS.Timeout | undefined;
  #enqueued = 0;

  constructor(options: LoadGeneratorOptions) {
    this.#o = options;
  }

  /** Evaluations accepted by the engine. */
  get enqueued(): number {
    return this.#enqueued;
  }

  start(): void {
    const { rate, jobs, random } = this.#o;
    this.#registrations = new Registrations(random, rate, jobs, performance.now());
    this.#timer = setInterval(() => this.#tick(), TICK_MS);
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #tick(): void {
    const { engine, probe } = this.#o;
    const batch = this.#registrations!.take(performance.now());
    if (batch.length === 0) return;
    const { index } = engine.state.write((txn) => {
      for (const job of batch) txn.put(Table.JOBS, job.id, job);
    });
    for (const job of batch) {
      // Throws only for an invalid evaluation, which would be a bug here: let it crash the demo.
      engine.enqueue({ ...registration(job, index), payload: { probe: probe.stampEnqueue() } });
      this.#enqueued++;
    }
  }
}
