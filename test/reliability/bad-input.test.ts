/**
 * Bad input: fast-check drives every public entry point with arbitrary values — `createEngine` options,
 * `engine.enqueue`, `claimTask`/`tasks.add` (tasks, metas, `cron` and `every` strings, time zones), the schedule
 * parsers, ack/nack/fail/heartbeat with wrong tokens, plans with unknown tables (submitted directly and returned by a
 * scheduler), the task API (`forceRun`, `retryRun`, `releaseTask`, `remove`), `cancel`, `stop` and the read-only
 * lookups. Each call either succeeds or throws (or rejects with) a `TickpoolError` whose `code` is documented in the
 * README; afterwards the engine still serves evaluations, plans and task runs, and the broker's counts balance.
 *
 * Seeded: fast-check's seed is printed (set TICKPOOL_SEED to replay). Time is a ManualClock, so nothing here
 * depends on how fast the machine is.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { inspect } from 'node:util';
import fc from 'fast-check';
import { ManualClock } from '../../src/clock.js';
import { createEngine, type Engine } from '../../src/engine/engine.js';
import { TickpoolError } from '../../src/errors.js';
import { EvalBroker } from '../../src/broker/eval-broker.js';
import { parseEvery, parseSchedule } from '../../src/tasks/schedule/index.js';
import { SlotState } from '../../src/slots/slot-layout.js';
import { taskSchedulerOf } from '../../src/engine/engine-tasks.js';
import { Gate, newGate, set } from '../fixtures/gates.js';
import { acks, created, evaluation, finished, fixture, fixturePath, logger, started, turns } from './helpers.js';

const SEED = process.env['TICKPOOL_SEED'] === undefined ? (Date.now() * 7919) % 2 ** 31 : Number(process.env['TICKPOOL_SEED']);
console.log(`# bad input: fast-check seed ${SEED} (replay with TICKPOOL_SEED=${SEED})`);
const params = <T>(numRuns: number): fc.Parameters<T> => ({ seed: SEED, numRuns, endOnFailure: true });

// The README's errors table: the documented codes.
const readme = readFileSync(new URL('../../../README.md', import.meta.url), 'utf8');
const errorsSection = readme.slice(readme.indexOf('\n## Errors\n'), readme.indexOf('\n## ', readme.indexOf('\n## Errors\n') + 1));
const DOCUMENTED = new Set([...errorsSection.matchAll(/^\| `(ERR_[A-Z_]+)` \|/gm)].map((m) => m[1]!));
assert.ok(DOCUMENTED.size >= 25, 'the README documents the error codes');

/** Any value, for messages (JSON cannot show BigInt, symbols or cycles). */
const show = (value: unknown): string => inspect(value, { depth: 3, breakLength: Infinity });

/** The error is a TickpoolError with a documented code; returns the code. */
function typed(error: unknown, what: string): string {
  if (!(error instanceof TickpoolError)) {
    assert.fail(`${what} threw a ${(error as Error)?.constructor?.name ?? typeof error}, not a TickpoolError: ${(error as Error)?.stack ?? String(error)}`);
  }
  assert.ok(DOCUMENTED.has(error.code), `${what} threw ${error.code}, which the README does not document`);
  return error.code;
}

/** What each entry point answered: `ok` or the error code, counted (printed as diagnostics). */
const tally = new Map<string, Map<string, number>>();
function count(what: string, outcome: string): void {
  const byOutcome = tally.get(what) ?? new Map<string, number>();
  tally.set(what, byOutcome);
  byOutcome.set(outcome, (byOutcome.get(outcome) ?? 0) + 1);
}
after(() => {
  for (const [what, byOutcome] of tally) console.log(`# ${what}: ${JSON.stringify(Object.fromEntries(byOutcome))}`);
});

/** Calls `fn`: it returns, or throws a typed error (returned as its code). A returned promise is awaited too. */
async function attempt(what: string, fn: () => unknown): Promise<{ ok: true; value: unknown } | { ok: false; code: string }> {
  try {
    const value = await fn();
    count(what, 'ok');
    return { ok: true, value };
  } catch (error) {
    const code = typed(error, what);
    count(what, code);
    return { ok: false, code };
  }
}

const T0 = Date.UTC(2026, 2, 8, 6, 0, 0); // a DST change in New York is an hour ahead of the clock

