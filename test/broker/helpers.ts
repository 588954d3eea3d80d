import { pino } from 'pino';
import { Registry } from 'prom-client';
import { EvalBroker } from '../../src/broker/eval-broker.js';
import type { EvalBrokerOptions } from '../../src/broker/broker-options.js';
import type { Evaluation } from '../../src/broker/evaluation.js';
import { ManualClock } from '../../src/clock.js';
import { TickpoolError } from '../../src/errors.js';

export const silentLogger = pino({ level: 'silent' });

export interface Harness {
  readonly clock: ManualClock;
  readonly broker: EvalBroker;
  readonly registry: Registry;
}

/** A broker on a ManualClock at t=1_000_000, with a silent logger and its own registry. */
export function harness(options: EvalBrokerOptions = {}): Harness {
  const clock = new ManualClock(1_000_000);
  const registry = options.registry ?? new Registry();
  const broker = new EvalBroker({ clock, logger: silentLogger, registry, ...options });
  return { clock, broker, registry };
}

let counter = 0;

/** An evaluation with defaults (type `service`, priority 50); `id` defaults to a fresh one. */
export function ev(jobId: string, extra: Partial<Evaluation> & { id?: string } = {}): Evaluation {
  return { id: extra.id ?? `eval-${++counter}`, jobId, type: 'service', priority: 50, ...extra };
}

/** Predicate for `assert.throws`/`rejects`: a TickpoolError with this code (and optionally a message pattern). */
export function code(expected: string, message?: RegExp): (error: unknown) => boolean {
  return (error: unknown) => {
    if (!(error instanceof TickpoolError)) return false;
    if (error.code !== expected) return false;
    return message === undefined || message.test(error.message);
  };
}

/** Whether a promise has settled, after letting pending microtasks run. */
export async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return done;
}

/** A deterministic random source (mulberry32), shared with the fault fixtures. */
export { seededRandom as seeded } from '../fixtures/fault-plan.js';
