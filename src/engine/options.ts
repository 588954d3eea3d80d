/**
 * Every engine option, its default and its validation, in one place. The README's options table is checked
 * against `engineDefaults` by a test, so the two cannot drift.
 */
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Backend, BackendFactory } from '../backend/backend.js';
import { isBackendFactory } from './backend-checks.js';
import { memoryBackend, type MemoryBackend } from '../memory/memory-backend.js';
import { resolveBackoffOptions, type BackoffOptions, type ResolvedBackoffOptions } from '../backoff.js';
import type { EvalBrokerOptions } from '../broker/broker-options.js';
import type { Clock } from '../clock.js';
import { InvalidOptionError } from '../errors.js';
import { createDefaultLogger, isLogger, type Logger } from '../observability/logger.js';
import { isRegistry, Registry } from '../observability/metrics.js';
import { assertKnownKeys, clockOption } from '../option-checks.js';
import type { ModuleRef } from '../protocol/messages.js';
import type { ResourceLimits } from '../pool/pool-types.js';
import type { EvaluatePlan } from '../state/types.js';

/** A user module: a path (absolute, or relative to the working directory), a `file:` URL, or either with an export name. */
export type ModuleSpec = string | URL | { readonly module: string | URL; readonly export?: string };

export interface EngineOptions {
  /**
   * Where the broker, the state store and the task store live: `memoryBackend()` keeps them in this process's
   * memory; a shared backend keeps them in a database that many engine processes share. Typed here as the
   * in-memory one; `createEngine` takes any backend and types the engine's `broker`, `state` and `plans` after it.
   * @default `memoryBackend()`
   */
  readonly backend?: BackendFactory<MemoryBackend>;
  /**
   * Pool threads: a count (1..512), or `{ min, max }` to grow under load and shrink when idle.
   * @default `availableParallelism()`
   */
  readonly threads?: number | { readonly min: number; readonly max: number };
  /**
   * Scheduling workers (Nomad's `num_schedulers`): how many evaluations may be dequeued at once, each on a thread or
   * waiting in the pool's queue for one (waiting never counts against its nack deadline).
   * @default `threads.max × 128`
   */
  readonly workers?: number;
  /**
   * Evaluation type → scheduler module (default export unless named). Only these ever run.
   * @default `{}`
   */
  readonly schedulers?: Readonly<Record<string, ModuleSpec>>;
  /**
   * Task handler name → handler module. Only these ever run.
   * @default `{}`
   */
  readonly handlers?: Readonly<Record<string, ModuleSpec>>;
  /**
   * Backoff of workers after dequeue errors, and of task retries.
   * @default `{ baselineMs: 20, limitMs: 5000, factor: 4, jitter: 'none' }`
   */
  readonly backoff?: BackoffOptions;
  /**
   * Options of the evaluation broker (`clock`, `logger`, `registry` come from the engine).
   * @default `{ nackTimeoutMs: 60000, deliveryLimit: 3, initialNackDelayMs: 1000, subsequentNackDelayMs: 20000, random: Math.random }`
   */
  readonly broker?: Omit<EvalBrokerOptions, 'clock' | 'logger' | 'registry' | 'extendNackDeadline' | 'validatePayload' | 'knownTypes' | 'maxPayloadBytes'>;
  /**
   * How long one dequeue of an idle worker waits before the worker looks again, ms. 0 waits until work comes: a pause
   * or a stop ends the wait at once, so an idle worker needs no timer (and a `ManualClock` advanced by a day fires
   * none for it).
   * @default 0
   */
  readonly dequeueTimeoutMs?: number;
  /**
   * How long a thread waits for its replica to reach an evaluation's index before the evaluation is nacked, ms.
   * @default 5000
   */
  readonly syncLimitMs?: number;
  /**
   * Scheduler runs per evaluation while its plan keeps being partly rejected.
   * @default 5
   */
  readonly maxPlanAttempts?: number;
  /**
   * How long canceled work may keep running before its thread is terminated, ms.
   * @default 1000
   */
  readonly cancelGraceMs?: number;
  /**
   * A thread above `threads.min` idle this long is stopped, ms.
   * @default 30000
   */
  readonly idleTimeoutMs?: number;
  /**
   * Tables of the state store.
   * @default `[]`
   */
  readonly tables?: readonly string[];
  /**
   * Optional plan check run by the plan applier (Nomad's per-node fit check): returns the writes to reject.
   * @default none (the version check only)
   */
  readonly evaluatePlan?: EvaluatePlan;
  /**
   * Interval of the task ticker, ms. The ticker also wakes at the earliest due time.
   * @default 1000
   */
  readonly tickMs?: number;
  /**
   * Lease of a task claim with a shared backend (PostgreSQL), ms: the tasks of a process that died are claimed by the
   * others within this long, and a process that cannot renew its claims cancels their runs at half of it.
   * @default 10000
   */
  readonly claimTtlMs?: number;
  /**
   * Piscina `resourceLimits` for every pool thread.
   * @default none (Node's own limits)
   */
  readonly resourceLimits?: ResourceLimits;
  /**
   * Largest evaluation payload accepted at enqueue, bytes of its structured-clone serialization.
   * @default 1048576
   */
  readonly maxPayloadBytes?: number;
  /**
   * Where the engine logs; per-evaluation events are at `debug`.
   * @default a pino logger at `warn`
   */
  readonly logger?: Logger;
  /**
   * Where every metric is registered.
   * @default `new Registry()`
   */
  readonly registry?: Registry;
  /**
   * Time source of every deadline, delay, backoff and schedule (a `ManualClock` in tests).
   * @default `systemClock`
   */
  readonly clock?: Clock;
}