// ── Arbitraries ─────────────────────────────────────────────────────────────────────────────────────────────────

const trickyKey = fc.oneof(fc.string(), fc.constantFrom('__proto__', 'constructor', 'toString', 'then', 'hasOwnProperty', 'valueOf'));
const anything = fc.anything({
  key: trickyKey,
  maxDepth: 2,
  withBigInt: true,
  withBoxedValues: true,
  withDate: true,
  withMap: true,
  withNullPrototype: true,
  withObjectString: true,
  withSet: true,
  withSparseArray: true,
  withTypedArray: true,
});
const oddNumber = fc.oneof(
  fc.constantFrom(0, -0, -1, 0.5, NaN, Infinity, -Infinity, 2 ** 31, 2 ** 53, Number.MAX_VALUE, Number.MIN_VALUE, 1e-300),
  fc.integer({ min: -10, max: 10 }),
  fc.double(),
);
/** Mostly plausible values of a field, sometimes anything at all (so that a record with a few fields often passes). */
const field = <T>(plausible: fc.Arbitrary<T>): fc.Arbitrary<unknown> => fc.oneof({ weight: 12, arbitrary: plausible }, { weight: 1, arbitrary: anything }, { weight: 1, arbitrary: oddNumber });

const noopPath = fixturePath('noop');
const moduleSpec = fc.oneof(
  fc.constantFrom(noopPath, pathToFileURL(noopPath).href, './nope.js', '', 'file:', 'file://[', 'file://host/x.js', 'file:///does/not/exist.js', 'http://example.com/x.js', 'node:fs', 'data:text/javascript,export default 1', '\0'),
  fc.constant(pathToFileURL(noopPath)),
  fc.constant(new URL('https://example.com/x.js')),
  fc.record({ module: fc.constantFrom<unknown>(noopPath, 'nope', 5, null), export: field(fc.constantFrom('default', 'nope', '')) }, { requiredKeys: [] }),
  anything,
);
const moduleMap = fc.oneof(fc.dictionary(trickyKey, moduleSpec, { maxKeys: 3 }), anything);
/** `threads` stays small when valid: a valid count starts that many threads. */
const threads = fc.oneof(fc.constantFrom(1, 2), fc.record({ min: field(fc.constantFrom(1, 2)), max: field(fc.constantFrom(1, 2, 3)) }, { requiredKeys: [] }), fc.constantFrom(0, -1, 1.5, 513, '2', null), anything);
/** What each option may be set to: plausible values, odd ones, and anything. */
const optionValues: Record<string, fc.Arbitrary<unknown>> = {
  threads,
  workers: fc.oneof(fc.constantFrom(1, 4), fc.constantFrom(0, -1, 1.5, 100_001, '4'), anything),
  schedulers: moduleMap,
  handlers: moduleMap,
  backoff: fc.oneof(fc.record({ baselineMs: field(fc.nat(100)), limitMs: field(fc.nat(1000)), jitter: field(fc.constantFrom('full', 'none', 'equal')) }, { requiredKeys: [] }), anything),
  broker: fc.oneof(
    fc.record({ nackTimeoutMs: field(fc.nat(1000)), deliveryLimit: field(fc.nat(5)), initialNackDelayMs: field(fc.nat(100)), subsequentNackDelayMs: field(fc.nat(100)), random: anything, clock: anything, bogus: anything }, { requiredKeys: [] }),
    anything,
  ),
  dequeueTimeoutMs: field(fc.nat(1000)),
  syncLimitMs: field(fc.nat(1000)),
  maxPlanAttempts: field(fc.nat(10)),
  cancelGraceMs: field(fc.nat(1000)),
  idleTimeoutMs: field(fc.nat(1000)),
  tables: fc.oneof(fc.array(fc.oneof(fc.string(), fc.constantFrom('__proto__', '')), { maxLength: 3 }), anything),
  evaluatePlan: fc.oneof(fc.constant(() => undefined), anything),
  tickMs: field(fc.nat(1000)),
  resourceLimits: fc.oneof(
    fc.dictionary(
      fc.constantFrom('maxOldGenerationSizeMb', 'maxYoungGenerationSizeMb', 'codeRangeSizeMb', 'stackSizeMb', 'heapMb'),
      fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 16, max: 256 }) }, { weight: 1, arbitrary: fc.constantFrom(0.1, 0.25, 0.5, 1, 2, 1024, 65_536, 1e9) }, { weight: 1, arbitrary: oddNumber }),
      { maxKeys: 2 },
    ),
    anything,
  ),
  maxPayloadBytes: field(fc.nat(1 << 20)),
  logger: fc.oneof(fc.constant(logger), anything),
  registry: anything,
  clock: fc.oneof(fc.constant(new ManualClock(0)), fc.record({ now: anything, setTimer: anything, clearTimer: anything }), anything),
  bogus: anything,
};
/** A valid base with one to three options set to generated values, or anything at all. */
const engineOptions = fc.oneof(
  { weight: 1, arbitrary: anything },
  {
    weight: 6,
    arbitrary: fc
      .uniqueArray(fc.constantFrom(...Object.keys(optionValues)), { minLength: 1, maxLength: 3 })
      .chain((keys) => fc.tuple(...keys.map((key) => optionValues[key]!.map((value) => [key, value] as const))))
      .map((entries) => ({ threads: 1, logger, schedulers: { service: noopPath }, ...Object.fromEntries(entries) })),
  },
);

