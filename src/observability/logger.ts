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
