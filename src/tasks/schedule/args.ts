import { InvalidArgumentError } from '../../errors.js';

/**
 * Argument checks for `Schedule.next`/`between`. They run on the scheduler's hot path, so they are plain
 * comparisons; a NaN or an infinite time would otherwise silently poison a heap of due times.
 */

export function checkTime(name: string, value: number): void {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new InvalidArgumentError(name, 'a finite time in epoch milliseconds', value);
  }
}

export function checkLimit(value: number): void {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new InvalidArgumentError('limit', 'an integer >= 0', value);
  }
}
