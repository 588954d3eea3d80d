import { sleep, systemClock, type Clock } from './clock.js';
import { InvalidOptionError } from './errors.js';
import { assertKnownKeys } from './option-checks.js';

/** How a worker waits after errors (Nomad `worker.go` `backoffErr`/`backoffReset`). */
export interface BackoffOptions {
  /** Delay after the first failure, ms. Default 20 (Nomad `worker.go` `backoffBaseline`). */
  readonly baselineMs?: number;
  /** Upper bound of the delay, ms. Default 5000 (Nomad `worker.go` `backoffLimit`). */
  readonly limitMs?: number;
  /** Growth per failure. Default 4: Nomad `backoffErr`'s `(1 << (2 * failures)) * backoffBaseline`. */
  readonly factor?: number;
  /** `'none'` (default), `'full'` (uniform in [0, d]) or `'equal'` (uniform in [d/2, d]). */
  readonly jitter?: BackoffJitter;
}

export type BackoffJitter = 'none' | 'full' | 'equal';

export type ResolvedBackoffOptions = Required<BackoffOptions>;

export const backoffDefaults: ResolvedBackoffOptions = Object.freeze({
  baselineMs: 20,
  limitMs: 5000,
  factor: 4,
  jitter: 'none',
});

const jitters: readonly BackoffJitter[] = ['none', 'full', 'equal'];

/** Validates `options` (typed errors naming the option) and fills in defaults. */
export function resolveBackoffOptions(options: unknown, prefix = 'backoff'): ResolvedBackoffOptions {
  if (options === undefined) return backoffDefaults;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidOptionError(prefix, 'an object of backoff options', options);
  }
  const o = options as Record<string, unknown>;
  assertKnownKeys(prefix, o, ['baselineMs', 'limitMs', 'factor', 'jitter']);
  const number = (key: 'baselineMs' | 'limitMs' | 'factor', min: number): number => {
    const value = o[key] ?? backoffDefaults[key];
    if (typeof value !== 'number' || !Number.isFinite(value) || value < min) {
      throw new InvalidOptionError(`${prefix}.${key}`, `a finite number >= ${min}`, value);
    }
    return value;
  };
  const baselineMs = number('baselineMs', 0);
  const limitMs = number('limitMs', 0);
  const factor = number('factor', 1);
  if (limitMs < baselineMs) {
    throw new InvalidOptionError(`${prefix}.limitMs`, `a number >= baselineMs (${baselineMs})`, limitMs);
  }
  const jitter = o['jitter'] ?? backoffDefaults.jitter;
  if (!jitters.includes(jitter as BackoffJitter)) {
    throw new InvalidOptionError(`${prefix}.jitter`, `one of ${jitters.map((j) => `'${j}'`).join(', ')}`, jitter);
  }
  return { baselineMs, limitMs, factor, jitter: jitter as BackoffJitter };
}

/**
 * Exponential backoff with the rule of Nomad `worker.go` `backoffErr`: the delay is `factor^failures * baseline`,
 * capped at the limit, and the failure count grows only while the delay is under the limit. Because the count stops
 * growing there and the arithmetic is floating point, no failure count can overflow into a negative or zero delay
 * (Nomad #18199).
 */
export class Backoff {
  readonly options: ResolvedBackoffOptions;
  readonly #clock: Clock;
  readonly #random: () => number;
  #failures = 0;

  constructor(options?: BackoffOptions, deps: { clock?: Clock; random?: () => number } = {}) {
    this.options = resolveBackoffOptions(options);
    this.#clock = deps.clock ?? systemClock;
    this.#random = deps.random ?? Math.random;
  }

  /** Failures counted so far (stops growing once the delay reaches the limit). */
  get failures(): number {
    return this.#failures;
  }

  /** The delay for the next wait, advancing the failure count as `backoffErr` does. */
  nextDelay(): number {
    const { baselineMs, limitMs, factor, jitter } = this.options;
    let delay = factor ** this.#failures * baselineMs;
    if (delay > limitMs || !Number.isFinite(delay)) delay = limitMs;
    else this.#failures++;
    if (jitter === 'full') return this.#random() * delay;
    if (jitter === 'equal') return delay / 2 + (this.#random() * delay) / 2;
    return delay;
  }

  /** Sleeps for the next delay. Resolves `true` when `signal` aborted the wait (shutdown), `false` otherwise. */
  wait(signal?: AbortSignal): Promise<boolean> {
    if (signal?.aborted) return Promise.resolve(true);
    return sleep(this.#clock, this.nextDelay(), signal);
  }

  /** Forgets past failures (Nomad `backoffReset`). */
  reset(): void {
    this.#failures = 0;
  }
}
