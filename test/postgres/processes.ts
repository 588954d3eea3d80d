/**
 * Engine processes for the multi-process tests: real child processes (`fixtures/engine-process.ts`), each an engine
 * on the PostgreSQL backend, that the test can kill -9, stop, or ask to report once idle.
 */
import { fileURLToPath } from 'node:url';
import { ForkedChild, type Exit } from './child-process.js';

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
  readonly #child: ForkedChild;

  private constructor(name: string, nodeId: string, child: ForkedChild) {
    this.name = name;
    this.nodeId = nodeId;
    this.#child = child;
  }

  get exited(): Promise<Exit> {
    return this.#child.exited;
  }

  /** Starts one and resolves once its engine runs (rejects if it exits first). */
  static async start(options: ChildOptions): Promise<EngineProcess> {
    const { child, ready } = await ForkedChild.start<{ type: 'ready'; nodeId: string }>(`engine process ${options.name}`, entry, {
      TICKPOOL_CHILD_URL: options.url,
      TICKPOOL_CHILD_SCHEMA: options.schema,
      TICKPOOL_CHILD_NAME: options.name,
      TICKPOOL_CHILD_BROKER: JSON.stringify(options.broker ?? {}),
      TICKPOOL_CHILD_GATE: options.gate ?? '',
    });
    return new EngineProcess(options.name, ready.nodeId, child);
  }

  kill9(): void {
    this.#child.kill9();
  }

  /** Asks the engine to stop; resolves with the exit. */
  stop(): Promise<void> {
    return this.#child.stop();
  }

  /** Resolves once one of its workers is doing `activity` (`submitting`, …). */
  async activity(activity: string): Promise<void> {
    await this.#child.ask({ type: 'activity', activity }, 'activity');
  }

  /** Resolves once no evaluation is in hand in that process, with its refusal counts. */
  idle(): Promise<IdleReport> {
    return this.#child.ask<{ type: 'idle' } & IdleReport>({ type: 'idle' }, 'idle');
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
