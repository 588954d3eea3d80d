/** What the tests of one `describe` block open on the database: closed and dropped once the block is done. */
import { after } from 'node:test';
import type { Pool } from 'pg';
import { adminPool, dropSchema, schemaName, skipWithoutDatabase } from './helpers.js';
import { openRecordedBackend, type RecordedBackend } from './recorded-backend.js';

export interface SuiteResources {
  /** A superuser pool; undefined when the tests are skipped (no database). */
  readonly admin: Pool | undefined;
  /** A fresh schema name, dropped after the block. */
  schema(prefix: string): string;
  /** `openRecordedBackend`, closed (and its pool ended) after the block. */
  open(schema: string, nackTimeoutMs?: number, pollMs?: number): Promise<RecordedBackend>;
}

/** Call inside the `describe`: registers the block's `after` hook. */
export function suiteResources(): SuiteResources {
  const admin = skipWithoutDatabase === false ? adminPool() : undefined;
  const schemas: string[] = [];
  const opened: RecordedBackend[] = [];
  after(async () => {
    for (const r of opened) {
      await r.backend.close();
      await r.pool.end();
    }
    for (const s of schemas) await dropSchema(admin!, s);
    await admin?.end();
  });
  return {
    admin,
    schema(prefix) {
      const name = schemaName(prefix);
      schemas.push(name);
      return name;
    },
    async open(schema, nackTimeoutMs, pollMs) {
      const r = await openRecordedBackend(schema, nackTimeoutMs, pollMs);
      opened.push(r);
      return r;
    },
  };
}
