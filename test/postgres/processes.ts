/**
 * Engine processes for the multi-process tests: real child processes (`fixtures/engine-process.ts`), each an engine
 * on the PostgreSQL backend, that the test can kill -9, stop, or ask to report once idle.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface ChildOptions {
  readonly name: string;
  readonly url: string;
  readonly schema: string;
  readonly broker?: Readonly<Record<string, number>>;
  readonly gate?: string;
}

export interface IdleReport {
  readonly refusals: Readonly<Record<string, number>>;
  readonly processed: number;
}

const entry = fileURLToPath(new URL('./fixtures/engine-process.js', import.meta.url));

export class EngineProcess {
  readonly name: string;
  readonly nodeId: string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly #child: ChildProcess;

  private constructor(name: string, nodeId: string, child: ChildProcess, exited: EngineProcess['exited']) {
    this.name = name;
    this.nodeId = nodeId;
    this.#child = child;
    this.exited = exited;
  }

  /** Starts one and resolves once its engine runs (rejects if it exits first). */
  static start(options: ChildOptions): Promise<EngineProcess> {
    const child = fork(entry, [], {
      env: {
        ...process.env,
        TICKPOOL_CHILD_URL: options.url,
        TICKPOOL_CHILD_SCHEMA: options.schema,
        TICKPOOL_CHILD_NAME: options.name,
        TICKPOOL_CHILD_BROKER: JSON.stringify(options.broker ?? {}),
        TICKPOOL_CHILD_GATE: options.gate ?? '',
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    return new Promise<EngineProcess>((resolve, reject) => {
      const onMessage = (message: { type: string; nodeId?: string }): void => {
        if (message.type !== 'ready') return;
        child.off('message', onMessage);
        resolve(new EngineProcess(options.name, message.nodeId!, child, exited));
      };
      child.on('message', onMessage);
      void exited.then(({ code, signal }) => reject(new Error(`engine process ${options.name} exited before it ran (${code ?? signal})`)));
    });
  }

  kill9(): void {
    this.#child.kill('SIGKILL');
  }

  /** Asks the engine to stop; resolves with the exit. */
  async stop(): Promise<void> {
    if (this.#child.exitCode !== null || this.#child.signalCode !== null) return;
    this.#child.send({ type: 'stop' });
    await this.exited;
  }

  /** Resolves once one of its workers is doing `activity` (`submitting`, …). */
  activity(activity: string): Promise<void> {
    return new Promise<void>((resolve) => {
      const onMessage = (message: { type: string }): void => {
        if (message.type !== 'activity') return;
        this.#child.off('message', onMessage);
        resolve();
      };
      this.#child.on('message', onMessage);
      this.#child.send({ type: 'activity', activity });
    });
  }

  /** Resolves once no evaluation is in hand in that process, with its refusal counts. */
  idle(): Promise<IdleReport> {
    return new Promise<IdleReport>((resolve) => {
      const onMessage = (message: { type: string } & IdleReport): void => {
        if (message.type !== 'idle') return;
        this.#child.off('message', onMessage);
        resolve(message);
      };
      this.#child.on('message', onMessage);
      this.#child.send({ type: 'idle' });
    });
  }
}

/** Polls `probe` until it answers something other than undefined, or fails after `limitMs` with `what`. */
export async function until<T>(what: string, limitMs: number, probe: () => Promise<T | undefined>, everyMs = 20): Promise<T> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    const answer = await probe();
    if (answer !== undefined) return answer;
    if (Date.now() > deadline) throw new Error(`gave up waiting ${limitMs} ms for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
