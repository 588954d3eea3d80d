/**
 * Log records from pool threads to the main thread (imported by both sides: types and tiny helpers only).
 *
 * Each pool thread gets its own `MessagePort` for log records, apart from its work port so that logging never
 * delays or reorders results. A record crosses as `[levelValue, bindings, args]`: the level's number, the
 * bindings of the thread-side logger that wrote it (the child loggers of `ctx.logger`: `evalId`, …) and the
 * arguments of the log call as given, which main passes to the user's logger. So that logger's destination, level,
 * `base`, redaction, serializers, hooks and message formatting apply as to its own lines.
 *
 * The threshold a thread logs at is one shared word (`LEVEL_WORD`), written by main when the user's logger changes
 * level and read by the thread each time a child logger is made (every item's `ctx.logger`): a write that precedes
 * an item's dispatch is seen by that item, with no message to race the work.
 */
import type { MessagePort } from 'node:worker_threads';

export interface ThreadLogInit {
  /** The thread's end of its log channel. */
  readonly port: MessagePort;
  /** `[LEVEL_WORD]`: the index in `THREAD_LEVELS` of the level threads log at (shared by all threads). */
  readonly level: Int32Array;
}

export const LEVEL_WORD = 0;

/** The levels a thread logs at, by index: pino's standard levels, then `silent`. */
export const THREAD_LEVELS: readonly string[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

export type ThreadLogRecord = readonly [level: number, bindings: Readonly<Record<string, unknown>>, args: readonly unknown[]];

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
export function threadLevelFor(levelValue: number): number {
  for (const [label, value] of STANDARD_LEVELS) if (value >= levelValue) return THREAD_LEVELS.indexOf(label);
  return THREAD_LEVELS.indexOf('silent');
}
