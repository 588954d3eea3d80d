/**
 * The bytes of an item (main → thread, in the work queue's records) and of an outcome (thread → main, in the thread's
 * result ring), written with the byte codec. Imported by both sides.
 *
 * Item: `[u8 kind][u32 seq][u32 attempt][f64 minIndex][f64 syncLimitMs]` then, for an evaluation, its fields (see
 * `writeEvaluation`); for a task run, `taskId`, `runId`, `[f64 scheduledFor][f64 runAt]`, `handler` and the payload as
 * a value. The slot and the generation are the work queue entry's.
 *
 * Outcome: `[u32 slot][u32 generation][u32 seq][u8 status][f64 ms]` then, ok: `[f64 waitedMs]` and the value; error:
 * `[u8 retryable]`, the wire error as a value, `[u8 hasValue]` and the value beside it (a returned `RunResult`);
 * canceled: nothing. A plan (ok, with a value shaped `{ writes: PlanWrite[], allAtOnce?, value? }`) is written field by
 * field, `[f64 waitedMs][u32 writes]` then each write `table`, `key`, `[f64 readIndex][u8 delete]` and, for a put,
 * its value as a blob, then `allAtOnce` and `value` as values: main stores those blobs as they are (sealed), and
 * every replica too, so a plan's values are decoded only where they are read.
 */
import { UnencodableValue, type ByteReader, type ByteWriter } from './byte-codec.js';
import type { ItemOutcome, ThreadItem, WireEvaluation, WorkItem } from './messages.js';
import type { WireError } from '../errors.js';

const KIND_EVAL = 0;
const KIND_RUN = 1;
const STATUS_OK = 0;
const STATUS_ERROR = 1;
const STATUS_CANCELED = 2;
const STATUS_PLAN = 3;

export function writeItem(w: ByteWriter, seq: number, item: WorkItem): void {
  w.u8(item.kind === 'eval' ? KIND_EVAL : KIND_RUN);
  w.u32(seq);
  w.u32(item.attempt);
  if (item.kind === 'eval') {
    w.f64(item.minIndex);
    w.f64(item.syncLimitMs);
    writeEvaluation(w, item.evaluation);
    return;
  }
  w.f64(0);
  w.f64(0);
  w.string(item.run.taskId);
  w.string(item.run.runId);
  w.f64(item.run.scheduledFor);
  w.f64(item.run.runAt);
  w.string(item.handler);
  w.value(item.payload);
}

export function readItem(r: ByteReader, slot: number, generation: number): ThreadItem {
  const kind = r.u8();
  const seq = r.u32();
  const attempt = r.u32();
  const minIndex = r.f64();
  const syncLimitMs = r.f64();
  if (kind === KIND_EVAL) {
    return { kind: 'eval', seq, slot, generation, attempt, minIndex, syncLimitMs, evaluation: readEvaluation(r) };
  }
  const taskId = r.string();
  const runId = r.string();
  const scheduledFor = r.f64();
  const runAt = r.f64();
  const handler = r.string();
  const payload = r.value();
  return { kind: 'run', seq, slot, generation, attempt, run: { taskId, runId, scheduledFor, runAt }, handler, payload };
}

/** An outcome as main reads it: the item it is for, and what became of it. */
export interface OutcomeRecord {
  readonly slot: number;
  readonly generation: number;
  readonly outcome: ItemOutcome;
}

export function writeOutcome(w: ByteWriter, slot: number, generation: number, outcome: ItemOutcome): void {
  w.u32(slot);
  w.u32(generation);
  w.u32(outcome.seq);
  switch (outcome.status) {
    case 'ok': {
      const start = w.length;
      w.u8(STATUS_PLAN);
      w.f64(outcome.ms);
      w.f64(outcome.waitedMs);
      if (writePlan(w, outcome.value)) return;
      // Not a plan as main reads one: the value as it is (main says what is wrong with it).
      w.truncate(start);
      w.u8(STATUS_OK);
      w.f64(outcome.ms);
      w.f64(outcome.waitedMs);
      w.value(outcome.value);
      return;
    }
    case 'error':
      w.u8(STATUS_ERROR);
      w.f64(outcome.ms);
      w.u8(outcome.retryable ? 1 : 0);
      w.value(outcome.error);
      w.u8(outcome.value === undefined ? 0 : 1);
      if (outcome.value !== undefined) w.value(outcome.value);
      return;
    case 'canceled':
      w.u8(STATUS_CANCELED);
      w.f64(outcome.ms);
      return;
  }
}

/**
 * Reads an outcome; `seal` makes each of a plan's put values from its bytes (copied out of the ring): main keeps
 * them sealed (see `state/sealed.ts`).
 */