/** `EngineOptions` on another backend: the engine's `broker`, `state` and `plans` are typed after `B`. */
export type EngineOptionsOn<B extends Backend> = Omit<EngineOptions, 'backend'> & { readonly backend: BackendFactory<B> };

/** Defaults. `threads` and `workers` depend on the machine; see `defaultThreads` and `defaultWorkers`. */
export const engineDefaults = Object.freeze({
  dequeueTimeoutMs: 0,
  syncLimitMs: 5_000,
  maxPlanAttempts: 5,
  cancelGraceMs: 1_000,
  idleTimeoutMs: 30_000,
  tickMs: 1_000,
  claimTtlMs: 10_000,
  maxPayloadBytes: 1_048_576,
  /** Workers per pool thread when `workers` is not set: enough in flight to fill every thread's batch. */
  workersPerThread: 128,
});

export function defaultThreads(): number {
  return availableParallelism();
}

export interface ResolvedEngineOptions {
  readonly backend: BackendFactory;
  readonly threads: { readonly min: number; readonly max: number };
  readonly workers: number;
  readonly schedulers: Readonly<Record<string, ModuleRef>>;
  readonly handlers: Readonly<Record<string, ModuleRef>>;
  readonly backoff: ResolvedBackoffOptions;
  readonly broker: NonNullable<EngineOptions['broker']>;
  readonly dequeueTimeoutMs: number;
  readonly syncLimitMs: number;
  readonly maxPlanAttempts: number;
  readonly cancelGraceMs: number;
  readonly idleTimeoutMs: number;
  readonly tables: readonly string[];
  readonly evaluatePlan: EvaluatePlan | undefined;
  readonly tickMs: number;
  readonly claimTtlMs: number;
  readonly resourceLimits: ResourceLimits | undefined;
  readonly maxPayloadBytes: number;
  readonly logger: Logger;
  readonly registry: Registry;
  readonly clock: Clock;
}

const MAX_THREADS = 512;

/**
 * Bounds of each `resourceLimits` entry, in MB, outside of which Node does not fail cleanly (measured on Node 20):
 * a stack under ~0.25 MB aborts or segfaults the whole process and one of 65536 MB makes `new Worker` throw
 * EAGAIN; a code range of 1e9 MB hits a V8 trap. A heap too small for a thread to boot is not refused here (it
 * depends on the modules the thread loads): `start()` rejects with `ResourceLimitError` instead.
 */
