/**
 * Helpers of the reliability tests: engines that are always stopped, and promises for broker and scheduler events.
 * Nothing here sleeps; `turns()` only lets already-queued callbacks (promise jobs, `setImmediate`) run.
 */
import { after } from 'node:test';
import { pino } from 'pino';
import { createEngine, type Engine } from '../../src/engine/engine.js';
import type { Evaluation } from '../../src/broker/evaluation.js';

export const fixture = (name: string): URL => new URL(`../fixtures/${name}.js`, import.meta.url);
export const fixturePath = (name: string): string => decodeURIComponent(fixture(name).pathname);

/** Faults are expected in these tests: keep their warnings out of the output. */
export const logger = pino({ level: 'silent' });

const engines: Engine[] = [];
after(async () => {
  await Promise.all(engines.map((e) => e.stop({ graceMs: 100 })));
});

/** Creates an engine (stopped after the file's tests) without starting it. */
export function created(options: Parameters<typeof createEngine>[0]): Engine {
  const engine = createEngine({ threads: 2, workers: 8, logger, ...options });
  engines.push(engine);
  return engine;
}

export async function started(options: Parameters<typeof createEngine>[0]): Promise<Engine> {
  const engine = created(options);
  await engine.start();
  return engine;
}

export function evaluation(id: string, type: string, payload?: unknown, extra: Partial<Evaluation> = {}): Evaluation {
  return { id, jobId: id, type, priority: 50, ...(payload === undefined ? {} : { payload }), ...extra };
}

/** Resolves with the ids acked once `count` acks were seen (counting from now). */
export function acks(engine: Engine, count: number, filter: (id: string) => boolean = () => true): Promise<string[]> {
  const seen: string[] = [];
  return new Promise((resolve) => {
    const off = engine.broker.events.on('broker:ack', ({ evaluation }) => {
      if (!filter(evaluation.id)) return;
      seen.push(evaluation.id);
      if (seen.length === count) {
        off();
        resolve(seen);
      }
    });
  });
}

/** Resolves with `{ id, code }` of the evaluations that entered `_failed`, once `count` did. */
export function failures(engine: Engine, count: number): Promise<Array<{ id: string; code: string | undefined }>> {
  const seen: Array<{ id: string; code: string | undefined }> = [];
  return new Promise((resolve) => {
    const off = engine.broker.events.on('broker:failed', ({ evaluation, reason }) => {
      seen.push({ id: evaluation.id, code: codeOf(reason) });
      if (seen.length === count) {
        off();
        resolve(seen);
      }
    });
  });
}

export interface Finish {
  readonly taskId: string;
  readonly runId: string;
  readonly status: string;
  readonly attempts: number;
  readonly error: Error | undefined;
}

/** Resolves with the runs that finished, once `count` did (optionally only those of `taskId`). */
export function finished(engine: Engine, count: number, taskId?: string): Promise<Finish[]> {
  const seen: Finish[] = [];
  return new Promise((resolve) => {
    const off = engine.tasks.events.on('task:run:finish', (event) => {
      if (taskId !== undefined && event.taskId !== taskId) return;
      seen.push({ taskId: event.taskId, runId: event.runId, status: event.status, attempts: event.attempts, error: event.error });
      if (seen.length === count) {
        off();
        resolve(seen);
      }
    });
  });
}

export function nextEvent<T>(subscribe: (listener: (payload: T) => void) => () => void): Promise<T> {
  return new Promise((resolve) => {
    const off = subscribe((payload) => {
      off();
      resolve(payload);
    });
  });
}

/** Lets `n` turns of the event loop run (promise jobs and `setImmediate` callbacks queued so far), no timers. */
export async function turns(n = 3): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}

export const codeOf = (error: unknown): string | undefined => {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
};
