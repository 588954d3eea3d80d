/**
 * A fixture process of the multi-process tests: an entry forked with its configuration in the environment, that
 * talks `{ type, ... }` messages over IPC, says `ready` once it runs, and stops on `stop` (or dies on kill -9).
 * The engine processes (`processes.ts`) and the task processes (`tasks/cluster-processes.ts`) are faces over it.
 */
import { fork, type ChildProcess } from 'node:child_process';

export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface ChildMessage {
  readonly type: string;
}

export class ForkedChild {
  /** Settles once, with the exit, whoever caused it. */
  readonly exited: Promise<Exit>;
  readonly #child: ChildProcess;

  private constructor(child: ChildProcess) {
    this.#child = child;
    this.exited = new Promise<Exit>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  }

  /**
   * Forks `entry` with `env` over this process's environment; resolves with the child and its `ready` message once
   * it sends one, and rejects (naming `label`) if it exits first. Its stdout and stderr are this process's.
   */
  static start<Ready extends ChildMessage>(label: string, entry: string, env: Readonly<Record<string, string>>): Promise<{ child: ForkedChild; ready: Ready }> {
    const forked = new ForkedChild(fork(entry, [], { env: { ...process.env, ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }));
    return new Promise((resolve, reject) => {
      void forked.#next<Ready>('ready').then((ready) => resolve({ child: forked, ready }));
      void forked.exited.then(({ code, signal }) => reject(new Error(`${label} exited before it was ready (${code ?? signal})`)));
    });
  }

  /** Sends `message` and resolves with the next message of type `reply` (never, if the child dies first). */
  ask<Reply extends ChildMessage>(message: ChildMessage & Readonly<Record<string, unknown>>, reply: string): Promise<Reply> {
    const answer = this.#next<Reply>(reply);
    this.#child.send(message);
    return answer;
  }

  kill9(): void {
    this.#child.kill('SIGKILL');
  }

  /** Asks the child to stop; resolves with its exit (at once when it has exited already). */
  async stop(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    this.#child.send({ type: 'stop' });
    await this.exited;
  }

  /** The next message of `type`; the listener is gone once it came. */
  #next<M extends ChildMessage>(type: string): Promise<M> {
    return new Promise<M>((resolve) => {
      const onMessage = (message: M): void => {
        if (message.type !== type) return;
        this.#child.off('message', onMessage);
        resolve(message);
      };
      this.#child.on('message', onMessage);
    });
  }
}