const cronField = fc.oneof(
  fc.constantFrom('*', '*/5', '0', '59', '60', '99999', '-1', '1-5', '5-1', '1,2,3', '1-10/2', '?', 'L', 'W', '15W', 'LW', '5#3', '5L', 'H', 'H/5', 'JAN', 'MON', 'mon-fri', 'XYZ', '*/0', '', '**', '1/'),
  fc.string({ maxLength: 4 }),
);
const cron = fc.oneof(
  fc.array(cronField, { minLength: 3, maxLength: 7 }).map((fields) => fields.join(' ')),
  fc.constantFrom('0 0 30 2 *', '0 0 31 4 *', '* * * * * *', '@daily', '30 1 25-31 3 0', '0 0 29 2 1', ' 0  0 * * * ', '0 0 * * 8', '0 0 L * *'),
  fc.string({ maxLength: 20 }),
  anything,
);
const every = fc.oneof(
  fc.constantFrom('10s', '0s', '1h30m', '30m1h', '1.5s', '-1s', '1e3ms', '9999999999999999d', ' 1s', '1S', '1m1m', '', '1', 'ms', '1d1h1m1s1ms'),
  fc.string({ maxLength: 12 }),
  oddNumber,
  fc.integer({ min: 1, max: 10_000_000 }),
  anything,
);
const timezone = fc.oneof(fc.constantFrom('UTC', 'America/New_York', 'Europe/London', 'Asia/Kathmandu', 'Mars/Olympus', 'utc', 'Etc/GMT+14', '+05:00', 'EST5EDT', ''), fc.string({ maxLength: 12 }), anything);
const scheduleSpec = fc.record({ cron, every, timezone }, { requiredKeys: [] });

const TYPES = ['service', 'plan', 'gated'];
const type = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...TYPES) },
  { weight: 2, arbitrary: fc.constantFrom('nope', '_failed', '', '__proto__', 'constructor', 'toString', noopPath) },
  { weight: 1, arbitrary: anything },
);
const evaluationArb = fc.oneof(
  { weight: 1, arbitrary: anything },
  {
    weight: 6,
    arbitrary: fc.record(
      {
        id: field(fc.string({ minLength: 1, maxLength: 8 })),
        jobId: field(fc.string({ minLength: 1, maxLength: 3 })),
        namespace: field(fc.constantFrom('default', 'other', '__proto__')),
        type,
        priority: field(fc.integer({ min: 1, max: 100 })),
        modifyIndex: field(fc.nat(5)),
        createIndex: field(fc.nat(5)),
        triggeredBy: field(fc.string()),
        waitUntil: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: -1e6, max: 1e6 }).map((d) => T0 + d) }, { weight: 1, arbitrary: oddNumber }, { weight: 1, arbitrary: anything }),
        wait: fc.oneof({ weight: 4, arbitrary: fc.nat(2000) }, { weight: 1, arbitrary: oddNumber }, { weight: 1, arbitrary: anything }),
        payload: fc.oneof(
          { weight: 6, arbitrary: anything },
          { weight: 1, arbitrary: fc.string({ minLength: 300, maxLength: 600 }) },
          { weight: 1, arbitrary: fc.constantFrom<unknown>(() => 1, Symbol('s'), new WeakMap()) },
        ),
        bogus: anything,
      },
      { requiredKeys: ['id', 'jobId', 'type', 'priority'] },
    ),
  },
);

