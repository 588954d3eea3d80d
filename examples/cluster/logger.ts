/**
 * The demo's pino logger, written to stderr through the status line (so log lines scroll above the live line).
 * Pretty when stderr is a terminal and `pino-pretty` is installed (`npm install --save-dev pino-pretty`); plain
 * JSON lines otherwise. The library itself never loads pino-pretty.
 */
import { pino } from 'pino';
import type { Logger } from '../../src/index.js';
import type { StatusLine } from './status-line.js';

type PrettyFactory = (options: Record<string, unknown>) => NodeJS.WritableStream;

async function loadPretty(): Promise<PrettyFactory | undefined> {
  const name = 'pino-pretty'; // a variable: the demo compiles and runs without it installed
  try {
    const module = (await import(name)) as { default?: PrettyFactory };
    return typeof module.default === 'function' ? module.default : undefined;
  } catch {
    return undefined;
  }
}

export async function createLogger(level: string, line: StatusLine, tty: boolean): Promise<Logger> {
  const destination = { write: (chunk: string) => line.write(chunk) };
  const pretty = tty ? await loadPretty() : undefined;
  if (pretty !== undefined) {
    return pino({ level, name: 'cluster' }, pretty({ destination, sync: true, colorize: true, ignore: 'pid,hostname' }));
  }
  return pino({ level, name: 'cluster' }, destination);
}
