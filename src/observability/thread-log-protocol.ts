/**
 * Log records from pool threads to the main thread (imported by both sides: types and tiny helpers only).
 *
 * Each pool thread gets its own `MessagePort` for log records, apart from its work port so that logging never
 * delays or reorders results. A record crosses as `[levelValue, bindings, args]`: the level's number, the
 * bindings of the thread-side logger that wrote it (the child loggers of `ctx.logger`: `evalId`, …) and the
 * arguments of the log call as given, which main passes to the user's logger. So that logger's destination, level,
 * `base`, redaction, serializers, hooks and message formatting apply as to its own lines. Main → thread, the port
 * carries the new level when the user's logger changes level.
 */
import type { MessagePort } from 'node:worker_threads';

export interface ThreadLogInit {
  /** The thread's end of its log channel. */
  readonly port: MessagePort;
  /** Threshold of the thread-side logger: a standard pino level label, or `silent`. */
  readonly level: string;
}

export type ThreadLogRecord = readonly [level: number, bindings: Readonly<Record<string, unknown>>, args: readonly unknown[]];

/** Main → thread: the user's logger changed level. */
export interface ThreadLogLevel {
  readonly level: string;
}

const STANDARD_LEVELS: ReadonlyArray<readonly [string, number]> = [
  ['trace', 10],
  ['debug', 20],
  ['info', 30],
  ['warn', 40],
  ['error', 50],
  ['fatal', 60],
];

/**
 * The standard level a thread logs at for a main logger at `levelValue`: the lowest standard level main writes
 * (a custom main level between two standard ones lets through what main would let through, and main filters again).
 */
export function threadLevelFor(levelValue: number): string {
  for (const [label, value] of STANDARD_LEVELS) if (value >= levelValue) return label;
  return 'silent';
}
