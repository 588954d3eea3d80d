import type { Clock } from '../clock.js';
import { InvalidOptionError } from '../errors.js';
import { createDefaultLogger, isLogger, type Logger } from '../observability/logger.js';
import { isRegistry, Registry } from '../observability/metrics.js';
import { assertKnownKeys, clockOption } from '../option-checks.js';
import { payloadValidator } from '../payload-size.js';

export interface EvalBrokerOptions {
  /** How long a delivery may stay unacked before the broker nacks it, ms. Default 60000. */
  readonly nackTimeoutMs?: number;
  /** Deliveries after which a nacked evaluation goes to `_failed` instead of back to its queue. Default 3. */
  readonly deliveryLimit?: number;
  /** Re-enqueue delay after the first delivery was nacked, ms. Default 1000. */
  readonly initialNackDelayMs?: number;
  /** Re-enqueue delay after the d-th delivery (d ≥ 2) was nacked is `(d − 1) ×` this, ms. Default 20000. */
  readonly subsequentNackDelayMs?: number;
  /** Time source for every deadline and delay. Default the system clock. */
  readonly clock?: Clock;
  /** pino logger; per-evaluation events are logged at `debug`. Default a pino logger at `warn`. */
  readonly logger?: Logger;
  /** prom-client registry for the broker's metrics. Default a fresh registry (see `EvalBroker.registry`). */
  readonly registry?: Registry;
  /** Uniform random in [0, 1) for tie-breaks between scheduler types. Default `Math.random`. */
  readonly random?: () => number;
  /**
   * Asked when a nack deadline is about to fire. Returning true resets the deadline to now + `nackTimeoutMs`
   * (like `outstandingReset`) instead of nacking; returning a number `t` (a time on the broker's clock: when the
   * delivery's work started, or last showed progress) moves the deadline to `t + nackTimeoutMs`, and nacks if that
   * is not after now. The engine answers from shared memory: heartbeats its threads write, and whether the
   * delivery's scheduler has started at all, since a deadline counts from the start of the work, not from the
   * dequeue. It must not call back into the broker; a throw counts as false. A keeper registered with
   * `keepLeases` is asked instead.
   */
  readonly extendNackDeadline?: ExtendNackDeadline;
  /**
   * Checks an evaluation's payload at enqueue; throw a `TickpoolError` to reject the evaluation. Default: the
   * payload must survive `structuredClone` (and fit `maxPayloadBytes`, when set).
   */
  readonly validatePayload?: (payload: unknown) => void;
  /**
   * Largest payload admitted at enqueue, bytes of its structured-clone serialization: a larger one throws
   * `PayloadTooLargeError`. Cloneability and size are checked with one serialization. With `validatePayload` as
   * well, that runs first. Default: no limit. The engine passes its `maxPayloadBytes`, so that every enqueue —
   * through the engine or its broker — is held to it.
   */
  readonly maxPayloadBytes?: number;
  /**
   * The evaluation types anything will ever run. An evaluation of another type is failed where it is admitted, at
   * `enqueue`: it goes to `_failed` with `UnknownSchedulerError` (its `done` rejects; `enqueue` still returns its
   * handle). Default: every type is admitted. The engine passes its registered schedulers' names.
   */
  readonly knownTypes?: Iterable<string>;
}

/** `true`: progress now; a number: the time of the last progress (deadline = it + `nackTimeoutMs`); `false`: nack. */
export type ExtendNackDeadline = (evaluationId: string, token: string) => boolean | number;

export interface ResolvedEvalBrokerOptions {
  readonly nackTimeoutMs: number;
  readonly deliveryLimit: number;
  readonly initialNackDelayMs: number;
  readonly subsequentNackDelayMs: number;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly registry: Registry;
  readonly random: () => number;
  readonly extendNackDeadline: ExtendNackDeadline | undefined;
  /** The payload check, `maxPayloadBytes` included. */
  readonly validatePayload: ((payload: unknown) => void) | undefined;
  readonly maxPayloadBytes: number | undefined;
  /** Undefined: every type is admitted. */
  readonly knownTypes: ReadonlySet<string> | undefined;
}

/** The numeric defaults, in one place (the README's options table quotes these). */
export const evalBrokerDefaults = Object.freeze({
  nackTimeoutMs: 60_000,
  deliveryLimit: 3,
  initialNackDelayMs: 1_000,
  subsequentNackDelayMs: 20_000,
});

