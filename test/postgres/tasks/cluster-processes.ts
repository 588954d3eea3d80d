/**
 * Real engine processes for the multi-process task tests (`fixtures/task-process.ts`), their record files, and a
 * TCP proxy in front of the database that can cut one process's connections.
 */
import { readFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { ForkedChild, type Exit } from '../child-process.js';

const entry = fileURLToPath(new URL('./fixtures/task-process.js', import.meta.url));

export interface TaskProcessOptions {
  readonly name: string;
  readonly url: string;
  readonly schema: string;
  readonly recordFile: string;
  readonly claimTtlMs: number;
  readonly tasks: number;
  readonly every: string;
}

export class TaskProcess {
  readonly name: string;
  readonly pid: number;
  readonly recordFile: string;
  readonly #child: ForkedChild;

  private constructor(name: string, pid: number, recordFile: string, child: ForkedChild) {
    this.name = name;
    this.pid = pid;
    this.recordFile = recordFile;
    this.#child = child;
  }

  get exited(): Promise<Exit> {
    return this.#child.exited;
  }

  /** Starts one; resolves once it runs and has declared its tasks (rejects if it exits first). */
  static async start(o: TaskProcessOptions): Promise<TaskProcess> {
    const { child, ready } = await ForkedChild.start<{ type: 'ready'; pid: number }>(`task process ${o.name}`, entry, {
      TICKPOOL_CHILD_URL: o.url,
      TICKPOOL_CHILD_SCHEMA: o.schema,
      TICKPOOL_CHILD_NAME: o.name,
      TICKPOOL_RECORD_FILE: o.recordFile,
      TICKPOOL_CLAIM_TTL_MS: String(o.claimTtlMs),
      TICKPOOL_TASKS: String(o.tasks),
      TICKPOOL_EVERY: o.every,
    });
    return new TaskProcess(o.name, ready.pid, o.recordFile, child);
  }

  kill9(): void {
    this.#child.kill9();
  }

  stop(): Promise<void> {
    return this.#child.stop();
  }
}

/** One attempt of one run, as the record handler wrote it. */
export interface Attempt {
  readonly task: string;
  readonly scheduledFor: number;
  readonly process: string;
  readonly start: number;
  /** When it ended; for a process killed in the middle of it, the kill. */
  end: number;
  readonly attempt: number;
  /** It had no end line: its process was killed while it ran. */
  cutShort: boolean;
}

/** The attempts in a record file; those without an end line end at `killedAt` (or stay open: Infinity). */
export function readAttempts(file: string, killedAt = Infinity): Attempt[] {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const open = new Map<string, Attempt>();
  const attempts: Attempt[] = [];
  for (const line of text.split('\n')) {
    if (line === '') continue;
    const [kind, task, scheduledFor, process, time, attempt] = line.split(' ');
    const key = `${task} ${scheduledFor} ${attempt}`;
    if (kind === 'S') {
      const entry: Attempt = { task: task!, scheduledFor: Number(scheduledFor), process: process!, start: Number(time), end: killedAt, attempt: Number(attempt), cutShort: true };
      open.set(key, entry);
      attempts.push(entry);
    } else {
      const entry = open.get(key);
      if (entry === undefined) throw new Error(`an end without a start in ${file}: ${line}`);
      entry.end = Number(time);
      entry.cutShort = false;
      open.delete(key);
    }
  }
  return attempts;
}

/** A TCP proxy to the database whose connections (current and future) can be cut. */
export class CuttableProxy {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #cut = false;
  port = 0;

  constructor(readonly targetHost: string, readonly targetPort: number) {
    this.#server = createServer((client) => {
      if (this.#cut) {
        client.destroy();
        return;
      }
      const upstream = connect(targetPort, targetHost);
      for (const socket of [client, upstream]) {
        this.#sockets.add(socket);
        socket.on('close', () => this.#sockets.delete(socket));
        socket.on('error', () => undefined);
      }
      client.pipe(upstream);
      upstream.pipe(client);
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
  }

  listen(): Promise<number> {
    return new Promise((resolve) =>
      this.#server.listen(0, '127.0.0.1', () => {
        this.port = (this.#server.address() as { port: number }).port;
        resolve(this.port);
      }),
    );
  }

  /** Every connection through the proxy is dropped, and every new one refused. */
  cut(): void {
    this.#cut = true;
    for (const socket of this.#sockets) socket.destroy();
  }

  close(): Promise<void> {
    this.cut();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }
}
