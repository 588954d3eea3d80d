/**
 * The plan committer in PostgreSQL. This process's plans (and `state.write`s) wait in a queue by priority, then
 * arrival; the committer takes up to a batch of them into one transaction, which:
 * 1. locks the state counter row: from here to COMMIT no other process commits state, so index order is commit
 *    order and every index is used (a rollback leaves no gap);
 * 2. locks the jobs of the deliveries it will ack, then the deliveries' rows, checks each plan's fence (its
 *    delivery must still be current: same token, lease not over, in database time), and catches the replica up to
 *    the counter, so the version checks below are against the committed rows; steps 1 and 2 are one call;
 * 3. checks each write's `readIndex` against the replica plus the plans before it in the batch, runs `evaluatePlan`,
 *    and gives every plan that changes something its own next index;
 * 4. writes the records, one log row per plan (with the plan's id) and the counter, acks the deliveries whose plans
 *    committed in full (when asked to), and notifies once, in one call.
 * The counter's lock is the cluster's one serial section; it is held for two round trips and COMMIT.
 * A COMMIT cut off by a lost connection is resolved by the plans' ids: what is in the log landed, what is not did
 * not, and nothing is committed twice.
 */
import { randomUUID } from 'node:crypto';
import type { PlanBackend, PlanDelivery, PlanOutcome } from '../backend/state-backend.js';
import { InvalidArgumentError, InvalidPlanError, InvalidStateError } from '../errors.js';
import type { Logger } from '../observability/logger.js';
import { PlanQueue, type Queued } from '../state/plan-queue.js';
import { checkPlan, checkVersions, runEvaluatePlan, type CheckedPlan } from '../state/plan-validation.js';
import type { ChangeSet, EvaluatePlan, Plan, PlanWrite, RecordChange } from '../state/types.js';
import type { TablesVersion } from '../state/versioned-tables.js';
import { decodeValue, encodeStorable, encodeValue } from './codec.js';
import { isAmbiguous, refusedInput, type Database, type Session } from './database.js';
import type { SchemaNames } from './names.js';
import type { PgBroker } from './broker/pg-broker.js';
import { refusalError } from './broker/refusals.js';
import type { PgState, WriteOp } from './pg-state.js';
import { CATCH_UP_ROWS, stateQueries, type StateQueries } from './state-queries.js';

interface PlanJob extends Queued {
  readonly kind: 'plan';
  readonly id: string;
  readonly checked: CheckedPlan;
  readonly delivery: PlanDelivery | undefined;
  /** `delivery.ack.value` encoded at submit (see `encodeStorable`). */
  readonly ackBody: Buffer | undefined;
  readonly resolve: (outcome: PlanOutcome) => void;
  readonly reject: (error: unknown) => void;
}

interface WriteJob extends Queued {
  readonly kind: 'write';
  readonly id: string;
  readonly ops: readonly WriteOp[];
  readonly resolve: (set: ChangeSet) => void;
  readonly reject: (error: unknown) => void;
}

type Job = PlanJob | WriteJob;

/** What one job of a batch came to, inside the transaction. */
interface Result {
  readonly job: Job;
  /** The change set it committed (index and changes), when it changed something. */
  readonly set: ChangeSet | undefined;
  readonly outcome: PlanOutcome | ChangeSet | undefined;
  readonly error: unknown;
  /** Its delivery is acked in this commit. */
  readonly ack: { readonly value: unknown; readonly body: Buffer; readonly attempts: number } | undefined;
}

/** Direct writes go before plans: in memory `state.write` commits at once, past the plan queue. */
const WRITE_PRIORITY = 1_000;
/** Most plans one transaction carries. */
const MAX_BATCH = 256;

export interface PgPlansOptions {
  readonly db: Database;
  readonly names: SchemaNames;
  readonly state: PgState;
  readonly broker: PgBroker;
  readonly logger: Logger;
  readonly evaluatePlan: EvaluatePlan | undefined;
  readonly nodeId: string;
}

function checkDelivery(delivery: unknown): asserts delivery is PlanDelivery | undefined {
  if (delivery === undefined) return;
  const d = delivery as Partial<PlanDelivery> | null;
  if (d === null || typeof d !== 'object' || typeof d.evaluationId !== 'string' || d.evaluationId === '' || typeof d.token !== 'string') {
    throw new InvalidArgumentError('delivery', 'a delivery { evaluationId, token, ack? } or undefined', delivery);
  }
  if (d.ack !== undefined && (d.ack === null || typeof d.ack !== 'object')) {
    throw new InvalidArgumentError('delivery.ack', 'an object { value?, attempts? } or undefined', d.ack);
  }
}

