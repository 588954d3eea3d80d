/**
 * The main-thread end of the pool threads' log channels: each record a thread posts is written through a child of
 * the user's logger with `thread` bound (see `protocol/thread-log.ts`), so lines from pool threads go where the
 * user's own lines go, filtered, redacted and serialized the same way.
 */
import { MessageChannel, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { boundKeys, childLogger, type Logger } from './logger.js';
import { LEVEL_WORD, threadLevelFor, type ThreadLogInit, type ThreadLogRecord } from '../protocol/thread-log.js';

export interface ThreadLog {
  /** What the thread gets in its `ThreadInit` (its port must be in the transfer list). */
  readonly init: ThreadLogInit;
  /** Writes what the thread had sent, then closes the channel (the thread ended). */
  close(): void;
}

export class ThreadLogSink {
  readonly #logger: Logger;
  readonly #open = new Set<MessagePort>();
  /** The threads' threshold (see protocol/thread-log.ts), shared by every thread of the pool. */
  readonly #level = new Int32Array(new SharedArrayBuffer(4));
  /**
   * pino emits `level-change` to every logger of a family (children share their root's listeners), so any change
   * is a reason to look: the threshold follows the user's logger's own effective level. (The `thread` children
   * below own no level and follow it by themselves.)
   */
  readonly #onLevelChange = (): void => {
    Atomics.store(this.#level, LEVEL_WORD, threadLevelFor(this.#logger.levelVal));
  };

  constructor(logger: Logger) {
    this.#logger = logger;
    this.#onLevelChange();
    watchLevel(logger, this.#onLevelChange);
  }

  open(threadIndex: number): ThreadLog {
    const { port1, port2 } = new MessageChannel();
    const target = childLogger(this.#logger, { thread: threadIndex });
    const taken = boundKeys(target);
    this.#open.add(port1);
    port1.on('message', (record: ThreadLogRecord) => write(target, taken, record));
    // Log records never keep the process alive; the pool's work ports decide that.
    port1.unref();
    return {
      init: { port: port2, level: this.#level },
      close: () => {
        if (!this.#open.delete(port1)) return;
        for (let m = receiveMessageOnPort(port1); m !== undefined; m = receiveMessageOnPort(port1)) write(target, taken, m.message as ThreadLogRecord);
        port1.close();
      },
    };
  }

  /** The pool stopped: stop following the logger's level. */
  close(): void {
    unwatchLevel(this.#logger, this.#onLevelChange);
  }
}

/**
 * One `level-change` listener per logger however many pools share it (tests and services make many engines on one
 * logger; a listener each would trip Node's leak warning at eleven).
 */
const watchers = new WeakMap<Logger, { readonly calls: Set<() => void>; readonly listener: () => void }>();

function watchLevel(logger: Logger, call: () => void): void {
  if (typeof logger.on !== 'function') return;
  let watcher = watchers.get(logger);
  if (watcher === undefined) {
    const calls = new Set<() => void>();
    watcher = { calls, listener: () => calls.forEach((c) => c()) };
    watchers.set(logger, watcher);
    logger.on('level-change', watcher.listener);
  }
  watcher.calls.add(call);
}

function unwatchLevel(logger: Logger, call: () => void): void {
  const watcher = watchers.get(logger);
  if (watcher === undefined || !watcher.calls.delete(call) || watcher.calls.size > 0) return;
  watchers.delete(logger);
  if (typeof logger.off === 'function') logger.off('level-change', watcher.listener);
}

type LogCall = (...args: unknown[]) => void;

function write(target: Logger, taken: ReadonlySet<string>, [level, bindings, args]: ThreadLogRecord): void {
  const label = labelFor(target, level);
  if (label === undefined) return;
  const logger = Object.keys(bindings).length === 0 ? target : childLogger(target, bindings, taken);
  (logger[label as keyof Logger] as unknown as LogCall).apply(logger, args as unknown[]);
}

/** The user's level label for a standard level number: its own, or the highest of its levels below it. */
function labelFor(logger: Logger, level: number): string | undefined {
  const { labels, values } = logger.levels;
  const own = labels[level];
  if (own !== undefined && typeof (logger as unknown as Record<string, unknown>)[own] === 'function') return own;
  let best: string | undefined;
  for (const [label, value] of Object.entries(values)) {
    if (value <= level && (best === undefined || value > values[best]!)) best = label;
  }
  return best;
}