const write = fc.record(
  {
    table: fc.oneof(fc.constantFrom('nodes', 'jobs', '', '__proto__', 'constructor'), anything),
    key: field(fc.string({ minLength: 1, maxLength: 4 })),
    value: fc.oneof(anything, fc.constant(() => 1)),
    readIndex: field(fc.nat(3)),
    delete: field(fc.boolean()),
  },
  { requiredKeys: ['table', 'key', 'readIndex'] },
);
const plan = fc.oneof(
  { weight: 1, arbitrary: anything },
  { weight: 4, arbitrary: fc.record({ writes: fc.oneof(fc.array(write, { maxLength: 3 }), anything), priority: field(fc.integer({ min: 1, max: 100 })), allAtOnce: field(fc.boolean()), evalId: field(fc.string()) }, { requiredKeys: ['writes'] }) },
);

const validCron = fc.constantFrom('0 * * * *', '*/15 * * * *', '0 0 * * MON-FRI', '30 2 * * *', '0 1 * * *', '*/10 * * * * *', '0 0 1 * *');
const validEvery = fc.constantFrom<unknown>('1m', '10s', '1h30m', 60_000, 1000);
/** What each task field may be: plausible values (valid ones among them), odd ones, anything. */
const taskValues: Record<string, fc.Arbitrary<unknown>> = {
  id: field(fc.string({ minLength: 1, maxLength: 6 })),
  cron: fc.oneof(validCron, cron),
  every: fc.oneof(validEvery, every),
  offset: fc.oneof(fc.constantFrom('30s', '-5m', '0', '-0', '1h30m', '-', '5x'), oddNumber, fc.integer({ min: -120_000, max: 120_000 }), anything),
  timezone,
  maxConcurrency: field(fc.integer({ min: 1, max: 100 })),
  retry: field(fc.integer({ min: 0, max: 3 })),
  catchUp: field(fc.constantFrom('all', 'latest', 'none', 'some')),
  handler: field(fc.constantFrom('work', 'nope', '__proto__', 'constructor', noopPath)),
  payload: fc.oneof(anything, fc.constant(() => 1)),
  bogus: anything,
};
/** A valid task (cron or every) with one to three fields set to generated values, or anything at all. */
const task = fc.oneof(
  { weight: 1, arbitrary: anything },
  {
    weight: 8,
    arbitrary: fc
      .tuple(
        fc.oneof(validCron.map((c) => ({ cron: c })), validEvery.map((e) => ({ every: e }))),
        fc.uniqueArray(fc.constantFrom(...Object.keys(taskValues)), { minLength: 0, maxLength: 3 }),
        fc.string({ minLength: 1, maxLength: 6 }),
      )
      .chain(([schedule, keys, id]) =>
        fc.tuple(...keys.map((key) => taskValues[key]!.map((value) => [key, value] as const))).map((entries) => ({
          id,
          ...schedule,
          maxConcurrency: 2,
          handler: 'work',
          ...Object.fromEntries(entries),
        })),
      ),
  },
);
const meta = fc.oneof(fc.constant(undefined), fc.record({ latestCompleted: fc.oneof(fc.integer({ min: -3_600_000, max: 0 }).map((d) => T0 + d), oddNumber, anything) }, { requiredKeys: [] }), anything);

// ── The engine under test ───────────────────────────────────────────────────────────────────────────────────────

/** One engine for every property but the first: bad calls must not disturb it. */
async function target(): Promise<{ engine: Engine; clock: ManualClock }> {
  const clock = new ManualClock(T0);
  const engine = await started({
    clock,
    workers: 8,
    tables: ['nodes'],
    syncLimitMs: 50,
    maxPayloadBytes: 512,
    schedulers: { service: fixture('noop'), plan: fixture('plan-echo'), gated: fixture('gated') },
    handlers: { work: fixture('canary') },
    broker: { initialNackDelayMs: 0, subsequentNackDelayMs: 0 },
  });
  return { engine, clock };
}

/**
 * Waits until nothing is ready, unacked or pending. Evaluations of registered types settle by themselves (each step
 * is an event); one of an unregistered type is failed at enqueue. When only delayed work is left, time moves on by
 * DRAIN_STEP_MS on the (manual) clock.
 */