export class PgPlans implements PlanBackend {
  readonly #db: Database;
  readonly #queries: StateQueries;
  readonly #state: PgState;
  readonly #broker: PgBroker;
  readonly #logger: Logger;
  readonly #evaluate: EvaluatePlan | undefined;
  readonly #nodeId: string;
  readonly #queue = new PlanQueue<Job>();
  #seq = 0;
  #running: Promise<void> | undefined;
  #scheduled = false;
  #open = false;
  #stopped = false;

  constructor(options: PgPlansOptions) {
    this.#db = options.db;
    this.#queries = stateQueries(options.names.S);
    this.#state = options.state;
    this.#broker = options.broker;
    this.#logger = options.logger;
    this.#evaluate = options.evaluatePlan;
    this.#nodeId = options.nodeId;
  }

  get depth(): number {
    return this.#queue.size;
  }

  open(): void {
    this.#open = true;
    this.#kick();
  }

  submit(plan: Plan, delivery?: PlanDelivery): Promise<PlanOutcome> {
    if (this.#stopped) return Promise.reject(stoppedError());
    let checked: CheckedPlan;
    let ackBody: Buffer | undefined;
    try {
      checked = checkPlan(plan, this.#state.tables());
      checkDelivery(delivery);
      if (delivery?.ack !== undefined) ackBody = encodeStorable(delivery.ack.value, 'delivery.ack.value', InvalidPlanError);
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise<PlanOutcome>((resolve, reject) => {
      this.#queue.push({ kind: 'plan', id: randomUUID(), priority: checked.priority, seq: this.#seq++, checked, delivery, ackBody, resolve, reject });
      this.#kick();
    });
  }

  /** `state.write`'s commit: its ops replayed on the committed state, last writer wins. */
  write(ops: readonly WriteOp[]): Promise<ChangeSet> {
    if (this.#stopped) return Promise.reject(stoppedError());
    return new Promise<ChangeSet>((resolve, reject) => {
      this.#queue.push({ kind: 'write', id: randomUUID(), priority: WRITE_PRIORITY, seq: this.#seq++, ops, resolve, reject });
      this.#kick();
    });
  }

  #kick(): void {
    if (!this.#open || this.#running !== undefined || this.#scheduled || this.#queue.size === 0) return;
    // After the submitting code yields: the plans of one turn are ordered by priority and share a transaction.
    this.#scheduled = true;
    queueMicrotask(() => {
      this.#scheduled = false;
      if (this.#running !== undefined) return;
      this.#running = this.#drain().finally(() => {
        this.#running = undefined;
        this.#kick();
      });
    });
  }

  async #drain(): Promise<void> {
    while (!this.#stopped && this.#queue.size > 0) {
      const batch: Job[] = [];
      for (let job = this.#queue.pop(); job !== undefined; job = batch.length < MAX_BATCH ? this.#queue.pop() : undefined) {
        batch.push(job);
        if (batch.length >= MAX_BATCH) break;
      }
      await this.#commit(batch);
    }
  }

  async #commit(batch: Job[]): Promise<void> {
    let results: Result[];
    try {
      results = await this.#db.transaction((session) => this.#apply(session, batch), 'a plan commit');
    } catch (error) {
      if (isAmbiguous(error)) {
        await this.#resolveCutOff(batch, error);
        return;
      }
      if (batch.length > 1 && refusedInput(error)) {
        // A statement refused something the batch carried, not the connection: the transaction changed nothing,
        // so each half is committed on its own, down to the plan that causes it, which alone is refused.
        const half = Math.ceil(batch.length / 2);
        await this.#commit(batch.slice(0, half));
        await this.#commit(batch.slice(half));
        return;
      }
      this.#logger.warn({ err: error, plans: batch.length }, 'plan commit failed');
      for (const job of batch) job.reject(error);
      return;
    }
    // Committed: the replica takes the change sets (unless the log tail already did), then everyone hears.
    for (const r of results) if (r.set !== undefined) this.#state.applyChanges(r.set.index, r.set.changes);
    for (const p of this.#promotions) this.#broker.settledPromotion(p.promoted, p.canceled);
    for (const r of results) {
      if (r.error !== undefined) {
        r.job.reject(r.error);
        continue;
      }
      if (r.job.kind === 'plan') {
        const outcome = r.outcome as PlanOutcome;
        if (r.ack !== undefined && r.job.delivery !== undefined) {
          this.#broker.settledAck(r.job.delivery.evaluationId, r.job.delivery.token, {
            value: r.ack.value,
            index: outcome.index > 0 ? outcome.index : this.#state.index,
            attempts: r.ack.attempts,
            deliveries: this.#acked.get(r.job.id) ?? 0,
          });
        }
        r.job.resolve(outcome);
      } else {
        r.job.resolve(r.outcome as ChangeSet);
      }
    }
  }

