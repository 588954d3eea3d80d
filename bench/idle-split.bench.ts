/**
 * Where one idle dispatch spends its time, split at the wake (the first `postMessage` or `Atomics.notify` of the
 * dispatch, timed by wrapping both): main's work before it, the wake call itself, and wake → the scheduler's (or
 * task's) first line on the pool thread. Four sides, in alternating rounds with the same thread count:
 * - `engine`: `engine.enqueue` → the scheduler, as the idle-latency benchmark measures it;
 * - `pool`: `ThreadPool.dispatch` of the same item with no broker and no worker (the dispatcher and the threads);
 * - `pool + 3 µs after the wake`: the same with 3 µs of main-thread work after the dispatch returns, which shows
 *   whether main's work after the wake delays the thread (it does when both share a CPU);
 * - `piscina`: `run()` → the task.
 * Run it pinned to one CPU to take the vCPU wake-up out (`taskset -c 0 node …`), or not, to see both modes.
 *
 *   node --expose-gc dist/bench/idle-split.bench.js [--rounds 8] [--samples 300] [--pause-ms 0]
 */
import { MessagePort } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { Backoff } from '../src/backoff.js';
import { systemClock } from '../src/clock.js';
import { createEngine } from '../src/engine/engine.js';
import { ThreadPool } from '../src/pool/thread-pool.js';
import { SlotTable } from '../src/slots/slot-table.js';
import { StateStore } from '../src/state/state-store.js';
import { settled as betweenSamples, IDLE_WARMUP_SAMPLES, whenAcked } from './engine.bench.js';
import { Latency, nowUs, round } from './lib/latency.js';
import { withPiscina } from './lib/piscina-pool.js';
import { integerArg } from './lib/script-args.js';
import { printTable } from './lib/table.js';
import type { BenchResult } from './lib/types.js';

const fixture = (name: string): URL => new URL(`./fixtures/${name}.js`, import.meta.url);
const BUSY_AFTER_POST_US = 3;

interface Split {
  readonly before: Latency;
  readonly wake: Latency;
  readonly after: Latency;
  readonly total: Latency;
  /** Samples that needed no wake: the thread had not parked yet. */
  unwoken: number;
}

/**
 * Times the first wake made inside `dispatch`, the moment main hands the item to a thread: a `postMessage` (Piscina
 * posts the task, then notifies) or an `Atomics.notify` (the engine publishes in shared memory, then notifies a
 * parked thread). [start of the call, end of the call].
 */
class WakeClock {
  start = 0;
  end = 0;
  #armed = false;
  readonly #post = MessagePort.prototype.postMessage;
  readonly #notify = Atomics.notify;

