/**
 * The thread loop's outbox rule (src/thread/thread-loop.ts), on a `ThreadLoop` run in the test's own thread over a
 * `MessageChannel`, its time a script clock that only the `scripted` scheduler moves (by each item's `payload.ms`).
 * Which results travel together is then exact: the test reads each results message main would get.
 *
 * The rule: before the next item starts, the outbox is sent unless recent items were tiny (a running estimate,
 * starting at FLUSH_AFTER_MS, that jumps up to a longer item and decays by TYPICAL_DECAY per shorter one), the oldest
 * held result is younger than FLUSH_AFTER_MS, and the item just finished was not canceled. The last item of what the
 * thread holds always sends, and a held outbox goes out as soon as an item awaits something real.
 */
import assert from 'node:assert/strict';
import { MessageChannel } from 'node:worker_threads';
import { test } from 'node:test';
import { pino } from 'pino';
import { isResultMessage, type ItemOutcome, type SequencedItem, type ThreadInit, type ThreadToMain, type WorkItem } from '../../src/protocol/messages.js';
import { THREAD_LEVELS } from '../../src/protocol/thread-log.js';
import { ThreadBoard } from '../../src/protocol/thread-board.js';
import { encodeWork, forEachResult } from '../../src/protocol/wire.js';
import { SlotTable } from '../../src/slots/slot-table.js';
import { StateStore } from '../../src/state/state-store.js';
import { FLUSH_AFTER_MS, TINY_ITEM_MS, TYPICAL_DECAY, ThreadLoop } from '../../src/thread/thread-loop.js';
import { script } from '../fixtures/scripted.js';

/** How many 0 ms items a new thread answers one by one before its estimate calls them tiny. */
const SINGLES = (() => {
  let typical = FLUSH_AFTER_MS;
  let n = 0;
  while (typical >= TINY_ITEM_MS) {
    typical -= typical * TYPICAL_DECAY;
    n++;
  }
  return n - 1;
})();

interface Result {
  readonly seq: number;
  readonly status: ItemOutcome['status'];
}

interface Loop {
  readonly slots: SlotTable;
  /** Results messages so far, each as the seqs it answered, in arrival order. */
  readonly messages: Result[][];
  /** Items of `ms` each, numbered on from the last; one work message. */
  items(...ms: number[]): Array<SequencedItem & { readonly generation: number; readonly slot: number }>;
  post(items: readonly SequencedItem[]): void;
  /** Resolves once results for `count` items in all have come. */
  answered(count: number): Promise<void>;
}

const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const seqs = (messages: Result[][]): number[][] => messages.map((m) => m.map((r) => r.seq));

async function startLoop(t: { after(fn: () => unknown): void }): Promise<Loop> {
  script.hooks.clear();
  const slots = SlotTable.create({ initialSlots: 256 });
  const board = ThreadBoard.create(1);
  const state = new StateStore({ tables: ['t'], logger: pino({ level: 'silent' }) });
  const { port1: main, port2: threadPort } = new MessageChannel();
  const logChannel = new MessageChannel();
  const level = new Int32Array(new SharedArrayBuffer(4));
  Atomics.store(level, 0, THREAD_LEVELS.indexOf('silent'));
  const init: ThreadInit = {
    threadIndex: 0,
    slotBuffer: slots.buffer,
    boardBuffer: board.buffer,
    schedulers: { s: { url: new URL('../fixtures/scripted.js', import.meta.url).href, exportName: 'default' } },
    handlers: {},
    full: state.full(),
    log: { port: logChannel.port2, level },
    moduleHooks: [],
    idleSpinUs: 0,
  };
  const loop = new ThreadLoop(threadPort, init, script.clock);
  const ended = loop.run();
  const messages: Result[][] = [];
  let count = 0;
  let waiter: { count: number; resolve: () => void } | undefined;
  const ready = new Promise<void>((resolve) => {
    main.on('message', (message: ThreadToMain) => {
      if (!isResultMessage(message)) {
        if (message.type === 'ready') resolve();
        return;
      }
      const results: Result[] = [];
      forEachResult(message, (seq, status) => results.push({ seq, status }));
      messages.push(results);
      count += results.length;
      if (waiter !== undefined && count >= waiter.count) waiter.resolve();
    });
  });
  t.after(async () => {
    main.postMessage({ type: 'stop' });
    await ended;
    main.close();
    logChannel.port1.close();
  });
  await ready;
  let next = 0;
  return {
    slots,
    messages,
    items(...ms) {
      return ms.map((m) => {
        const seq = ++next;
        const slot = slots.allocate(1);
        const generation = slots.claim(slot);
        const item: WorkItem = {
          kind: 'eval',
          slot,
          generation,
          attempt: 1,
          evaluation: { id: `e${seq}`, type: 's', modifyIndex: 0, payload: { ms: m } },
          minIndex: 0,
          syncLimitMs: 1000,
        };
        return { seq, item, slot, generation };
      });
    },
    post(items) {
      main.postMessage(encodeWork([], items));
    },
    answered(total) {
      if (count >= total) return Promise.resolve();
      return new Promise((resolve) => (waiter = { count: total, resolve }));
    },
  };
}

