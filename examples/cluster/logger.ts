/**
 * The demo's pino logger, written to stderr through the status line (so log lines scroll above the live line).
 * Pretty when stderr is a terminal and `pino-pretty` is installed (`npm install --save-dev pino-pretty`); plain
 * JSON lines otherwise. The library itself never loads pino-pretty.
 */
import { pino } from 'pino';
import type { Logger } from '../../src/observability/logger.js';
import type { StatusLine } from './status-line.js';

/** pino-pretty's `prettyFactory`: options → (one JSON log line) → formatted text. */
type PrettyFactory = (options: Record<string, unknown>) => (line: string) => string;

async function loadPretty(): Promise<PrettyFactory | undefined> {
  const name = 'pino-pretty'; // a variable: the demo compiles and runs without it installed
  try {
    const module = (await import(name)) as { prettyFactory?: PrettyFactory; default?: { prettyFactory?: PrettyFactory } };
    const factory = module.prettyFactory ?? module.default?.prettyFactory;
    return typeof factory === 'function' ? factory : undefined;
  } catch {
    return undefined;
  }
}

export async function createLogger(level: string, line: StatusLine, tty: boolean): Promise<Logger> {
  const factory = tty ? await loadPretty() : undefined;
  const prettify = factory?.({ colorize: true, ignore: 'pid,hostname', translateTime: 'HH:MM:ss.l' });
  // Synchronous writes through the status line: formatted in place when pino-pretty is there.
  const destination = { write: (chunk: string) => line.write(prettify === undefined ? chunk : prettify(chunk)) };
  return pino({ level, name: 'cluster' }, destination);
}