  install(): void {
    const clock = this;
    const post = this.#post;
    MessagePort.prototype.postMessage = function (this: MessagePort, ...args: Parameters<MessagePort['postMessage']>) {
      return clock.#timed(() => post.apply(this, args));
    };
    const notify = this.#notify;
    Atomics.notify = ((typedArray: Int32Array, index: number, count?: number): number =>
      clock.#timed(() => notify(typedArray, index, count))) as typeof Atomics.notify;
  }

  uninstall(): void {
    MessagePort.prototype.postMessage = this.#post;
    Atomics.notify = this.#notify;
  }

  /** The next wake is the one to time. */
  arm(): void {
    this.#armed = true;
    this.start = 0;
  }

  #timed<T>(wake: () => T): T {
    if (!this.#armed) return wake();
    this.#armed = false;
    this.start = nowUs();
    try {
      return wake();
    } finally {
      this.end = nowUs();
    }
  }
}

function newSplit(): Split {
  return { before: new Latency(), wake: new Latency(), after: new Latency(), total: new Latency(), unwoken: 0 };
}

/** A sample whose thread was still awake (main published, no wake was needed) counts in the total only. */
function record(split: Split, t0: number, wakes: WakeClock, entry: number): void {
  split.total.recordUs(entry - t0);
  if (wakes.start === 0) {
    split.unwoken++;
    return;
  }
  split.before.recordUs(wakes.start - t0);
  split.wake.recordUs(wakes.end - wakes.start);
  split.after.recordUs(entry - wakes.start);
}

interface Round {
  readonly split: Split;
  readonly wakes: WakeClock;
  readonly samples: number;
  readonly pauseMs: number;
}

/**
 * `IDLE_WARMUP_SAMPLES` warm-up dispatches back to back (each side's pool is new: see that constant), then `samples`
 * timed ones. `dispatch(i, index)` sends one whose scheduler stamps its entry into `stamps[index]` and resolves once
 * it settled; `prepare` runs before the clock starts (the engine's listener for the ack, so that registering it is
 * not timed).
 */
async function sampleLoop(round: Round, stamps: Float64Array, dispatch: (i: number, index: number) => Promise<unknown>, prepare?: () => Promise<void>): Promise<void> {
  for (let i = -IDLE_WARMUP_SAMPLES; i < round.samples; i++) {
    const index = Math.max(0, i);
    const settled = prepare?.();
    round.wakes.arm();
    const t0 = nowUs();
    await dispatch(i, index);
    await settled;
    await betweenSamples(i >= 0 ? round.pauseMs : 0);
    if (i >= 0) record(round.split, t0, round.wakes, stamps[index]!);
  }
}

async function engineRound(round: Round): Promise<void> {
  const engine = createEngine({ threads: 2, schedulers: { stamp: fixture('stamp-scheduler') }, broker: { initialNackDelayMs: 3_600_000 } });
  await engine.start();
  const stamps = new Float64Array(new SharedArrayBuffer(8 * round.samples));
  try {
    await sampleLoop(
      round,
      stamps,
      async (i, index) => engine.enqueue({ id: `s${i}`, jobId: `s${i}`, type: 'stamp', priority: 50, payload: { stamps, index } }),
      () => whenAcked(engine, 1),
    );
  } finally {
    await engine.stop({ graceMs: 1000 });
  }
}

async function poolRound(round: Round, busyUs: number): Promise<void> {
  const logger = pino({ level: 'silent' });
  const slots = SlotTable.create({ initialSlots: 1024 });
  const pool = new ThreadPool({
    minThreads: 2,
    maxThreads: 2,
    slots,
    state: new StateStore({ tables: [], logger }),
    schedulers: { stamp: { url: fixture('stamp-scheduler').href, exportName: 'default' } },
    handlers: {},
    clock: systemClock,
    logger,
    cancelGraceMs: 1000,
    idleTimeoutMs: 1000,
    respawnBackoff: new Backoff({}, { clock: systemClock }),
  });
  await pool.start();
  const slot = slots.allocate(1);
  const stamps = new Float64Array(new SharedArrayBuffer(8 * round.samples));
  try {
    await sampleLoop(round, stamps, async (i, index) => {
      const generation = slots.claim(slot);
      const evaluation = { id: `s${i}`, jobId: `s${i}`, type: 'stamp', priority: 50, modifyIndex: 0, payload: { stamps, index } };
      const outcome = pool.dispatch({ kind: 'eval', slot, generation, attempt: 1, evaluation, minIndex: 0, syncLimitMs: 5000 });
      if (busyUs > 0) for (const end = nowUs() + busyUs; nowUs() < end; );
      const settled = await outcome;
      slots.finish(slot, generation);
      if (settled.status !== 'ok') throw new Error(`Expected the stamp scheduler to succeed, but it ended ${settled.status}`);
    });
  } finally {
    await pool.stop();
  }
}

async function piscinaRound(round: Round): Promise<void> {
  const stamps = new Float64Array(new SharedArrayBuffer(8 * round.samples));
  await withPiscina(fixture('piscina-noop'), 2, (pool) => sampleLoop(round, stamps, (_i, index) => pool.run({ stamps, index })));
}

export async function runIdleSplitBench(options: { rounds?: number; samples?: number; pauseMs?: number } = {}): Promise<BenchResult[]> {
  const rounds = options.rounds ?? 8;
  const samples = options.samples ?? 300;
  const pauseMs = options.pauseMs ?? 0;
  const wakes = new WakeClock();
  const sides: Array<{ readonly id: string; readonly name: string; readonly split: Split; readonly run: () => Promise<void> }> = [];
  const side = (id: string, name: string, run: (split: Split) => Promise<void>): void => {
    const split = newSplit();
    sides.push({ id, name, split, run: () => run(split) });
  };
  const roundOf = (split: Split): Round => ({ split, wakes, samples, pauseMs });
  side('engine', 'engine: enqueue → scheduler', (s) => engineRound(roundOf(s)));
  side('pool', 'pool alone: ThreadPool.dispatch → scheduler', (s) => poolRound(roundOf(s), 0));
  side('pool-busy', `pool alone + ${BUSY_AFTER_POST_US} µs of main work after the wake`, (s) => poolRound(roundOf(s), BUSY_AFTER_POST_US));
  side('piscina', 'Piscina: run() → task', (s) => piscinaRound(roundOf(s)));
  wakes.install();
  try {
    for (let r = 0; r < rounds; r++) {
      for (const s of r % 2 === 0 ? sides : [...sides].reverse()) {
        await s.run();
        globalThis.gc?.();
      }
    }
  } finally {
    wakes.uninstall();
  }
  const q = (l: Latency): string => [25, 50, 90].map((p) => round(l.percentileUs(p), 1)).join(' / ');
  return sides.map(({ id, name, split }) => ({
    scope: 'engine',
    id: `engine.idle-split.${id}`,
    name: `idle dispatch split: ${name}`,
    ...split.total.summary(),
    threads: 2,
    notes: `p25/p50/p90 µs: main before the wake ${q(split.before)}; the wake ${q(split.wake)}; wake → entry ${q(split.after)}; ${split.total.count} samples, ${split.unwoken} of them with no wake (the thread was not parked yet)${pauseMs > 0 ? `, each after ${pauseMs} ms idle` : ''}`,
  }));
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const pauseMs = integerArg('--pause-ms', 0, 0);
  printTable(
    `idle dispatch, split at the wake (2 threads${pauseMs > 0 ? `, ${pauseMs} ms idle before each` : ''})`,
    await runIdleSplitBench({ rounds: integerArg('--rounds', 8), samples: integerArg('--samples', 300), pauseMs }),
  );
}