const resourceLimitRanges = Object.freeze({
  maxOldGenerationSizeMb: { above: 0, max: 1_048_576 },
  maxYoungGenerationSizeMb: { above: 0, max: 1_048_576 },
  codeRangeSizeMb: { above: 0, max: 1_048_576 },
  stackSizeMb: { above: 0.5, max: 1024 },
});

function integer(o: Record<string, unknown>, key: string, min: number, max: number, fallback: number): number {
  const value = o[key] ?? fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidOptionError(key, `an integer from ${min} to ${max}`, value);
  }
  return value;
}

function resolveThreads(value: unknown): { min: number; max: number } {
  if (value === undefined) {
    const n = defaultThreads();
    return { min: n, max: n };
  }
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || value < 1 || value > MAX_THREADS) {
      throw new InvalidOptionError('threads', `an integer from 1 to ${MAX_THREADS}`, value);
    }
    return { min: value, max: value };
  }
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const t = value as Record<string, unknown>;
    const min = integer(t, 'min', 1, MAX_THREADS, Number.NaN);
    const max = integer(t, 'max', 1, MAX_THREADS, Number.NaN);
    if (max < min) throw new InvalidOptionError('threads.max', `an integer >= threads.min (${min})`, max);
    return { min, max };
  }
  throw new InvalidOptionError('threads', `an integer from 1 to ${MAX_THREADS} or { min, max }`, value);
}

/** Resolves a module spec to a `file:` URL that exists, and an export name. */
export function resolveModuleRef(name: string, spec: unknown): ModuleRef {
  let module: unknown = spec;
  let exportName: unknown = 'default';
  if (spec !== null && typeof spec === 'object' && !(spec instanceof URL)) {
    module = (spec as Record<string, unknown>)['module'];
    exportName = (spec as Record<string, unknown>)['export'] ?? 'default';
  }
  if (typeof exportName !== 'string' || exportName.length === 0) {
    throw new InvalidOptionError(`${name}.export`, 'a non-empty export name', exportName);
  }
  let url: URL;
  if (module instanceof URL) url = module;
  else if (typeof module === 'string' && module.startsWith('file:') && URL.canParse(module)) url = new URL(module);
  else if (typeof module === 'string' && module.length > 0 && !module.startsWith('file:')) url = pathToFileURL(isAbsolute(module) ? module : resolve(module));
  else throw new InvalidOptionError(name, 'a module path, a file: URL, or { module, export }', spec);
  if (url.protocol !== 'file:' || !existsSync(filePath(url))) {
    throw new InvalidOptionError(name, 'the path or file: URL of an existing module', module instanceof URL ? module.href : module);
  }
  return { url: url.href, exportName };
}

/** The path of a `file:` URL, or '' when it has none here (`file://host/…` on POSIX makes fileURLToPath throw). */
function filePath(url: URL): string {
  try {
    return fileURLToPath(url);
  } catch {
    return '';
  }
}

function resolveModules(key: string, value: unknown): Record<string, ModuleRef> {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidOptionError(key, 'an object mapping names to modules', value);
  }
  const out: Record<string, ModuleRef> = {};
  for (const [name, spec] of Object.entries(value)) {
    // `__proto__` as a key of the resolved map would set its prototype and silently drop the module.
    if (name.length === 0 || name === '_failed' || name === '__proto__') {
      throw new InvalidOptionError(`${key} name`, 'a non-empty name other than `_failed` and `__proto__`', name);
    }
    out[name] = resolveModuleRef(`${key}.${name}`, spec);
  }
  return out;
}

function object(key: string, value: unknown): Record<string, unknown> | undefined {
  if (value === undefined) return undefined;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new InvalidOptionError(key, 'an object', value);
  return value as Record<string, unknown>;
}

const knownKeys: readonly string[] = [
  'backend', 'threads', 'workers', 'schedulers', 'handlers', 'backoff', 'broker', 'dequeueTimeoutMs', 'syncLimitMs', 'maxPlanAttempts',
  'cancelGraceMs', 'idleTimeoutMs', 'tables', 'evaluatePlan', 'tickMs', 'claimTtlMs', 'resourceLimits', 'maxPayloadBytes',
  'logger', 'registry', 'clock',
];

