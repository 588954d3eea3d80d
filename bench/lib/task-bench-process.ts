/**
 * The bench's side of one engine process (`bench/fixtures/pg-task-process.ts`): forks it, sends it one request at
 * a time and resolves with the reply, and kills it. A process that exits with a request pending rejects it.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ProcessConfig, Reply, Request } from './task-bench-protocol.js';

const entry = fileURLToPath(new URL('../fixtures/pg-task-process.js', import.meta.url));

type ReplyOf<T extends Reply['type']> = Extract<Reply, { type: T }>;

export class TaskBenchProcess {
  readonly pid: number;
  /** Settles when the process has exited, however it ended. */
  readonly exited: Promise<void>;
  readonly #child: ChildProcess;
  #pending: { readonly resolve: (reply: Reply) => void; readonly reject: (error: Error) => void } | undefined;

  private constructor(child: ChildProcess, pid: number, exited: Promise<void>) {
    this.#child = child;
    this.pid = pid;
    this.exited = exited;
    child.on('message', (reply: Reply) => {
      const pending = this.#pending;
      this.#pending = undefined;
      if (reply.type === 'failed') pending?.reject(new Error(`engine process ${pid}: ${reply.message}`));
      else pending?.resolve(reply);
    });
    void exited.then(() => {
      this.#pending?.reject(new Error(`engine process ${pid} exited with a request pending`));
      this.#pending = undefined;
    });
  }

  /** Forks one; resolves once its engine is created (modules loaded, nothing started). */
  static fork(config: ProcessConfig): Promise<TaskBenchProcess> {
    const child = fork(entry, [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    return new Promise((resolve, reject) => {
      child.once('message', (reply: Reply) => {
        if (reply.type === 'ready') resolve(new TaskBenchProcess(child, reply.pid, exited));
        else reject(new Error(`engine process answered ${reply.type} before it was ready`));
      });
      void exited.then(() => reject(new Error('engine process exited before it was ready')));
    });
  }

  /** Sends `request` and resolves with its reply, which must be of type `expect`. */
  request<T extends Reply['type']>(request: Request, expect: T): Promise<ReplyOf<T>> {
    if (this.#pending !== undefined) return Promise.reject(new Error(`engine process ${this.pid} has a request pending`));
    return new Promise<Reply>((resolve, reject) => {
      this.#pending = { resolve, reject };
      this.#child.send(request);
    }).then((reply) => {
      if (reply.type !== expect) throw new Error(`engine process ${this.pid} answered ${reply.type} to ${request.type}`);
      return reply as ReplyOf<T>;
    });
  }

  /** Stops its engine (claims given back) and waits for the exit; a process already gone is left alone. */
  async stop(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    await this.request({ type: 'stop' }, 'stopped');
    await this.exited;
  }

  /** `kill -9`: the process gets no chance to give anything back. */
  kill9(): void {
    this.#child.kill('SIGKILL');
  }
}
