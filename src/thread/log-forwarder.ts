/**
 * `ctx.logger` on a pool thread: a pino logger that writes nothing itself. Its `logMethod` hook posts each call's
 * arguments to main (see `protocol/thread-log.ts`), where the user's logger writes them. A level that
 * is off costs what it costs in pino, a call to a no-op: no hook runs, no message is sent.
 */
import { pino, type Logger } from 'pino';
import { LEVEL_WORD, THREAD_LEVELS, type ThreadLogInit, type ThreadLogRecord } from '../protocol/thread-log.js';

/** Nothing is ever written here: the hook below does not call pino's own method. */
const nowhere = { write(): void {} };

export function createThreadLogger(init: ThreadLogInit): Logger {
  const { port } = init;
  const wanted = (): string => THREAD_LEVELS[Atomics.load(init.level, LEVEL_WORD)] ?? 'silent';
  // Per child logger, its bindings (pino keeps them as a JSON fragment; parsing it once per child is enough).
  const bindingsOf = new WeakMap<object, Readonly<Record<string, unknown>>>();
  const logger = pino(
    {
      level: wanted(),
      base: null,
      timestamp: false,
      hooks: {
        logMethod(args, _method, level) {
          let bindings = bindingsOf.get(this);
          if (bindings === undefined) bindingsOf.set(this, (bindings = this.bindings()));
          forward(port, [level, bindings, args]);
        },
      },
    },
    nowhere,
  );
  // Children own no level of their own (pino's level methods live on the root and are inherited), so setting the
  // root's level when a child is made applies to that child and every other.
  logger.onChild = () => {
    const level = wanted();
    if (logger.level !== level) logger.level = level;
  };
  // The thread's work port decides when the thread may end, not this one.
  port.unref();
  return logger;
}

function forward(port: ThreadLogInit['port'], record: ThreadLogRecord): void {
  try {
    port.postMessage(record);
  } catch {
    // Something in the call cannot be cloned (a function, a class instance holding one): send what JSON keeps.
    port.postMessage([record[0], record[1], record[2].map(jsonSafe)] satisfies ThreadLogRecord);
  }
}

function jsonSafe(value: unknown): unknown {
  if (value instanceof Error) return { type: value.name, message: value.message, stack: value.stack };
  try {
    const json = JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? v.toString() : v));
    return json === undefined ? String(value) : (JSON.parse(json) as unknown);
  } catch {
    return Object.prototype.toString.call(value);
  }
}
