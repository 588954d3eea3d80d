import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Registry } from 'prom-client';
import { EvalBroker } from '../../src/broker/eval-broker.js';
import { FAILED_QUEUE, type Evaluation, type EvaluationState } from '../../src/broker/evaluation.js';
import type { OutcomeHandle } from '../../src/broker/outcome-waiters.js';
import { ManualClock } from '../../src/clock.js';
import { TickpoolError } from '../../src/errors.js';
import { silentLogger } from './helpers.js';

/**
 * Random operation sequences against the broker and a model of what the caller can know: which evaluations it
 * handed in and has not got back (live), which token is current for each (from dequeue results, acks/nacks, and
 * the deadlines a ManualClock makes predictable), and how many scheduler deliveries each had.
 *
 * After every step: conservation (live in the model ⇔ the broker holds it, in exactly one state, and the stats
 * agree), at most one ready-or-unacked per job in the scheduler queues, pending only behind a slot holder,
 * outstanding() equals the model's current token, deliveries equal the model's and never exceed the limit.
 * On every ack: accepted exactly when the model says the token is current (so never with a stale one).
 *
 * Waiting dequeues (`dequeueWith`) are served from inside whatever call makes work available, including an enqueue
 * that hands its evaluation straight to the waiter. Each is answered once, with an evaluation of a type it asked for
 * that no ready one of its types outranks, never while an earlier waiter for that type still waits; and after
 * every step no waiter waits while an evaluation it accepts is ready (unless the broker is paused). A callback may
 * ack, nack or pause the deadline of its delivery before returning: the nack deadline must then match the model.
 *
 * Outcomes: an evaluation's handle is settled exactly when the caller can no longer get another outcome for it (it
 * left the broker, or sits failed or cancelable), and `remove` takes any held evaluation out (one in flight only
 * with its current token).
 */

const NACK_TIMEOUT = 10_000;
const LIMIT = 3;
const IDS = 10;
const TYPES = ['a', 'b'] as const;
const PRIORITIES = [10, 50, 90] as const;
const ERROR_CODES = new Set(['ERR_EVAL_NOT_OUTSTANDING', 'ERR_TOKEN_MISMATCH', 'ERR_NACK_TIMEOUT_REACHED']);

type Op =
  | { readonly k: 'enqueue'; readonly id: number; readonly job: number; readonly ns: boolean; readonly type: number; readonly prio: number; readonly delay: number }
  | { readonly k: 'dequeue'; readonly mask: number }
  | { readonly k: 'ack'; readonly pick: number; readonly stale: boolean }
  | { readonly k: 'nack'; readonly pick: number; readonly reason: boolean }
  | { readonly k: 'fail'; readonly pick: number }
  | { readonly k: 'remove'; readonly id: number; readonly withToken: boolean }
  | { readonly k: 'reset' | 'pauseNack' | 'resumeNack'; readonly pick: number }
  | { readonly k: 'advance'; readonly ms: number }
  | { readonly k: 'wait'; readonly mask: number; readonly timeout: number; readonly then: 'keep' | 'ack' | 'nack' | 'pauseNack' }
  | { readonly k: 'drain' | 'pause' | 'resume' | 'flush' };

const pick = fc.nat(50);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ k: fc.constant('enqueue' as const), id: fc.nat(IDS - 1), job: fc.nat(2), ns: fc.constantFrom(false, false, false, true), type: fc.nat(1), prio: fc.nat(2), delay: fc.constantFrom(0, 0, 0, 1500, 6000) }) },
  { weight: 6, arbitrary: fc.record({ k: fc.constant('dequeue' as const), mask: fc.integer({ min: 1, max: 7 }) }) },
  { weight: 4, arbitrary: fc.record({ k: fc.constant('ack' as const), pick, stale: fc.boolean() }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('nack' as const), pick, reason: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('fail' as const), pick }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('remove' as const), id: fc.nat(IDS - 1), withToken: fc.constantFrom(true, true, false) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constantFrom('reset' as const, 'pauseNack' as const, 'resumeNack' as const), pick }) },
  { weight: 4, arbitrary: fc.record({ k: fc.constant('advance' as const), ms: fc.constantFrom(0, 500, 1000, 4000, 10_000, 25_000) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constantFrom('drain' as const, 'pause' as const, 'resume' as const) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('flush' as const) }) },
  {
    weight: 5,
    arbitrary: fc.record({
      k: fc.constant('wait' as const),
      mask: fc.integer({ min: 1, max: 7 }),
      timeout: fc.constantFrom(0, 0, 3000),
      then: fc.constantFrom('keep' as const, 'keep' as const, 'ack' as const, 'nack' as const, 'pauseNack' as const),
    }),
  },
);