/** How far `drained` moves the manual clock while only delayed work is left. */
const DRAIN_STEP_MS = 500;

async function drained(engine: Engine, clock: ManualClock): Promise<void> {
  const registered = new Set(Object.keys(engine.options.schedulers));
  const busy = (): boolean => {
    const s = engine.broker.stats();
    const ready = Object.entries(s.byScheduler).some(([queue, q]) => registered.has(queue) && q.ready > 0);
    return ready || s.totalUnacked > 0;
  };
  for (let round = 0; ; round++) {
    await new Promise<void>((resolve) => {
      const offs: Array<() => void> = [];
      const check = (): void => {
        if (busy()) return;
        offs.forEach((off) => off());
        resolve();
      };
      for (const name of ['broker:ack', 'broker:failed', 'broker:nack', 'broker:cancelable'] as const) offs.push(engine.broker.events.on(name, check));
      check();
    });
    const s = engine.broker.stats();
    if (s.totalReady + s.totalPending === 0) return;
    assert.ok(round < 1000, `the broker does not drain: ${JSON.stringify(s)}`);
    clock.advance(DRAIN_STEP_MS);
    await turns(1);
  }
}

/** The engine still serves: evaluations are acked, a plan commits, a task runs; nothing is stuck in the broker. */
async function serves(engine: Engine, clock: ManualClock, tag: string): Promise<void> {
  const done = acks(engine, 6, (id) => id.startsWith(`${tag}-`));
  for (let i = 0; i < 5; i++) engine.enqueue(evaluation(`${tag}-${i}`, 'service'));
  const index = engine.state.index;
  const record = engine.state.snapshot().get('nodes', tag);
  engine.enqueue(
    evaluation(`${tag}-plan`, 'plan', { plan: { writes: [{ table: 'nodes', key: tag, value: { tag }, readIndex: record?.modifyIndex ?? 0 }] } }, { modifyIndex: index }),
  );
  assert.equal((await done).length, 6, `${tag}: evaluations are acked`);
  assert.deepEqual(engine.state.snapshot().get<{ tag: string }>('nodes', tag)?.value, { tag }, `${tag}: the plan committed`);
  const taskId = `${tag}-task`;
  const gate = newGate();
  engine.tasks.add({ id: taskId, every: '1h', maxConcurrency: 1, handler: 'work', payload: { gate } });
  const ran = finished(engine, 1, taskId);
  await engine.tasks.forceRun(taskId);
  assert.equal((await ran)[0]?.status, 'success', `${tag}: a task runs`);
  assert.equal(Atomics.load(gate, Gate.CALLS), 1);
  await engine.tasks.remove(taskId);
  await drained(engine, clock);
}

// ── Properties ──────────────────────────────────────────────────────────────────────────────────────────────────

test('createEngine: arbitrary options give an engine or a typed error; a valid engine starts (or fails to, typed) and stops', { timeout: 120_000 }, async () => {
  let valid = 0;
  await fc.assert(
    fc.asyncProperty(engineOptions, async (options) => {
      const made = await attempt('createEngine', () => createEngine(options as Parameters<typeof createEngine>[0]));
      if (!made.ok) return;
      valid++;
      const engine = made.value as Engine;
      // It starts, or fails to start with a typed error (threads that cannot boot within tiny resource limits).
      await attempt('engine.start', () => engine.start());
      await engine.stop({ graceMs: 100 });
      assert.equal(engine.status, 'stopped');
    }),
    params(150),
  );
  const engine = created({ schedulers: { service: fixture('noop') } });
  await engine.start();
  const done = acks(engine, 3);
  for (let i = 0; i < 3; i++) engine.enqueue(evaluation(`ok${i}`, 'service'));
  assert.equal((await done).length, 3, 'an engine created after all that serves');
  assert.ok(valid > 0, 'some options were valid');
});

