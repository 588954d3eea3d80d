/**
 * Admission: the enqueues of one turn go into one transaction (`enqueue`, at most `MAX_ENQUEUE_BATCH` evaluations),
 * and each handle's `accepted` resolves after its commit. Nothing the database cannot hold joins a batch (keys,
 * payload size and serialization are checked at `enqueue`); a batch the statement refuses is halved down to the
 * evaluation that causes it. One batch is in flight at a time, and none goes before `open()`.
 */
import { assertEvaluation, DEFAULT_NAMESPACE, withEvaluationDefaults, type Evaluation, type EvaluationInput } from '../../broker/evaluation.js';
import type { EvaluationHandle } from '../../broker/outcome-waiters.js';
import { BrokerDisabledError, InvalidEvaluationError, InvalidStateError, UnknownSchedulerError } from '../../errors.js';
import { encodeError, encodeValue } from '../codec.js';
import { refusedInput } from '../database.js';
import { PgHandle } from '../pg-handle.js';
import type { BrokerParts } from './parts.js';

/** Most evaluations one admitting transaction carries. */
const MAX_ENQUEUE_BATCH = 2_000;

interface PendingEnqueue {
  readonly evaluation: Evaluation;
  /** Its structured-clone serialization, made at enqueue (where a value that cannot be stored is refused). */
  readonly body: Buffer;
  readonly handle: PgHandle;
  readonly failure: UnknownSchedulerError | undefined;
}

export interface AdmissionParts extends Pick<BrokerParts, 'db' | 'queries' | 'clock' | 'logger' | 'events' | 'nodeId' | 'outcomes' | 'switches' | 'lookAgain'> {
  readonly knownTypes: ReadonlySet<string>;
  readonly validatePayload: (payload: unknown) => void;
}

export class Admission {
  readonly #parts: AdmissionParts;
  #enqueueBatch: PendingEnqueue[] = [];
  #enqueueScheduled = false;
  #enqueueRunning: Promise<void> | undefined;

  constructor(parts: AdmissionParts) {
    this.#parts = parts;
  }

  /** The batches in flight, until the last is answered. */
  get running(): Promise<void> | undefined {
    return this.#enqueueRunning;
  }

  enqueue(input: EvaluationInput): EvaluationHandle {
    const { switches, outcomes, knownTypes } = this.#parts;
    if (!switches.enabled) throw new BrokerDisabledError('enqueue');
    if (switches.closed) throw new InvalidStateError('Expected an open PostgreSQL broker to enqueue into, but it is closed');
    const evaluation = withEvaluationDefaults(input);
    // Its keys by the rule of both backends (storable-key.ts): nothing the database cannot hold joins a batch.
    assertEvaluation(evaluation, this.#parts.validatePayload);
    const known = outcomes.get(evaluation.id);
    if (known !== undefined && !known.settled) return known;
    let body: Buffer;
    try {
      body = encodeValue(evaluation);
    } catch {
      // Shared memory cannot leave the process: a SharedArrayBuffer is refused by the serializer.
      throw new InvalidEvaluationError('evaluation.payload', 'a value that can be stored in the database (structured-cloneable, no shared memory)', evaluation.payload);
    }
    const handle = new PgHandle(evaluation, (h) => outcomes.watch(h));
    outcomes.track(handle);
    const failure = knownTypes.has(evaluation.type) ? undefined : new UnknownSchedulerError(evaluation.type, [...knownTypes]);
    this.#enqueueBatch.push({ evaluation, body, handle, failure });
    this.flushSoon();
    return handle;
  }

  /** What waits goes in a batch after this turn's enqueues, once open and when no batch is in flight. */
  flushSoon(): void {
    if (!this.#parts.switches.open || this.#enqueueScheduled || this.#enqueueRunning !== undefined || this.#enqueueBatch.length === 0) return;
    this.#enqueueScheduled = true;
    // Everything enqueued in this turn goes into one transaction.
    queueMicrotask(() => {
      this.#enqueueScheduled = false;
      this.#enqueueRunning = this.#runEnqueues().finally(() => {
        this.#enqueueRunning = undefined;
        this.flushSoon();
      });
    });
  }

  /** After the batch in flight, what still waits is refused: the broker closed first. */
  async close(): Promise<void> {
    await this.#enqueueRunning;
    for (const p of this.#enqueueBatch.splice(0)) {
      p.handle.refused(new InvalidStateError('Expected the PostgreSQL broker to admit the evaluation, but it closed first'));
    }
  }

  async #runEnqueues(): Promise<void> {
    while (this.#enqueueBatch.length > 0) {
      const batch = this.#enqueueBatch.splice(0, MAX_ENQUEUE_BATCH);
      await this.#admit(batch);
    }
  }

  async #admit(batch: PendingEnqueue[]): Promise<void> {
    const { db, queries, clock, logger, events } = this.#parts;
    const e = batch.map((p) => p.evaluation);
    let rows: { id: string; admitted: 'new' | 'held'; state: string; due_in_ms: number | null }[];
    try {
      rows = await db.query(
        queries.enqueue,
        [
          e.map((x) => x.id),
          e.map((x) => x.namespace ?? DEFAULT_NAMESPACE),
          e.map((x) => x.jobId),
          e.map((x) => x.type),
          e.map((x) => x.priority),
          e.map((x) => x.modifyIndex ?? 0),
          e.map((x) => x.createIndex ?? 0),
          e.map((x) => x.wait ?? null),
          // A time in the past is due now in either backend: the epoch stands for all of them (a timestamp cannot
          // hold the earliest times a Date can).
          e.map((x) => (x.waitUntil === undefined ? null : Math.max(0, x.waitUntil))),
          batch.map((p) => p.body),
          batch.map((p) => (p.failure === undefined ? null : JSON.stringify(encodeError(p.failure)))),
          this.#parts.nodeId,
        ],
        'an enqueue',
      );
    } catch (error) {
      if (batch.length > 1 && refusedInput(error)) {
        // The statement refused something the batch carried (it changed nothing): each half goes on its own, down
        // to the evaluation that causes it, which alone is refused.
        const half = Math.ceil(batch.length / 2);
        await this.#admit(batch.slice(0, half));
        await this.#admit(batch.slice(half));
        return;
      }
      // An ambiguous failure (the COMMIT broke) may have admitted them: enqueueing the same ids again is safe.
      logger.warn({ err: error, evaluations: batch.length }, 'enqueue failed');
      for (const p of batch) p.handle.refused(error as Error);
      return;
    }
    const now = clock.now();
    let ready = false;
    // Rows come back by id (the lock-free admissions first): each id's rows in batch order.
    const byId = new Map<string, (typeof rows)[number][]>();
    for (const row of rows) {
      const list = byId.get(row.id);
      if (list === undefined) byId.set(row.id, [row]);
      else list.push(row);
    }
    for (const p of batch) {
      const row = byId.get(p.evaluation.id)?.shift();
      p.handle.admitted();
      if (row === undefined || row.admitted !== 'new') continue;
      if (row.state === 'ready') ready = true;
      if (events.hasListeners('broker:enqueue')) {
        events.emit('broker:enqueue', {
          evaluation: p.evaluation,
          delayedUntil: row.due_in_ms === null ? undefined : now + Number(row.due_in_ms),
        });
      }
      if (p.failure !== undefined) {
        p.handle.rejected(p.failure);
        if (events.hasListeners('broker:failed')) events.emit('broker:failed', { evaluation: p.evaluation, reason: p.failure });
      }
    }
    if (ready) this.#parts.lookAgain();
  }
}