/** Validates `options` (typed errors naming the option, expected vs received) and fills in defaults. */
export function resolveEvalBrokerOptions(options: unknown): ResolvedEvalBrokerOptions {
  if (options === undefined) options = {};
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidOptionError('options', 'an object of eval broker options', options);
  }
  const o = options as Record<string, unknown>;
  assertKnownKeys('broker', o, [
    'nackTimeoutMs', 'deliveryLimit', 'initialNackDelayMs', 'subsequentNackDelayMs', 'clock', 'logger', 'registry', 'random',
    'extendNackDeadline', 'validatePayload', 'maxPayloadBytes', 'knownTypes',
  ]);
  const number = (key: keyof typeof evalBrokerDefaults, check: (n: number) => boolean, expected: string): number => {
    const value = o[key] ?? evalBrokerDefaults[key];
    if (typeof value !== 'number' || !Number.isFinite(value) || !check(value)) {
      throw new InvalidOptionError(`broker.${key}`, expected, value);
    }
    return value;
  };
  // A zero nack timeout would make an extended deadline due again at once, forever.
  const nackTimeoutMs = number('nackTimeoutMs', (n) => n > 0, 'a finite number of ms > 0');
  const deliveryLimit = number('deliveryLimit', (n) => Number.isInteger(n) && n >= 1, 'an integer >= 1');
  const initialNackDelayMs = number('initialNackDelayMs', (n) => n >= 0, 'a finite number of ms >= 0');
  const subsequentNackDelayMs = number('subsequentNackDelayMs', (n) => n >= 0, 'a finite number of ms >= 0');

  const clock = clockOption(o['clock'], 'broker.clock');
  const logger = o['logger'] ?? createDefaultLogger('tickpool:broker');
  if (!isLogger(logger)) throw new InvalidOptionError('broker.logger', 'a pino logger', logger);
  const registry = o['registry'] ?? new Registry();
  if (!isRegistry(registry)) throw new InvalidOptionError('broker.registry', 'a prom-client Registry', registry);
  const random = o['random'] ?? Math.random;
  if (typeof random !== 'function') throw new InvalidOptionError('broker.random', 'a function returning [0, 1)', random);
  const extend = o['extendNackDeadline'];
  if (extend !== undefined && typeof extend !== 'function') {
    throw new InvalidOptionError('broker.extendNackDeadline', 'a function (evaluationId, token) => boolean | number, or undefined', extend);
  }
  const validatePayload = o['validatePayload'];
  if (validatePayload !== undefined && typeof validatePayload !== 'function') {
    throw new InvalidOptionError('broker.validatePayload', 'a function (payload) => void or undefined', validatePayload);
  }
  const maxPayloadBytes = o['maxPayloadBytes'];
  if (maxPayloadBytes !== undefined && (!Number.isSafeInteger(maxPayloadBytes) || (maxPayloadBytes as number) < 1)) {
    throw new InvalidOptionError('broker.maxPayloadBytes', 'an integer number of bytes >= 1, or undefined', maxPayloadBytes);
  }
  return {
    validatePayload: payloadCheck(validatePayload as ((payload: unknown) => void) | undefined, maxPayloadBytes as number | undefined),
    maxPayloadBytes: maxPayloadBytes as number | undefined,
    knownTypes: knownTypesOption(o['knownTypes']),
    nackTimeoutMs,
    deliveryLimit,
    initialNackDelayMs,
    subsequentNackDelayMs,
    clock,
    logger,
    registry,
    random: random as () => number,
    extendNackDeadline: extend as ResolvedEvalBrokerOptions['extendNackDeadline'],
  };
}

/** The one payload check of an enqueue: the user's, then the size limit (which also proves cloneability). */
function payloadCheck(validate: ((payload: unknown) => void) | undefined, maxBytes: number | undefined): ((payload: unknown) => void) | undefined {
  if (maxBytes === undefined) return validate;
  const fits = payloadValidator(maxBytes);
  if (validate === undefined) return fits;
  return (payload) => {
    validate(payload);
    fits(payload);
  };
}

function knownTypesOption(value: unknown): ReadonlySet<string> | undefined {
  if (value === undefined) return undefined;
  const expected = 'an iterable of evaluation type names (non-empty strings), or undefined';
  if (value === null || typeof value !== 'object' || typeof (value as { [Symbol.iterator]?: unknown })[Symbol.iterator] !== 'function') {
    throw new InvalidOptionError('broker.knownTypes', expected, value);
  }
  const types = new Set<string>();
  for (const type of value as Iterable<unknown>) {
    if (typeof type !== 'string' || type === '') throw new InvalidOptionError('broker.knownTypes', expected, type);
    types.add(type);
  }
  return types;
}