test(`a new thread answers item by item until its items prove tiny (${SINGLES} of 0 ms); then results travel together, and the last item of what it holds sends`, { timeout: 10_000 }, async (t) => {
  const loop = await startLoop(t);
  loop.post(loop.items(...Array<number>(20).fill(0)));
  await loop.answered(20);
  assert.deepEqual(seqs(loop.messages), [...range(1, SINGLES).map((s) => [s]), range(SINGLES + 1, 20)]);
});

test('a held result waits at most FLUSH_AFTER_MS of the tiny items after it', { timeout: 10_000 }, async (t) => {
  const loop = await startLoop(t);
  // Items of 1/32 ms (tiny, exact in binary): the one that ends FLUSH_AFTER_MS after the first held one sends.
  const step = 1 / 32;
  const perFlush = FLUSH_AFTER_MS / step;
  const first = SINGLES + 1;
  loop.post(loop.items(...Array<number>(SINGLES + 1).fill(0), ...Array<number>(perFlush + 8).fill(step)));
  const total = SINGLES + 1 + perFlush + 8;
  await loop.answered(total);
  assert.deepEqual(seqs(loop.messages), [...range(1, SINGLES).map((s) => [s]), range(first, first + perFlush), range(first + perFlush + 1, total)]);
});

test('an item that is not tiny sends what it finds held with its own result, and the results after it go one by one again', { timeout: 10_000 }, async (t) => {
  const loop = await startLoop(t);
  loop.post(loop.items(...Array<number>(SINGLES + 2).fill(0), 50, 0, 0, 0));
  await loop.answered(SINGLES + 6);
  const long = SINGLES + 3;
  assert.deepEqual(seqs(loop.messages), [...range(1, SINGLES).map((s) => [s]), [SINGLES + 1, SINGLES + 2, long], [long + 1], [long + 2], [long + 3]]);
});

test('a canceled result is sent at once with what was held, whether the item threw its cancel, finished anyway, or never started', { timeout: 10_000 }, async (t) => {
  const loop = await startLoop(t);
  const warm = loop.items(...Array<number>(SINGLES + 2).fill(0));
  const [threw, after1, finished, after2, skipped, after3, last] = loop.items(0, 0, 0, 0, 0, 0, 0);
  // Each cancels its own slot while it runs, as main does (a CAS RUNNING → CANCEL in shared memory).
  script.hooks.set(`e${threw!.seq}`, (ctx) => {
    assert.ok(loop.slots.cancel(threw!.slot, threw!.generation));
    ctx.throwIfCanceled();
  });
  script.hooks.set(`e${finished!.seq}`, () => assert.ok(loop.slots.cancel(finished!.slot, finished!.generation)));
  assert.ok(loop.slots.cancel(skipped!.slot, skipped!.generation), 'canceled before it starts');
  loop.post([...warm, threw!, after1!, finished!, after2!, skipped!, after3!, last!]);
  await loop.answered(SINGLES + 9);
  const singles = range(1, SINGLES).map((s) => [s]);
  assert.deepEqual(seqs(loop.messages), [
    ...singles,
    [SINGLES + 1, SINGLES + 2, threw!.seq],
    [after1!.seq, finished!.seq],
    [after2!.seq, skipped!.seq],
    [after3!.seq, last!.seq],
  ]);
  const status = new Map(loop.messages.flat().map((r) => [r.seq, r.status]));
  assert.deepEqual([status.get(threw!.seq), status.get(finished!.seq), status.get(skipped!.seq)], ['canceled', 'ok', 'not-started']);
});

test('before answering its last item the thread takes what main sent meanwhile: two work messages are answered as one run', { timeout: 10_000 }, async (t) => {
  const loop = await startLoop(t);
  // Both messages are on the port before the thread takes the first.
  loop.post(loop.items(...Array<number>(SINGLES + 2).fill(0)));
  loop.post(loop.items(0, 0, 0));
  await loop.answered(SINGLES + 5);
  assert.deepEqual(seqs(loop.messages), [...range(1, SINGLES).map((s) => [s]), range(SINGLES + 1, SINGLES + 5)]);
});

test('a held outbox goes out as soon as an item awaits something real, not when that item ends', { timeout: 10_000 }, async (t) => {
  const loop = await startLoop(t);
  const warm = loop.items(...Array<number>(SINGLES + 2).fill(0));
  const [waits] = loop.items(0);
  let release: () => void = () => assert.fail('not awaiting yet');
  script.hooks.set(`e${waits!.seq}`, () => new Promise<void>((resolve) => (release = resolve)));
  loop.post([...warm, waits!]);
  // The held results arrive while the item still awaits the test.
  await loop.answered(SINGLES + 2);
  assert.deepEqual(seqs(loop.messages).at(-1), [SINGLES + 1, SINGLES + 2]);
  release();
  await loop.answered(SINGLES + 3);
  assert.deepEqual(seqs(loop.messages).at(-1), [waits!.seq]);
});
