/**
 * Option checks shared by the task scheduler, the in-memory store and the run log: one wording per mistake, in the
 * "expected …, got …" form of every `InvalidOptionError`.
 */
import { systemClock, type Clock } from '../clock.js';
import { InvalidOptionError } from '../errors.js';

/** An options argument: `undefined` (all defaults) or an object that is not an array. */
export function optionsObject(options: unknown, expected: string): Readonly<Record<string, unknown>> {
  if (options === undefined) return {};
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidOptionError('options', expected, options);
  }
  return options as Readonly<Record<string, unknown>>;
}

/** True when `value` is an object or function with a function under each of `names`. */
export function hasMethods(value: unknown, names: readonly string[]): boolean {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return false;
  return names.every((name) => typeof (value as Record<string, unknown>)[name] === 'function');
}

/** The `clock` option: a `Clock`, or the system clock when absent. */
export function clockOption(value: unknown): Clock {
  const clock = value ?? systemClock;
  if (!hasMethods(clock, ['now', 'setTimer', 'clearTimer'])) {
    throw new InvalidOptionError('clock', 'a Clock (now, setTimer, clearTimer)', value);
  }
  return clock as Clock;
}