export function readOutcome(r: ByteReader, seal: (bytes: Uint8Array) => unknown, planWrite: PlanWriteOf): OutcomeRecord {
  const slot = r.u32();
  const generation = r.u32();
  const seq = r.u32();
  const status = r.u8();
  const ms = r.f64();
  if (status === STATUS_PLAN) {
    const waitedMs = r.f64();
    const count = r.u32();
    const writes = new Array<unknown>(count);
    for (let i = 0; i < count; i++) {
      const table = r.string();
      const key = r.string();
      const readIndex = r.f64();
      const del = r.u8() === 1;
      writes[i] = del ? Object.freeze({ table, key, delete: true, readIndex }) : planWrite(table, key, seal(r.blob()), readIndex);
    }
    const allAtOnce = r.value();
    const value = r.value();
    const plan: Record<string, unknown> = { writes };
    if (allAtOnce !== undefined) plan['allAtOnce'] = allAtOnce;
    if (value !== undefined) plan['value'] = value;
    return { slot, generation, outcome: { seq, status: 'ok', ms, waitedMs, value: plan } };
  }
  if (status === STATUS_OK) {
    const waitedMs = r.f64();
    return { slot, generation, outcome: { seq, status: 'ok', ms, waitedMs, value: r.value() } };
  }
  if (status === STATUS_ERROR) {
    const retryable = r.u8() === 1;
    const error = r.value() as WireError;
    const value = r.u8() === 1 ? r.value() : undefined;
    return { slot, generation, outcome: value === undefined ? { seq, status: 'error', ms, retryable, error } : { seq, status: 'error', ms, retryable, error, value } };
  }
  return { slot, generation, outcome: { seq, status: 'canceled', ms } };
}

/** Makes a plan write of a sealed value (main's `state/sealed.ts` `planWrite`). */
export type PlanWriteOf = (table: string, key: string, value: unknown, readIndex: number) => unknown;

/**
 * Writes `value` as a plan when it is one main can take field by field: an object with `writes`, an array of
 * objects with a string `table` and `key`, a number `readIndex`, `delete` absent or a boolean, and no value in a
 * delete. Anything else, or a value whose reading throws, is left to the generic encoding (false; the record is then
 * truncated by the caller).
 */
function writePlan(w: ByteWriter, value: unknown): boolean {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  try {
    const plan = value as { writes?: unknown; allAtOnce?: unknown; value?: unknown };
    const writes = plan.writes;
    if (!Array.isArray(writes) || Object.getPrototypeOf(writes) !== Array.prototype) return false;
    w.u32(writes.length);
    for (let i = 0; i < writes.length; i++) {
      const write: unknown = writes[i];
      if (write === null || typeof write !== 'object') return false;
      const { table, key, readIndex, delete: del, value: v } = write as { table?: unknown; key?: unknown; readIndex?: unknown; delete?: unknown; value?: unknown };
      if (typeof table !== 'string' || typeof key !== 'string' || typeof readIndex !== 'number') return false;
      if (del !== undefined && typeof del !== 'boolean') return false;
      w.string(table);
      w.string(key);
      w.f64(readIndex);
      if (del === true) {
        if (v !== undefined) return false;
        w.u8(1);
        continue;
      }
      w.u8(0);
      const at = w.startBlob();
      w.value(v);
      w.endBlob(at);
    }
    w.value(plan.allAtOnce);
    w.value(plan.value);
    return true;
  } catch (error) {
    // A value the bytes cannot carry is for the message path, as with any other value.
    if (error instanceof UnencodableValue) throw error;
    return false;
  }
}

/**
 * An evaluation's fields, the ones an evaluation may have (the broker refuses any other at enqueue), in a fixed order
 * behind a mask of those present: `[u16 mask]`, then each present string field, each present number field as f64,
 * and the payload as a value. Cheaper than the evaluation as a value (no keys, no walk) and the same evaluation on the
 * thread, its fields in this order.
 */
const STRING_FIELDS = ['id', 'namespace', 'jobId', 'type', 'triggeredBy'] as const;
const NUMBER_FIELDS = ['priority', 'modifyIndex', 'createIndex', 'waitUntil', 'wait'] as const;
const PAYLOAD_BIT = 1 << (STRING_FIELDS.length + NUMBER_FIELDS.length);

function writeEvaluation(w: ByteWriter, evaluation: WireEvaluation): void {
  const e = evaluation as unknown as Record<string, unknown>;
  let mask = 0;
  let bit = 1;
  for (const field of STRING_FIELDS) {
    if (typeof e[field] === 'string') mask |= bit;
    bit <<= 1;
  }
  for (const field of NUMBER_FIELDS) {
    if (typeof e[field] === 'number') mask |= bit;
    bit <<= 1;
  }
  const payload = e['payload'];
  if (payload !== undefined) mask |= PAYLOAD_BIT;
  w.u32(mask);
  for (const field of STRING_FIELDS) if (typeof e[field] === 'string') w.string(e[field] as string);
  for (const field of NUMBER_FIELDS) if (typeof e[field] === 'number') w.f64(e[field] as number);
  if (payload !== undefined) w.value(payload);
}

function readEvaluation(r: ByteReader): WireEvaluation {
  const mask = r.u32();
  const e: Record<string, unknown> = {};
  let bit = 1;
  for (const field of STRING_FIELDS) {
    if ((mask & bit) !== 0) e[field] = r.string();
    bit <<= 1;
  }
  for (const field of NUMBER_FIELDS) {
    if ((mask & bit) !== 0) e[field] = r.f64();
    bit <<= 1;
  }
  if ((mask & PAYLOAD_BIT) !== 0) e['payload'] = r.value();
  return e as unknown as WireEvaluation;
}
