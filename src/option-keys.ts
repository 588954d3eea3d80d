/**
 * Unknown option keys are mistakes (a misspelt `nackTimeout` would silently keep the default): every options object
 * is checked against the keys it accepts.
 */
import { InvalidOptionError } from './errors.js';

/** Throws `InvalidOptionError` naming the first key of `options` that is not in `known`. */
export function assertKnownKeys(prefix: string, options: object, known: readonly string[]): void {
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) {
      throw new InvalidOptionError(prefix === '' ? key : `${prefix}.${key}`, `a known option (${known.join(', ')})`, key);
    }
  }
}