test('names that are Object.prototype members: refused as module names, counted like any other queue by the broker', async () => {
  const noop = pathToFileURL(noopPath).href;
  // A JSON config can hold an own `__proto__` key; as a plain-object key it would replace the prototype instead.
  assert.throws(() => createEngine({ logger, schedulers: JSON.parse(`{"__proto__": "${noop}"}`) as Record<string, string> }), { code: 'ERR_INVALID_OPTION' });
  assert.throws(() => createEngine({ logger, handlers: JSON.parse(`{"__proto__": "${noop}"}`) as Record<string, string> }), { code: 'ERR_INVALID_OPTION' });
  fc.assert(
    fc.property(fc.array(fc.tuple(trickyKey.filter((t) => t.length > 0 && t !== '_failed'), fc.integer({ min: 1, max: 100 })), { maxLength: 20 }), (evaluations) => {
      const broker = new EvalBroker({ logger });
      evaluations.forEach(([type, priority], i) => broker.enqueue({ id: `e${i}`, jobId: `j${i}`, type, priority }));
      const stats = broker.stats();
      const counted = Object.values(stats.byScheduler).reduce((n, q) => n + q.ready, 0);
      assert.equal(counted, stats.totalReady, `byScheduler adds up to totalReady: ${show(stats)}`);
      for (const [type] of evaluations) assert.ok(Object.hasOwn(stats.byScheduler, type), `queue ${type} is listed`);
      assert.equal(Object.getPrototypeOf(stats.byScheduler), Object.prototype);
      broker.setEnabled(false);
    }),
    params(200),
  );
});

test('the schedule parsers: arbitrary cron/every/timezone specs parse or throw typed errors, and parsed schedules answer', async () => {
  fc.assert(
    fc.property(scheduleSpec, oddNumber, (spec, after) => {
      let schedule;
      try {
        schedule = parseSchedule(spec as Parameters<typeof parseSchedule>[0]);
      } catch (error) {
        typed(error, `parseSchedule(${show(spec)})`);
        return;
      }
      for (const at of [T0, after]) {
        try {
          const next = schedule.next(at);
          assert.ok(next > at || next === Infinity || !Number.isFinite(at), `next(${at}) = ${next}`);
          const to = at + 86_400_000;
          const between = schedule.between(at, to, 5);
          assert.ok(between.length <= 5);
          between.forEach((time, i) => {
            assert.ok(time > (i === 0 ? at : between[i - 1]!) && time <= to, `between(${at}, ${to}) is strictly ascending within its range: ${between}`);
          });
        } catch (error) {
          typed(error, `schedule ${schedule.key}.next(${at})`);
        }
      }
    }),
    params(2000),
  );
  fc.assert(
    fc.property(every, (value) => {
      try {
        const ms = parseEvery(value);
        assert.ok(Number.isSafeInteger(ms) && ms > 0);
      } catch (error) {
        typed(error, `parseEvery(${show(value)})`);
      }
    }),
    params(1000),
  );
});

