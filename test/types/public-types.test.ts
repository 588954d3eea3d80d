/**
 * The public types a user writes against. Most of this file is checked by the compiler (the build is part of
 * `npm test`): each `@ts-expect-error` must meet an error, so a type that got looser (a `tasks.add` that takes
 * `unknown` again) fails the build. The one run-time test runs a scheduler typed with `satisfies Scheduler<…>`.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { createEngine, type Scheduler, type SchedulerEvaluation, type TaskHandler, type TaskInput, type TaskRunInput } from '../../src/index.js';

interface MyPayload {
  readonly text: string;
}
interface MyValue {
  readonly words: number;
}

// A scheduler's parameters are typed by the annotation alone, and what it returns is checked against `Value`.
export const scheduler = (async (evaluation, ctx) => {
  const words: number = evaluation.payload.text.split(' ').length;
  if (ctx.canceled) return undefined;
  return { writes: [], value: { words } };
}) satisfies Scheduler<MyPayload, MyValue>;

// A synchronous scheduler that writes nothing is a scheduler too.
export const nothing = ((evaluation: SchedulerEvaluation<MyPayload>) => {
  void evaluation.payload.text;
}) satisfies Scheduler<MyPayload>;

// @ts-expect-error: the value is not a MyValue
export const wrongValue = (async () => ({ writes: [], value: 'many' })) satisfies Scheduler<MyPayload, MyValue>;

// @ts-expect-error: the payload has no `txt`
export const wrongPayload = (async (evaluation) => ({ writes: [], value: { words: evaluation.payload.txt } })) satisfies Scheduler<MyPayload, MyValue>;

// A task handler gets the run and the task's payload; it returns its value or a RunResult.
export const handler = (async (run: TaskRunInput<MyPayload>, ctx) => run.payload.text.length + ctx.attempt + run.scheduledFor) satisfies TaskHandler<MyPayload, number>;
export const failing = (async () => ({ error: new Error('not yet'), retryable: true })) satisfies TaskHandler<MyPayload, number>;

// @ts-expect-error: a string is not the handler's value type
export const wrongHandler = (async () => 'text') satisfies TaskHandler<MyPayload, number>;

export function addTasks(engine: ReturnType<typeof createEngine>): void {
  const task: TaskInput = { id: 'a', every: '10s', offset: '1s', maxConcurrency: 1, handler: 'h', payload: { text: 'x' } };
  engine.tasks.add(task, { latestCompleted: 0 });
  engine.tasks.add({ id: 'b', cron: '*/5 * * * *', timezone: 'Europe/London', maxConcurrency: 2, retry: 3, handler: 'h' });
  // @ts-expect-error: `evry` is not a task field
  engine.tasks.add({ id: 'c', evry: '10s', maxConcurrency: 1, handler: 'h' });
  // @ts-expect-error: `maxConcurrency` is required
  engine.tasks.add({ id: 'd', every: '10s', handler: 'h' });
}

test('a scheduler typed with `satisfies Scheduler<Payload, Value>` runs as any other', async () => {
  const engine = createEngine({
    threads: 1,
    workers: 1,
    tables: ['words'],
    logger: pino({ level: 'silent' }),
    schedulers: { count: new URL('../fixtures/typed-scheduler.js', import.meta.url) },
  });
  try {
    await engine.start();
    const acked = new Promise<void>((resolve) => engine.broker.events.on('broker:ack', () => resolve()));
    engine.enqueue({ id: 'e1', jobId: 'j1', type: 'count', priority: 50, payload: { text: 'to be or not' } });
    await acked;
    assert.equal(engine.state.snapshot().get('words', 'j1')?.value, 4);
  } finally {
    await engine.stop();
  }
});