  /** The deliveries count of each delivery acked in the last commit, by plan id (read right after the commit). */
  readonly #acked = new Map<string, number>();
  /** What the acks in the last commit promoted and superseded. */
  #promotions: { promoted: string; canceled: string[] | null }[] = [];

  /** The transaction's body: see the class comment for the steps. */
  async #apply(session: Session, batch: Job[]): Promise<Result[]> {
    this.#acked.clear();
    this.#promotions = [];
    const { committed, current } = await this.#openCommit(session, batch);

    let version: TablesVersion = this.#state.version;
    const results: Result[] = [];
    for (const job of batch) {
      if (job.kind === 'write') {
        const draft = version.draft(version.index + 1, true);
        for (const op of job.ops) {
          if (op.value === undefined) draft.delete(op.table, op.key);
          else draft.put(op.table, op.key, op.value);
        }
        const finished = draft.finish();
        if (finished.changes.length === 0) {
          results.push({ job, set: undefined, outcome: Object.freeze({ index: version.index, changes: finished.changes }), error: undefined, ack: undefined });
          continue;
        }
        version = finished.version;
        const set: ChangeSet = Object.freeze({ index: version.index, changes: finished.changes });
        results.push({ job, set, outcome: set, error: undefined, ack: undefined });
        continue;
      }
      const d = job.delivery;
      if (d !== undefined && current.tokens.get(d.evaluationId) !== d.token) {
        results.push({ job, set: undefined, outcome: undefined, error: await this.#refusal(session, d), ack: undefined });
        continue;
      }
      let applied: { readonly version: TablesVersion; readonly changes: readonly RecordChange[]; readonly rejected: readonly PlanWrite[] };
      try {
        applied = this.#applyPlan(version, job.checked);
      } catch (error) {
        results.push({ job, set: undefined, outcome: undefined, error, ack: undefined });
        continue;
      }
      let set: ChangeSet | undefined;
      if (applied.changes.length > 0) {
        version = applied.version;
        set = Object.freeze({ index: version.index, changes: applied.changes });
      }
      const rejected = Object.freeze(applied.rejected);
      const acks = d?.ack !== undefined && current.ackable.has(job.id) && rejected.length === 0;
      const outcome: PlanOutcome = Object.freeze({
        index: set === undefined ? 0 : set.index,
        rejected,
        refreshIndex: rejected.length > 0 ? version.index : 0,
        ...(acks ? { acked: true } : {}),
      });
      const ack = acks ? { value: d!.ack!.value, body: job.ackBody!, attempts: d!.ack!.attempts ?? 1 } : undefined;
      results.push({ job, set, outcome, error: undefined, ack });
    }

    const sets = results.filter((r) => r.set !== undefined);
    const acks = results.filter((r) => r.ack !== undefined && r.job.kind === 'plan');
    if (sets.length === 0 && acks.length === 0) return results;
    const rows = await session.query<{ moved: boolean | null; id: string | null; deliveries: number | null; promoted: string | null; canceled: string[] | null }>(
      this.#queries.commitBatch,
      [
        ...this.#writeParams(sets),
        committed,
        version.index,
        acks.map((r) => (r.job as PlanJob).delivery!.evaluationId),
        acks.map((r) => (r.job as PlanJob).delivery!.token),
        acks.map((r) => r.ack!.body),
        acks.map((r) => r.set?.index ?? version.index),
        acks.map((r) => r.ack!.attempts),
        this.#nodeId,
      ],
    );
    if (rows[0]?.moved !== true) throw new InvalidStateError(`Expected the state counter at ${committed} under its lock, but it moved`);
    const deliveries = new Map<string, number>();
    for (const row of rows.slice(1)) {
      if (row.id !== null) deliveries.set(row.id, row.deliveries ?? 0);
      else if (row.promoted !== null) this.#promotions.push({ promoted: row.promoted, canceled: row.canceled });
    }
    for (const r of acks) {
      const d = (r.job as PlanJob).delivery!;
      // Fenced and locked above: none of these acks can be refused; if one is, the whole commit must not happen.
      const n = deliveries.get(d.evaluationId);
      if (n === undefined) throw new InvalidStateError(`Expected the fenced delivery of ${JSON.stringify(d.evaluationId)} to ack in its commit, but it did not`);
      this.#acked.set(r.job.id, n);
    }
    return results;
  }

  /**
   * Steps 1 and 2 in one call (`open_commit`): locks the state counter, then the jobs of the deliveries this commit
   * may ack and every fenced delivery's row, and catches the replica up to the counter. Answers the counter, the
   * current token of each delivery still held (not expired), and the plans whose delivery this commit may ack: asked
   * to, and held here (so its job is known and locked).
   */
  async #openCommit(session: Session, batch: readonly Job[]): Promise<{ committed: number; current: { tokens: Map<string, string>; ackable: Set<string> } }> {
    const fenced = batch.filter((j): j is PlanJob => j.kind === 'plan' && j.delivery !== undefined);
    const jobs: { namespace: string; jobId: string }[] = [];
    const ackable = new Set<string>();
    for (const j of fenced) {
      if (j.delivery!.ack === undefined) continue;
      const job = this.#broker.jobOf(j.delivery!.evaluationId, j.delivery!.token);
      if (job === undefined) continue;
      jobs.push(job);
      ackable.add(j.id);
    }
    const ids = [...new Set(fenced.map((j) => j.delivery!.evaluationId))].sort();
    const [first, ...log] = await session.query<{ counter: string; current_ids: string[]; current_tokens: string[]; index: string; changes: Buffer }>(
      this.#queries.openCommit,
      [this.#state.index, CATCH_UP_ROWS, jobs.map((k) => k.namespace), jobs.map((k) => k.jobId), ids],
    );
    const committed = Number(first?.counter ?? 0);
    const tokens = new Map<string, string>();
    first?.current_ids.forEach((id, i) => tokens.set(id, first.current_tokens[i]!));
    this.#state.applyLogRows(log);
    // More rows than one read, or a log compacted past the replica: the catch-up reads on (or reloads).
    await this.#state.catchUpWith(session, committed);
    if (this.#state.index !== committed) {
      throw new InvalidStateError(`Expected the replica at the committed index ${committed} before a commit, but it is at ${this.#state.index}`);
    }
    return { committed, current: { tokens, ackable } };
  }

  /** Version check, the user's check, and the writes of one plan on top of `version`. */
  #applyPlan(version: TablesVersion, checked: CheckedPlan): { version: TablesVersion; changes: readonly RecordChange[]; rejected: PlanWrite[] } {
    const writes = checked.writes.map((c) => c.write);
    const { rejected, conflicts } = checkVersions(version, writes);
    let evaluated = 0;
    if (this.#evaluate !== undefined && conflicts < writes.length && !(checked.allAtOnce && conflicts > 0)) {
      evaluated = runEvaluatePlan(this.#evaluate, version, checked, writes, rejected);
    }
    if (checked.allAtOnce && conflicts + evaluated > 0) rejected.fill(true);
    const draft = version.draft(version.index + 1, true);
    for (let i = 0; i < writes.length; i++) {
      if (rejected[i]) continue;
      const w = writes[i]!;
      if (w.delete === true) draft.delete(w.table, w.key);
      else draft.put(w.table, w.key, w.value);
    }
    const finished = draft.finish();
    return {
      version: finished.changes.length > 0 ? finished.version : version,
      changes: finished.changes,
      rejected: checked.writes.filter((_, i) => rejected[i]).map((c) => c.original),
    };
  }

  /** Why a fenced plan's delivery is not current, as the broker's typed refusal. */
  async #refusal(session: Session, d: PlanDelivery): Promise<Error> {
    const [row] = await session.query<{ refusal: string | null; expired: boolean }>(this.#queries.fenceRefusal, [d.evaluationId, d.token]);
    return refusalError(row?.refusal ?? (row?.expired === true ? 'expired' : 'not_outstanding'), d.evaluationId, d.token);
  }

  /** `commit_batch`'s first ten arguments: the records (their last change in the batch) and one log row per change set. */
  #writeParams(results: readonly Result[]): unknown[] {
    const last = new Map<string, RecordChange>();
    for (const r of results) for (const c of r.set!.changes) last.set(`${c.table}\u0000${c.key}`, c);
    const puts = [...last.values()].filter((c) => c.value !== undefined);
    const deletes = [...last.values()].filter((c) => c.value === undefined);
    return [
      puts.map((c) => c.table),
      puts.map((c) => c.key),
      puts.map((c) => encodeValue(c.value)),
      puts.map((c) => c.createIndex),
      puts.map((c) => c.modifyIndex),
      deletes.map((c) => c.table),
      deletes.map((c) => c.key),
      results.map((r) => r.set!.index),
      results.map((r) => r.job.id),
      results.map((r) => encodeValue(r.set!.changes.map(plainChange))),
    ];
  }