interface ModelWaiter {
  readonly types: readonly string[];
  answered: boolean;
}

interface ModelEval {
  live: boolean;
  jobKey: string;
  priority: number;
  current: string | undefined;
  deadline: number;
  nackPaused: boolean;
  deliveries: number;
  tokens: string[];
  /** The handle of its latest enqueue. */
  handle: OutcomeHandle | undefined;
}

const registry = new Registry();

function run(ops: readonly Op[]): void {
  const clock = new ManualClock(0);
  const broker = new EvalBroker({
    clock,
    logger: silentLogger,
    registry,
    nackTimeoutMs: NACK_TIMEOUT,
    deliveryLimit: LIMIT,
    initialNackDelayMs: 1000,
    subsequentNackDelayMs: 4000,
    random: () => 0.5,
  });
  const model: ModelEval[] = Array.from({ length: IDS }, () => ({
    live: false,
    jobKey: '',
    priority: 0,
    current: undefined,
    deadline: 0,
    nackPaused: false,
    deliveries: 0,
    tokens: [],
    handle: undefined,
  }));
  let paused = false;
  const waiters: ModelWaiter[] = [];
  const callbackFailures: unknown[] = [];
  const id = (i: number): string => `e${i}`;
  const readyQueueOf = (i: number): string | undefined => {
    const info = broker.inspect(id(i));
    return info !== undefined && (info.state === 'ready' || info.state === 'failed') ? info.queue : undefined;
  };

  /** What the model learns from a delivery, whoever made it (a dequeue, or a waiter's callback). */
  const delivered = (i: number, token: string, step: string): void => {
    const m = model[i]!;
    // A deadline that fired during a clock advance, before this redelivery in the same advance.
    if (m.current !== undefined && !m.nackPaused && m.deadline <= clock.now()) m.current = undefined;
    assert.ok(m.live && m.current === undefined, `${step}: delivered a live, not outstanding evaluation`);
    assert.ok(!m.tokens.includes(token), `${step}: a fresh token`);
    m.current = token;
    m.tokens.push(token);
    m.deadline = clock.now() + NACK_TIMEOUT;
    m.nackPaused = false;
    if (broker.inspect(id(i))!.queue !== FAILED_QUEUE) m.deliveries++;
  };
  const outstanding = (): number[] => model.flatMap((m, i) => (m.current !== undefined ? [i] : []));

  const check = (step: string): void => {
    if (callbackFailures.length > 0) throw callbackFailures[0];
    const counts: Record<EvaluationState, number> = { ready: 0, pending: 0, unacked: 0, waiting: 0, failed: 0, cancelable: 0 };
    const slotUsers = new Map<string, number>();
    const pendingJobs = new Set<string>();
    const holders = new Set<string>();
    let live = 0;
    model.forEach((m, i) => {
      const info = broker.inspect(id(i));
      assert.equal(info !== undefined, m.live, `${step}: ${id(i)} live in model ⇔ held by broker`);
      assert.equal(broker.outstanding(id(i)), m.current, `${step}: ${id(i)} current token`);
      if (m.handle !== undefined) {
        const open = info !== undefined && info.state !== 'failed' && info.state !== 'cancelable' && info.queue !== FAILED_QUEUE;
        assert.equal(m.handle.settled, !open, `${step}: ${id(i)} outcome settled ⇔ it can have no other`);
      }
      if (info === undefined) return;
      live++;
      counts[info.state]++;
      assert.equal(info.deliveries, m.deliveries, `${step}: ${id(i)} deliveries`);
      assert.ok(info.deliveries <= LIMIT, `${step}: ${id(i)} delivered ${info.deliveries} > ${LIMIT}`);
      const inSchedulerQueue = info.queue !== undefined && info.queue !== FAILED_QUEUE;
      if ((info.state === 'ready' || info.state === 'unacked') && inSchedulerQueue) slotUsers.set(m.jobKey, (slotUsers.get(m.jobKey) ?? 0) + 1);
      if (info.state === 'pending') pendingJobs.add(m.jobKey);
      if (info.holdsJobSlot) {
        assert.ok(!holders.has(m.jobKey), `${step}: two slot holders for ${m.jobKey}`);
        holders.add(m.jobKey);
        assert.ok(info.queue !== FAILED_QUEUE, `${step}: a _failed evaluation holds a slot`);
      }
    });
    for (const [job, n] of slotUsers) assert.ok(n <= 1, `${step}: ${n} ready-or-unacked for ${job}`);
    for (const job of pendingJobs) assert.ok(holders.has(job), `${step}: ${job} has pending evaluations but no holder`);
    const stats = broker.stats();
    assert.deepEqual(
      [stats.totalReady, stats.totalPending, stats.totalUnacked, stats.totalWaiting, stats.totalFailed, stats.totalCancelable],
      [counts.ready, counts.pending, counts.unacked, counts.waiting, counts.failed, counts.cancelable],
      `${step}: stats agree with the states`,
    );
    assert.equal(stats.totalReady + stats.totalPending + stats.totalUnacked + stats.totalWaiting + stats.totalFailed + stats.totalCancelable, live);
    if (!paused) {
      for (const [w, waiter] of waiters.entries()) {
        if (waiter.answered) continue;
        model.forEach((_, i) => {
          const q = readyQueueOf(i);
          assert.ok(q === undefined || !waiter.types.includes(q), `${step}: waiter ${w} waits while ${id(i)} (${q}) is ready`);
        });
      }
    }
  };

  const expectRefused = (fn: () => void, step: string): void => {
    assert.throws(fn, (e: unknown) => e instanceof TickpoolError && ERROR_CODES.has(e.code), step);
  };

  for (const [n, op] of ops.entries()) {
    const step = `#${n} ${JSON.stringify(op)}`;
    switch (op.k) {
      case 'enqueue': {
        const m = model[op.id]!;
        const evaluation: Evaluation = {
          id: id(op.id),
          jobId: `j${op.job}`,
          type: TYPES[op.type]!,
          priority: PRIORITIES[op.prio]!,
          ...(op.ns ? { namespace: 'other' } : {}),
          ...(op.delay > 0 ? { wait: op.delay } : {}),
        };
        const before = broker.stats();
        const known = m.live;
        // Before the call: a waiting dequeue may be handed the evaluation inside it.
        if (!known) Object.assign(m, { live: true, jobKey: `${op.ns ? 'other' : 'default'}/j${op.job}`, priority: evaluation.priority, deliveries: 0, current: undefined });
        const handle = broker.enqueue(evaluation) as OutcomeHandle;
        if (known) {
          assert.deepEqual(broker.stats(), before, `${step}: a known id is a no-op`);
          assert.equal(handle.id, m.handle!.id, `${step}: a known id returns a handle of that evaluation`);
          assert.equal(handle.settled, m.handle!.settled, `${step}: … whose outcome is the same`);
        }
        m.handle = handle;
        break;
      }
      case 'dequeue': {
        const types = [...TYPES, FAILED_QUEUE].filter((_, bit) => (op.mask & (1 << bit)) !== 0);
        // The best ready priority the caller could be given, from the broker's own states.
        let best = 0;
        model.forEach((m, i) => {
          const info = broker.inspect(id(i));
          if (info !== undefined && (info.state === 'ready' || info.state === 'failed') && types.includes(info.queue!)) best = Math.max(best, m.priority);
        });
        const d = broker.tryDequeue(types);
        if (paused || best === 0) {
          assert.equal(d, undefined, `${step}: nothing to hand out`);
          break;
        }
        assert.ok(d !== undefined, `${step}: something was ready`);
        const i = Number(d.evaluation.id.slice(1));
        assert.equal(model[i]!.priority, best, `${step}: the highest ready priority across the types`);
        delivered(i, d.token, step);
        break;
      }
      case 'wait': {
        const waiter: ModelWaiter = { types: [...TYPES, FAILED_QUEUE].filter((_, bit) => (op.mask & (1 << bit)) !== 0), answered: false };
        const at = waiters.push(waiter) - 1;
        const onAnswer = (error: Error | undefined, delivery: { evaluation: Evaluation; token: string } | undefined): void => {
          const where = `${step} (waiter ${at}, answered inside a later call)`;
          assert.ok(!waiter.answered, `${where}: answered once`);
          waiter.answered = true;
          if (error !== undefined || delivery === undefined) return; // timeout, or the broker was disabled
          const i = Number(delivery.evaluation.id.slice(1));
          const queue = broker.inspect(id(i))!.queue!;
          assert.ok(waiter.types.includes(queue), `${where}: a type it asked for`);
          model.forEach((other, j) => {
            const q = readyQueueOf(j);
            if (j !== i && q !== undefined && waiter.types.includes(q)) assert.ok(other.priority <= model[i]!.priority, `${where}: ${id(j)} outranks it`);
          });
          for (const earlier of waiters.slice(0, at)) {
            assert.ok(earlier.answered || !earlier.types.includes(queue), `${where}: an earlier waiter for ${queue} still waits`);
          }
          delivered(i, delivery.token, where);
          const m = model[i]!;
          if (op.then === 'ack') {
            m.live = false;
            m.current = undefined;
            broker.ack(delivery.evaluation.id, delivery.token);
          } else if (op.then === 'nack') {
            m.current = undefined;
            broker.nack(delivery.evaluation.id, delivery.token);
          } else if (op.then === 'pauseNack') {
            m.nackPaused = true;
            broker.pauseNackTimeout(delivery.evaluation.id, delivery.token);
          }
        };
        // The broker catches and logs what a callback throws: failures are collected and asserted after each step.
        broker.dequeueWith(waiter.types, op.timeout, undefined, (error, delivery) => {
          try {
            onAnswer(error, delivery);
          } catch (failure) {
            callbackFailures.push(failure);
          }
        });
        break;
      }
      case 'ack':
      case 'nack':
      case 'fail': {
        const candidates = outstanding();
        if (op.k === 'ack' && (op.stale || candidates.length === 0)) {
          // A token that is not current: an old one of some evaluation, or one never issued.
          const i = op.pick % IDS;
          const m = model[i]!;
          const stale = m.tokens.filter((t) => t !== m.current);
          const token = stale.length > 0 ? stale[op.pick % stale.length]! : 'never-issued';
          expectRefused(() => broker.ack(id(i), token), `${step}: stale token refused`);
          break;
        }
        if (candidates.length === 0) break;
        const i = candidates[op.pick % candidates.length]!;
        const m = model[i]!;
        const token = m.current!;
        // The model moves first: the call may hand this evaluation (or another) to a waiter before it returns.
        m.current = undefined;
        if (op.k === 'ack') {
          m.live = false;
          broker.ack(id(i), token);
        } else if (op.k === 'nack') {
          broker.nack(id(i), token, op.reason ? new Error('scheduler failed') : undefined);
        } else {
          broker.fail(id(i), token, new Error('no scheduler'));
          const state = broker.inspect(id(i))?.state;
          assert.ok(state === 'failed' || m.current !== undefined || !m.live, `${step}: failed, unless a waiter took it from _failed`);
        }
        expectRefused(() => broker.ack(id(i), token), `${step}: the finished delivery's token is refused`);
        break;
      }
      case 'remove': {
        const m = model[op.id]!;
        if (!m.live) {
          assert.equal(broker.remove(id(op.id)), false, `${step}: nothing to remove`);
          break;
        }
        if (m.current !== undefined && !op.withToken) {
          expectRefused(() => broker.remove(id(op.id)), `${step}: in flight, removed only with its token`);
          break;
        }
        const token = m.current;
        m.live = false;
        m.current = undefined;
        assert.equal(broker.remove(id(op.id), token), true, step);
        if (token !== undefined) expectRefused(() => broker.ack(id(op.id), token), `${step}: the removed delivery's token is refused`);
        break;
      }
      case 'reset':
      case 'pauseNack':
      case 'resumeNack': {
        const candidates = outstanding();
        if (candidates.length === 0) break;
        const i = candidates[op.pick % candidates.length]!;
        const m = model[i]!;
        if (op.k === 'reset') {
          broker.outstandingReset(id(i), m.current!);
          if (!m.nackPaused) m.deadline = clock.now() + NACK_TIMEOUT;
        } else if (op.k === 'pauseNack') {
          broker.pauseNackTimeout(id(i), m.current!);
          m.nackPaused = true;
        } else {
          broker.resumeNackTimeout(id(i), m.current!);
          m.nackPaused = false;
          m.deadline = clock.now() + NACK_TIMEOUT;
        }
        break;
      }
      case 'advance': {
        clock.advance(op.ms);
        for (const m of model) {
          if (m.current !== undefined && !m.nackPaused && m.deadline <= clock.now()) m.current = undefined;
        }
        break;
      }
      case 'drain': {
        for (const e of broker.drainCancelable()) {
          const m = model[Number(e.id.slice(1))]!;
          assert.ok(m.live && m.current === undefined, `${step}: drained ${e.id} was live and not outstanding`);
          m.live = false;
        }
        break;
      }
      case 'pause':
        broker.pause();
        paused = true;
        break;
      case 'resume':
        broker.resume();
        paused = false;
        break;
      case 'flush': {
        const flushed = broker.setEnabled(false).map((e) => e.id).sort();
        const expected = model.flatMap((m, i) => (m.live ? [id(i)] : [])).sort();
        assert.deepEqual(flushed, expected, `${step}: flush returns exactly the live evaluations`);
        for (const m of model) {
          m.live = false;
          m.current = undefined;
        }
        assert.ok(waiters.every((w) => w.answered), `${step}: every waiter answered by the flush`);
        assert.equal(clock.pendingTimers, 0, `${step}: no timer left after a flush`);
        broker.setEnabled(true);
        break;
      }
    }
    check(step);
  }
}
test('property: conservation, one per job, no stale acks, bounded deliveries over random operation sequences', () => {
  fc.assert(fc.property(fc.array(opArb, { minLength: 20, maxLength: 80, size: 'max' }), run), { numRuns: 1000 });
});

