/**
 * The main-thread end of the pool threads' log channels: each record a thread posts is written through a child of
 * the user's logger with `thread` bound (see `thread-log-protocol.ts`), so lines from pool threads go where the
 * user's own lines go, filtered, redacted and serialized the same way.
 */
import { MessageChannel, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { boundKeys, childLogger, type Logger } from './logger.js';
import { threadLevelFor, type ThreadLogInit, type ThreadLogLevel, type ThreadLogRecord } from './thread-log-protocol.js';

export interface ThreadLog {
  /** What the thread gets in its `ThreadInit` (its port must be in the transfer list). */
  readonly init: ThreadLogInit;
  /** Writes what the thread had sent, then closes the channel (the thread ended). */
  close(): void;
}

interface Open {
  readonly port: MessagePort;
  readonly target: Logger;
}

export class ThreadLogSink {
  readonly #logger: Logger;
  readonly #open = new Set<Open>();
  readonly #onLevelChange = (_label: string, _value: number, _prevLabel: string, _prevValue: number, origin?: unknown): void => {
    // pino also emits on a parent for its children's changes (the origin tells): only this logger's level counts.
    if (origin !== undefined && origin !== this.#logger) return;
    const message: ThreadLogLevel = { level: threadLevelFor(this.#logger.levelVal) };
    for (const open of this.#open) {
      open.target.level = this.#logger.level;
      open.port.postMessage(message);
    }
  };

  constructor(logger: Logger) {
    this.#logger = logger;
    if (typeof logger.on === 'function') logger.on('level-change', this.#onLevelChange);
  }

  open(threadIndex: number): ThreadLog {
    const { port1, port2 } = new MessageChannel();
    const target = childLogger(this.#logger, { thread: threadIndex });
    const taken = boundKeys(target);
    const open: Open = { port: port1, target };
    this.#open.add(open);
    port1.on('message', (record: ThreadLogRecord) => write(target, taken, record));
    // Log records never keep the process alive; the pool's work ports decide that.
    port1.unref();
    return {
      init: { port: port2, level: threadLevelFor(this.#logger.levelVal) },
      close: () => {
        if (!this.#open.delete(open)) return;
        for (let m = receiveMessageOnPort(port1); m !== undefined; m = receiveMessageOnPort(port1)) write(target, taken, m.message as ThreadLogRecord);
        port1.close();
      },
    };
  }

  /** The pool stopped: stop following the logger's level. */
  close(): void {
    if (typeof this.#logger.off === 'function') this.#logger.off('level-change', this.#onLevelChange);
  }
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