/** What `broker` may set: the engine supplies the broker's clock, logger, registry, its known types and payload limit itself. */
const brokerKeys: readonly string[] = ['nackTimeoutMs', 'deliveryLimit', 'initialNackDelayMs', 'subsequentNackDelayMs', 'random'];

/** Validates `createEngine` options (typed errors naming the option) and fills in every default. */
export function resolveEngineOptions(options: unknown): ResolvedEngineOptions {
  const o = object('options', options ?? {})!;
  assertKnownKeys('', o, knownKeys);
  const broker = object('broker', o['broker']) ?? {};
  assertKnownKeys('broker', broker, brokerKeys);
  const d = engineDefaults;
  const backend = o['backend'] ?? memoryBackend();
  if (!isBackendFactory(backend)) {
    throw new InvalidOptionError('backend', 'a backend such as memoryBackend() (an object { name, create(context) })', backend);
  }
  const threads = resolveThreads(o['threads']);
  const workers = integer(o, 'workers', 1, 100_000, threads.max * d.workersPerThread);
  const tables = o['tables'] ?? [];
  if (!Array.isArray(tables) || tables.some((t) => typeof t !== 'string' || t.length === 0)) {
    throw new InvalidOptionError('tables', 'an array of non-empty table names', tables);
  }
  const evaluatePlan = o['evaluatePlan'];
  if (evaluatePlan !== undefined && typeof evaluatePlan !== 'function') {
    throw new InvalidOptionError('evaluatePlan', 'a function (state, plan) => rejected writes', evaluatePlan);
  }
  const logger = o['logger'] ?? createDefaultLogger();
  if (!isLogger(logger)) throw new InvalidOptionError('logger', 'a pino logger', logger);
  const registry = o['registry'] ?? new Registry();
  if (!isRegistry(registry)) throw new InvalidOptionError('registry', 'a prom-client Registry', registry);
  const clock = clockOption(o['clock']);
  const limits = object('resourceLimits', o['resourceLimits']);
  if (limits !== undefined) {
    for (const [k, v] of Object.entries(limits)) {
      const range = Object.hasOwn(resourceLimitRanges, k) ? resourceLimitRanges[k as keyof typeof resourceLimitRanges] : undefined;
      if (range === undefined) {
        throw new InvalidOptionError(`resourceLimits.${k}`, 'one of maxOldGenerationSizeMb, maxYoungGenerationSizeMb, codeRangeSizeMb, stackSizeMb', k);
      }
      if (typeof v !== 'number' || !(v > range.above) || !(v <= range.max)) {
        throw new InvalidOptionError(`resourceLimits.${k}`, `a number of MB above ${range.above} and at most ${range.max}`, v);
      }
    }
  }
  return {
    backend,
    threads,
    workers,
    schedulers: resolveModules('schedulers', o['schedulers']),
    handlers: resolveModules('handlers', o['handlers']),
    backoff: resolveBackoffOptions(o['backoff']),
    broker: broker as NonNullable<EngineOptions['broker']>,
    dequeueTimeoutMs: integer(o, 'dequeueTimeoutMs', 0, 3_600_000, d.dequeueTimeoutMs),
    syncLimitMs: integer(o, 'syncLimitMs', 1, 3_600_000, d.syncLimitMs),
    maxPlanAttempts: integer(o, 'maxPlanAttempts', 1, 1000, d.maxPlanAttempts),
    cancelGraceMs: integer(o, 'cancelGraceMs', 0, 3_600_000, d.cancelGraceMs),
    idleTimeoutMs: integer(o, 'idleTimeoutMs', 1, 86_400_000, d.idleTimeoutMs),
    tables: tables as string[],
    evaluatePlan: evaluatePlan as EvaluatePlan | undefined,
    tickMs: integer(o, 'tickMs', 1, 86_400_000, d.tickMs),
    claimTtlMs: integer(o, 'claimTtlMs', 100, 3_600_000, d.claimTtlMs),
    resourceLimits: limits as ResourceLimits | undefined,
    maxPayloadBytes: integer(o, 'maxPayloadBytes', 1, 2 ** 31 - 1, d.maxPayloadBytes),
    logger,
    registry,
    clock,
  };
}