test('property check is not vacuous: a typical sequence reaches every state', () => {
  const seen = new Set<string>();
  const clock = new ManualClock(0);
  const broker = new EvalBroker({ clock, logger: silentLogger, registry, deliveryLimit: 1, nackTimeoutMs: 100 });
  broker.enqueue({ id: 'x', jobId: 'j', type: 'a', priority: 5 });
  broker.enqueue({ id: 'y', jobId: 'j', type: 'a', priority: 5 });
  broker.enqueue({ id: 'z', jobId: 'j', type: 'a', priority: 5 });
  broker.enqueue({ id: 'v', jobId: 'j', type: 'a', priority: 5 });
  broker.enqueue({ id: 'w', jobId: 'k', type: 'a', priority: 5, wait: 50 });
  const record = (): void => {
    for (const i of ['v', 'x', 'y', 'z', 'w']) {
      const state = broker.inspect(i)?.state;
      if (state !== undefined) seen.add(state);
    }
  };
  record();
  const d = broker.tryDequeue(['a'])!;
  record();
  broker.fail(d.evaluation.id, d.token, new Error('x'));
  record();
  const d2 = broker.tryDequeue(['a'])!;
  broker.ack(d2.evaluation.id, d2.token);
  record();
  assert.deepEqual([...seen].sort(), ['cancelable', 'failed', 'pending', 'ready', 'unacked', 'waiting']);
  run([
    { k: 'enqueue', id: 0, job: 0, ns: false, type: 0, prio: 0, delay: 0 },
    { k: 'dequeue', mask: 1 },
    { k: 'advance', ms: 10_000 },
    { k: 'ack', pick: 0, stale: true },
  ]);
});
