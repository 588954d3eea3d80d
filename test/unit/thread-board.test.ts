/**
 * The shared board between main and the pool threads: per-thread rows that do not overlap, and the doorbell a
 * parked thread sleeps on. The doorbell's race (a message posted just before the thread marks itself parked) is
 * driven across a real thread, thousands of rounds back to back.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { ThreadBoard } from '../../src/pool/thread-board.js';
import { Cell } from '../fixtures/board-parker.js';

test('each thread has its own row: indexes, busy time and the doorbell do not overlap', () => {
  const board = ThreadBoard.create(3);
  board.publishCommittedIndex(7);
  board.publishAppliedIndex(0, 11);
  board.publishAppliedIndex(2, 13);
  board.addBusy(1, 2.5);
  board.markParked(1);
  assert.deepEqual([0, 1, 2].map((t) => board.appliedIndex(t)), [11, 0, 13]);
  assert.deepEqual([0, 1, 2].map((t) => board.busyMs(t)), [0, 2.5, 0]);
  assert.deepEqual([0, 1, 2].map((t) => board.isParked(t)), [false, true, false]);
  assert.equal(board.committedIndex(), 7);
});

test('a thread rung after it marked itself parked does not sleep; one not rung sleeps until the timeout', () => {
  const board = ThreadBoard.create(1);
  board.markParked(0);
  board.ring(0);
  assert.equal(board.isParked(0), false, 'the ring clears the mark');
  assert.equal(board.park(0, 60_000), true, 'rang already: returns at once, as woken');
  board.markParked(0);
  assert.equal(board.park(0, 0), false, 'nobody rang: timed out');
  assert.equal(board.isParked(0), false, 'and awake again');
  board.ring(0);
  assert.equal(board.isParked(0), false, 'ringing an awake thread changes nothing');
  board.markParked(0);
  board.unpark(0);
  assert.equal(board.isParked(0), false);
});

test('no wake-up is lost between a thread marking itself parked and going to sleep', async () => {
  const rounds = 20_000;
  const board = ThreadBoard.create(2);
  const cells = new Int32Array(new SharedArrayBuffer(Cell.SIZE * 4));
  const worker = new Worker(new URL('../fixtures/board-parker.js', import.meta.url), { workerData: { board: board.buffer, cells, rounds, thread: 1 } });
  const exited = new Promise<number>((resolve, reject) => {
    worker.once('exit', resolve);
    worker.once('error', reject);
  });
  try {
    for (let round = 1; round <= rounds; round++) {
      Atomics.store(cells, Cell.MAILBOX, round);
      board.ring(1);
      // Main waits for the answer like a caller awaiting a result; the thread's answer wakes it.
      for (;;) {
        const seen = Atomics.load(cells, Cell.SEEN);
        if (seen >= round) break;
        const wait = Atomics.waitAsync(cells, Cell.SEEN, seen, 10_000);
        if (wait.async && (await wait.value) === 'timed-out') assert.fail(`round ${round}: the thread did not wake (a lost ring)`);
      }
    }
  } catch (error) {
    await worker.terminate();
    throw error;
  }
  assert.equal(await exited, 0);
  assert.ok(Atomics.load(cells, Cell.SLEPT) > 0, 'the thread really slept between rounds (the race was exercised)');
});