  /**
   * The connection broke during COMMIT: look up the batch's plan ids. If they are in the log the commit landed (its
   * acks with it); the replica catches up from the log and every job gets its answer from there. If not, nothing
   * landed and each job rejects with the error.
   */
  async #resolveCutOff(batch: Job[], error: unknown): Promise<void> {
    let landed: Map<string, { index: number; changes: readonly RecordChange[] }>;
    try {
      const q = this.#queries;
      // The cut-off transaction holds the counter row until it ends on the server, which may be after this check
      // arrives on another connection: waiting for the row first reads its end, committed or rolled back, instead
      // of a log that does not show it yet. A server that never got the COMMIT holds it until it drops the session:
      // past the lock timeout the outcome stays unknown.
      const rows = await this.#db.transaction(async (session) => {
        await session.query(q.cutOffLockTimeout);
        await session.query(q.counterShared);
        return session.query<{ plan_id: string; index: string; changes: Buffer }>(q.logOfPlans, [batch.map((j) => j.id)]);
      }, 'a commit check');
      landed = new Map(rows.map((r) => [r.plan_id, { index: Number(r.index), changes: decodeValue(r.changes) as RecordChange[] }]));
    } catch (checkError) {
      this.#logger.warn({ err: checkError }, 'could not learn whether a cut-off commit landed');
      for (const job of batch) job.reject(error);
      return;
    }
    if (landed.size === 0) {
      for (const job of batch) job.reject(error);
      return;
    }
    // Landed (a commit is all or nothing, so the whole batch did): answer from the log, never commit again.
    await this.#state.catchUpWith({ query: (text, values) => this.#db.query(text, values, 'the state log') }).catch(() => undefined);
    for (const job of batch) {
      const entry = landed.get(job.id);
      if (job.kind === 'write') {
        job.resolve(Object.freeze({ index: entry?.index ?? this.#state.index, changes: Object.freeze(entry?.changes ?? []) }));
        continue;
      }
      // A write committed iff the log has its record at the plan's index.
      const written = new Set((entry?.changes ?? []).map((c) => `${c.table}\u0000${c.key}`));
      const rejected = job.checked.writes.filter((w) => !written.has(`${w.write.table}\u0000${w.write.key}`)).map((w) => w.original);
      const d = job.delivery;
      const acked = d?.ack !== undefined && rejected.length === 0 && this.#broker.jobOf(d.evaluationId, d.token) !== undefined;
      if (acked) {
        this.#broker.settledAck(d.evaluationId, d.token, { value: d.ack!.value, index: entry?.index ?? this.#state.index, attempts: d.ack!.attempts ?? 1, deliveries: undefined });
      }
      job.resolve(
        Object.freeze({
          index: entry?.index ?? 0,
          rejected: Object.freeze(rejected),
          refreshIndex: rejected.length > 0 ? this.#state.index : 0,
          ...(acked ? { acked: true } : {}),
        }),
      );
    }
  }

  /** Stops accepting plans and rejects the queued ones; the commit in progress completes. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    for (const job of this.#queue.drain()) job.reject(stoppedError());
    await this.#running;
  }
}

/** A change as it goes into the log: plain, so that any process can read it back. */
function plainChange(c: RecordChange): RecordChange {
  return { table: c.table, key: c.key, value: c.value, createIndex: c.createIndex, modifyIndex: c.modifyIndex };
}

function stoppedError(): InvalidStateError {
  return new InvalidStateError('Expected a running plan committer, but it was stopped');
}
