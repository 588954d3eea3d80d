/**
 * Option checks shared by every component that takes options (the engine, the broker, the backoff, the task
 * scheduler, its store and run log): one wording per mistake, in the "expected …, got …" form of every
 * `InvalidOptionError`.
 */
import { systemClock, type Clock } from './clock.js';
import { InvalidOptionError } from './errors.js';

/** An options argument: `undefined` (all defaults) or an object that is not an array. */
export function optionsObject(options: unknown, expected: string): Readonly<Record<string, unknown>> {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidOptionError('options', expected, options);
  }
  return options as Readonly<Record<string, unknown>>;
}

/**
 * Unknown option keys are mistakes (a misspelt `nackTimeout` would silently keep the default): throws
 * `InvalidOptionError` naming the first key of `options` that is not in `known`.
 */
export function assertKnownKeys(prefix: string, options: object, known: readonly string[]): void {
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) {
      throw new InvalidOptionError(prefix === '' ? key : `${prefix}.${key}`, `a known option (${known.join(', ')})`, key);
    }
  }
}

/** True when `value` is an object or function with a function under each of `names`. */
export function hasMethods(value: unknown, names: readonly string[]): boolean {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return false;
  return names.every((name) => typeof (value as Record<string, unknown>)[name] === 'function');
}

/** A `clock` option (named `name` in the error): a `Clock`, or the system clock when absent. */
export function clockOption(value: unknown, name = 'clock'): Clock {
  const clock = value ?? systemClock;
  if (!hasMethods(clock, ['now', 'setTimer', 'clearTimer'])) {
    throw new InvalidOptionError(name, 'a Clock (now, setTimer, clearTimer)', value);
  }
  return clock as Clock;
}
