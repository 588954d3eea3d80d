import type { Logger } from '../../src/observability/logger.js';
import type { Snapshot, StoredRecord } from '../../src/state/types.js';

/** A logger that records calls, so tests can assert on what was logged without parsing output. */
export function captureLogger(): { logger: Logger; entries: Array<{ level: string; obj: unknown; msg: unknown }> } {
  const entries: Array<{ level: string; obj: unknown; msg: unknown }> = [];
  const at =
    (level: string) =>
    (obj: unknown, msg?: unknown): void => {
      entries.push({ level, obj, msg });
    };
  const logger = {
    trace: at('trace'),
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    fatal: at('fatal'),
    isLevelEnabled: () => true,
    child: () => logger,
  };
  return { logger: logger as unknown as Logger, entries };
}

/** Everything a snapshot holds, as plain data sorted by table and key, for deep comparison. */
export function dump(snapshot: Snapshot, tables: readonly string[] = snapshot.tables()): Array<Omit<StoredRecord, never>> {
  const out: StoredRecord[] = [];
  for (const table of [...tables].sort()) for (const record of snapshot.list(table)) out.push({ ...record });
  return out.sort((a, b) => (a.table === b.table ? (a.key < b.key ? -1 : a.key > b.key ? 1 : 0) : a.table < b.table ? -1 : 1));
}
