/**
 * What `createEngine({ backend })` accepts, and what a factory must make: checked where a backend is plugged in,
 * so that a wrong one is an `InvalidOptionError` at the entry rather than a failure deep in the engine.
 */
import type { Backend, BackendFactory } from '../backend/backend.js';
import { InvalidOptionError } from '../errors.js';

/** True for what `createEngine({ backend })` accepts: an object with a string `name` and a `create` function. */
export function isBackendFactory(value: unknown): value is BackendFactory {
  return (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as { name?: unknown }).name === 'string' &&
    typeof (value as { create?: unknown }).create === 'function'
  );
}

const PARTS = ['broker', 'state', 'plans', 'tasks'] as const;

/**
 * Checks what a factory's `create` made: the four parts and the two lifecycle functions. A factory that returns
 * something else is a bug of that backend, reported where it is plugged in.
 */
export function assertBackend(name: string, value: unknown): asserts value is Backend {
  const b = value as Partial<Record<string, unknown>> | null;
  const expected = 'a Backend { broker, state, plans, tasks, open(), close() }';
  if (b === null || typeof b !== 'object') throw new InvalidOptionError('backend', `${name}'s create() to return ${expected}`, value);
  for (const part of PARTS) {
    if (b[part] === null || typeof b[part] !== 'object') throw new InvalidOptionError(`backend.${part}`, `${name}'s create() to return ${expected}`, b[part]);
  }
  if (typeof b['open'] !== 'function' || typeof b['close'] !== 'function') {
    throw new InvalidOptionError('backend', `${name}'s create() to return ${expected}`, value);
  }
}
