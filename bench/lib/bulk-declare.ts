/**
 * Puts many tasks into a migrated schema at once through the schema's own `task_declare`, a thousand to a
 * statement: the rows are the ones `engine.tasks.add` writes. For setting a bench up only: `engine.tasks.add`
 * commits each declaration on its own and every one updates the catalogue's single row, so declarations serialize
 * on commits (a few hundred a second from one process on a 2-core machine) and 100,000 would take minutes before
 * anything is measured.
 */
import type { Pool } from 'pg';
import { encodeDefinition } from '../../src/postgres/tasks/definition.js';
import { validateTask } from '../../src/tasks/task.js';
import { latestCompletedOf, taskOf, type TaskShape } from './task-bench-protocol.js';

const BATCH = 1000;

/** Declares every task of `shape` as of `now` into the schema `S` (quoted); resolves once all are committed. */
export async function bulkDeclare(db: Pool, S: string, shape: TaskShape, now: number): Promise<void> {
  for (let start = 0; start < shape.count; start += BATCH) {
    const ids: string[] = [];
    const definitions: Buffer[] = [];
    const hashes: string[] = [];
    const retries: number[] = [];
    const completed: number[] = [];
    for (let i = start; i < Math.min(shape.count, start + BATCH); i++) {
      const task = validateTask(taskOf(shape, i));
      const definition = encodeDefinition(task);
      ids.push(task.id);
      definitions.push(definition.bytes);
      hashes.push(definition.hash);
      retries.push(task.retry ?? 0);
      completed.push(latestCompletedOf(shape, i, now));
    }
    await db.query(
      `SELECT ${S}.task_declare(d.id, d.definition, d.hash, d.retry, d.completed, d.completed)
         FROM unnest($1::text[], $2::bytea[], $3::text[], $4::int[], $5::float8[]) AS d(id, definition, hash, retry, completed)`,
      [ids, definitions, hashes, retries, completed],
    );
  }
}