test('enqueue, plans, tokens, tasks and the rest: arbitrary calls succeed or throw typed errors; the engine keeps serving', { timeout: 150_000 }, async (t) => {
  const { engine, clock } = await target();
  const accepted = new Set<string>();
  const settled = new Set<string>();
  engine.broker.events.on('broker:enqueue', ({ evaluation: e }) => accepted.add(e.id));
  engine.broker.events.on('broker:ack', ({ evaluation: e }) => settled.add(e.id));
  engine.broker.events.on('broker:failed', ({ evaluation: e }) => settled.add(e.id));
  engine.broker.events.on('broker:cancelable', ({ evaluations }) => evaluations.forEach((e) => settled.add(e.id)));

  await t.test('enqueue', async () => {
    await fc.assert(
      fc.asyncProperty(evaluationArb, async (e) => {
        await attempt('enqueue', () => engine.enqueue(e as Parameters<Engine['enqueue']>[0]));
      }),
      params(400),
    );
    // The plausible delays pass; then every accepted evaluation is acked, failed, superseded or still waiting.
    clock.advance(2001);
    await drained(engine, clock);
    for (const id of accepted) assert.ok(settled.has(id) || engine.broker.inspect(id) !== undefined, `${id} was accepted and vanished`);
    const waiting = engine.broker.stats().totalWaiting;
    t.diagnostic(`enqueue: ${accepted.size} accepted, ${settled.size} settled, ${waiting} waiting for a far-off time`);
    await serves(engine, clock, 'enqueue');
  });

  await t.test('plans: submitted directly and returned by a scheduler', async () => {
    let committed = 0;
    await fc.assert(
      fc.asyncProperty(plan, async (p) => {
        const before = engine.state.index;
        const result = await attempt('plans.submit', () => engine.plans.submit(p as Parameters<Engine['plans']['submit']>[0]));
        if (result.ok) committed++;
        else assert.equal(engine.state.index, before, 'a refused plan commits nothing');
      }),
      params(300),
    );
    // The same plans returned by a scheduler: the evaluation is acked or dead-lettered with a documented reason.
    const plans = fc.sample(plan, { seed: SEED, numRuns: 60 });
    const outcomes = new Map<string, string>();
    const done = new Promise<void>((resolve) => {
      const record = (id: string, outcome: string): void => {
        if (!id.startsWith('p-')) return;
        outcomes.set(id, outcome);
        if (outcomes.size === plans.length) resolve();
      };
      engine.broker.events.on('broker:ack', ({ evaluation: e }) => record(e.id, 'acked'));
      engine.broker.events.on('broker:failed', ({ evaluation: e, reason }) => {
        record(e.id, typed(reason, `failed reason of ${e.id}`));
        const cause = (reason as { cause?: unknown }).cause;
        if (cause !== undefined) typed(cause, `cause of ${e.id}'s failure`);
      });
    });
    let refused = 0;
    for (const [i, p] of plans.entries()) {
      // A plan that cannot be cloned cannot travel in a payload either: refused at enqueue.
      const queued = await attempt('enqueue of a plan', () => engine.enqueue(evaluation(`p-${i}`, 'plan', { plan: p }, { modifyIndex: engine.state.index })));
      if (!queued.ok) {
        refused++;
        outcomes.set(`p-${i}`, `refused: ${queued.code}`);
      }
    }
    if (outcomes.size < plans.length) await done;
    t.diagnostic(`plans: ${refused} refused at enqueue`);
    t.diagnostic(`plans: ${committed} committed directly; from schedulers ${JSON.stringify(Object.fromEntries([...new Set(outcomes.values())].map((o) => [o, [...outcomes.values()].filter((x) => x === o).length])))}`);
    await serves(engine, clock, 'plans');
  });

  await t.test('ack, nack, fail and heartbeats with wrong tokens', async () => {
    // Four evaluations held by workers (their schedulers wait on a gate), and one acked earlier.
    const gate = newGate();
    const tokens = new Map<string, string>();
    engine.broker.events.on('broker:dequeue', ({ evaluation: e, token }) => tokens.set(e.id, token));
    const old = acks(engine, 1);
    engine.enqueue(evaluation('done-1', 'service'));
    await old;
    for (let i = 0; i < 4; i++) engine.enqueue(evaluation(`held-${i}`, 'gated', { gate }));
    await turns(); // dequeued by workers (outstanding), two of them running on the two threads
    const held = ['held-0', 'held-1', 'held-2', 'held-3'];
    const realTokens = held.map((id) => engine.broker.outstanding(id));
    assert.ok(realTokens.every((tok) => tok !== undefined));
    const ids = fc.oneof(fc.constantFrom(...held, 'done-1', 'never', ''), anything);
    const token = fc.oneof(fc.constantFrom(tokens.get('done-1')!, '', 'x', `${realTokens[0]!}x`, realTokens[0]!.slice(0, -1)), fc.string(), anything);
    const op = fc.constantFrom('ack', 'nack', 'fail', 'outstandingReset', 'pauseNackTimeout', 'resumeNackTimeout');
    await fc.assert(
      fc.asyncProperty(op, ids, token, anything, async (name, id, tok, reason) => {
        const broker = engine.broker as unknown as Record<string, (...args: unknown[]) => unknown>;
        const result = await attempt(`broker.${name}`, () => broker[name]!.call(engine.broker, id, tok, reason));
        assert.equal(result.ok, false, `broker.${name}(${show(id)}, ${show(tok)}) succeeded with a wrong token`);
      }),
      params(400),
    );
    // The deliveries in hand are untouched: same tokens, still outstanding; released, they are acked.
    assert.deepEqual(held.map((id) => engine.broker.outstanding(id)), realTokens);
    const released = acks(engine, 4, (id) => id.startsWith('held-'));
    set(gate, Gate.RELEASE, 1);
    assert.equal((await released).length, 4);
    await serves(engine, clock, 'tokens');
  });

  await t.test('claimTask, tasks.add and the task API', async () => {
    const claimed = new Set<string>();
    await fc.assert(
      fc.asyncProperty(task, meta, fc.boolean(), fc.nat(120_000), async (tk, m, direct, advance) => {
        // Arbitrary values past the `TaskInput` type: what is tested is the run-time check behind it.
        const added = await attempt('tasks.add/claimTask', () => (direct ? taskSchedulerOf(engine.tasks).claimTask(tk, m) : engine.tasks.add(tk as never, m as never)));
        const id = (tk as { id?: unknown } | null | undefined)?.id;
        if (added.ok && typeof id === 'string') claimed.add(id);
        clock.advance(advance);
        for (const taskId of claimed) await engine.tasks.remove(taskId);
        claimed.clear();
      }),
      params(300),
    );
    for (let i = 0; i < 3; i++) {
      engine.tasks.add({ id: `api-${i}`, every: '1m', maxConcurrency: 2, handler: 'work' });
      claimed.add(`api-${i}`);
    }
    const other = fc.oneof(fc.constantFrom(...claimed, 'never'), anything);
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('forceRun', 'retryRun', 'releaseTask', 'remove', 'taskStats', 'runLog.runs', 'runLog.findRun'), other, anything, async (name, a, b) => {
        const call = (): unknown => {
          switch (name) {
            case 'forceRun':
              return engine.tasks.forceRun(a as string, b as number);
            case 'retryRun':
              return engine.tasks.retryRun(a as string, b as string);
            case 'releaseTask':
              return taskSchedulerOf(engine.tasks).releaseTask(a as string);
            case 'remove':
              return engine.tasks.remove(a as string);
            case 'taskStats':
              return engine.tasks.taskStats(a as string);
            case 'runLog.runs':
              return engine.tasks.runLog.runs(a as string);
            default:
              return engine.tasks.runLog.findRun(a as string, b as string);
          }
        };
        const result = await attempt(`tasks.${name}`, call);
        if (result.ok && (name === 'releaseTask' || name === 'remove')) claimed.delete(a as string);
      }),
      params(300),
    );
    for (const taskId of claimed) if (engine.tasks.taskStats(taskId)?.state === 'claimed') await engine.tasks.remove(taskId);
    await taskSchedulerOf(engine.tasks).stop();
    taskSchedulerOf(engine.tasks).start();
    const stats = engine.stats().tasks;
    assert.equal(stats.runsActive, 0);
    assert.equal(stats.slotsBusy, 0);
    await serves(engine, clock, 'tasks');
  });

  await t.test('cancel, stop options and lookups', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('cancel', 'inspect', 'failedReason', 'outstanding', 'drainCancelable', 'tryDequeue', 'dequeue'), anything, anything, async (name, a, b) => {
        const call = (): unknown => {
          switch (name) {
            case 'cancel':
              return engine.cancel(a as string);
            case 'inspect':
              return engine.broker.inspect(a as string);
            case 'failedReason':
              return engine.broker.failedReason(a as string);
            case 'outstanding':
              return engine.broker.outstanding(a as string);
            case 'drainCancelable':
              return engine.broker.drainCancelable();
            // A malformed dequeue only: a well-formed one would take work from the workers.
            case 'tryDequeue':
              return Array.isArray(a) ? undefined : engine.broker.tryDequeue(a as string[]);
            default:
              return Array.isArray(a) ? undefined : engine.broker.dequeue(a as string[], b as number);
          }
        };
        await attempt(`engine.${name}`, call);
      }),
      params(300),
    );
    // stop() with bad options is refused and leaves the engine running.
    await fc.assert(
      fc.asyncProperty(
        fc
          .oneof(fc.constant(null), fc.record({ graceMs: fc.oneof(fc.constantFrom(-1, NaN, '100', null, -Infinity), anything) }), fc.string(), fc.integer())
          // Leave out what is valid (an object whose graceMs is absent or a number >= 0): that would stop the engine.
          .filter((o) => !(o !== null && typeof o === 'object' && (o.graceMs === undefined || (typeof o.graceMs === 'number' && o.graceMs >= 0)))),
        async (options) => {
          const result = await attempt('stop', () => engine.stop(options as Parameters<Engine['stop']>[0]));
          if (result.ok) assert.fail(`stop(${show(options)}) was accepted`);
        },
      ),
      params(100),
    );
    assert.equal(engine.status, 'running');
    await serves(engine, clock, 'stop');
  });

  for (let slot = 0; slot < engine.slots.capacity; slot++) assert.equal(engine.slots.state(slot), SlotState.IDLE, `slot ${slot} is idle`);
});
