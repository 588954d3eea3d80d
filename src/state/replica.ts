import { InvalidArgumentError, ReplicaGapError } from '../errors.js';
import type { ChangeSet, RecordChange, Snapshot } from './types.js';
import { adoptRecord } from './sealed.js';
import { TablesVersion, type TablesDraft } from './versioned-tables.js';

/**
 * A pool thread's copy of the state store, fed by the store's change stream.
 *
 * It runs on pool threads, so it depends on nothing of the main thread (no clock, no logger, no metrics). It learns
 * table names from the records it receives, so an unknown table reads as empty instead of throwing. It takes
 * ownership of the values in the change sets it applies (they arrive through `postMessage`, so nobody else holds
 * them) and freezes them.
 */
export class Replica {
  #version: TablesVersion = TablesVersion.empty([], false);

  /** Index of the last change set applied (0 before any). */
  get appliedIndex(): number {
    return this.#version.index;
  }

  /**
   * Applies the next change set. One at or below `appliedIndex` was seen already and is ignored, so redelivery is
   * harmless. One beyond `appliedIndex + 1` means sets were missed: throws `ReplicaGapError` and changes nothing.
   */
  apply(change: ChangeSet): void {
    checkChangeSet(change, 'change');
    const applied = this.#version.index;
    if (change.index <= applied) return;
    if (change.index !== applied + 1) throw new ReplicaGapError(applied, change.index);
    const draft = this.#version.draft(change.index, false);
    for (const c of change.changes) {
      if (c.value === undefined) draft.delete(c.table, c.key);
      else putChange(draft, c);
    }
    this.#version = draft.finish().version;
  }

  /** Replaces everything with `full` (from `StateStore.full()`), whatever the applied index was. */
  reset(full: ChangeSet): void {
    checkChangeSet(full, 'full');
    const draft = TablesVersion.empty([], false, full.index).draft(full.index, false);
    for (const c of full.changes) if (c.value !== undefined) putChange(draft, c);
    this.#version = draft.finish().version;
  }

  /** The replica as of now. Immutable: a scheduler can keep reading it while later change sets are applied. */
  snapshot(): Snapshot {
    return this.#version;
  }
}

function putChange(draft: TablesDraft, c: RecordChange): void {
  draft.putRecord(adoptRecord(c));
}

/** Validates a whole change set before any of it is applied, so a malformed one cannot leave half a transaction. */
function checkChangeSet(set: ChangeSet, name: string): void {
  if (set === null || typeof set !== 'object') throw new InvalidArgumentError(name, 'a change set `{ index, changes }`', set);
  if (!Number.isSafeInteger(set.index) || set.index < 0) throw new InvalidArgumentError(`${name}.index`, 'an integer >= 0', set.index);
  if (!Array.isArray(set.changes)) throw new InvalidArgumentError(`${name}.changes`, 'an array', set.changes);
  for (const c of set.changes as readonly unknown[]) {
    const r = c as Partial<RecordChange> | null;
    if (
      r === null ||
      typeof r !== 'object' ||
      typeof r.table !== 'string' ||
      typeof r.key !== 'string' ||
      !Number.isSafeInteger(r.createIndex) ||
      !Number.isSafeInteger(r.modifyIndex)
    ) {
      throw new InvalidArgumentError(`${name}.changes[]`, 'record changes `{ table, key, value, createIndex, modifyIndex }`', c);
    }
  }
}
