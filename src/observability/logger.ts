import { pino, type Logger } from 'pino';

export type { Logger } from 'pino';

/**
 * The logger used when none is injected: pino at `warn`, so per-evaluation `debug` events cost one level check.
 * Pretty output is the application's choice (pino-pretty as a transport); the library never forces it.
 */
export function createDefaultLogger(name = 'tickpool'): Logger {
  return pino({ name, level: 'warn' });
}

/** Validates an injected logger enough to fail early and clearly instead of deep in a hot path. */
export function isLogger(value: unknown): value is Logger {
  if (value === null || typeof value !== 'object') return false;
  const l = value as Record<string, unknown>;
  return ['debug', 'info', 'warn', 'error', 'child', 'isLevelEnabled'].every((k) => typeof l[k] === 'function');
}

/**
 * `parent.child(bindings)` without a key twice on one line. pino writes a child's bindings after its parent's
 * without merging them, so a key both bind appears twice in one JSON object (`"component":"app",
 * "component":"eval-broker"`), and log pipelines keep one or the other. tickpool binds few keys (`component` on its
 * components' loggers, `thread` on lines from a pool thread); one that the application's logger already binds is
 * bound as `tickpool` + the key capitalized instead (`tickpoolComponent`), so both values survive.
 */
export function childLogger(parent: Logger, bindings: Readonly<Record<string, unknown>>, taken: ReadonlySet<string> = boundKeys(parent)): Logger {
  let own: Record<string, unknown> | undefined;
  for (const [key, value] of Object.entries(bindings)) {
    const name = taken.has(key) ? `tickpool${key.charAt(0).toUpperCase()}${key.slice(1)}` : key;
    (own ??= {})[name] = value;
  }
  return own === undefined ? parent : parent.child(own);
}

/** Keys `logger` writes on every line of its own: its bindings and its `base` (pid and hostname included). */
export function boundKeys(logger: Logger): ReadonlySet<string> {
  const keys = new Set(['pid', 'hostname', 'name']);
  try {
    for (const key of Object.keys(logger.bindings())) keys.add(key);
  } catch {
    // A pino-compatible logger without bindings(): nothing more is known.
  }
  return keys;
}
