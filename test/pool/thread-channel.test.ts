/**
 * `ThreadChannel`, main's end of one pool thread, on a real `MessageChannel` (the test reads the thread's end with
 * `receiveMessageOnPort`) and a manual clock: its lifecycle, what it posts, its idle timer, its load.
 */
import assert from 'node:assert/strict';
import { MessageChannel, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { test } from 'node:test';
import { ManualClock } from '../../src/clock.js';
import { InvalidStateError, ThreadExitedError } from '../../src/errors.js';
import type { ThreadLog } from '../../src/observability/thread-log-sink.js';
import type { SequencedItem, ThreadItem, WorkMessage } from '../../src/protocol/messages.js';
import { ThreadBoard } from '../../src/protocol/thread-board.js';
import { decodeWork } from '../../src/protocol/wire.js';
import { ChannelState, ThreadChannel } from '../../src/pool/thread-channel.js';
import type { ChangeSet } from '../../src/state/types.js';

interface Harness {
  readonly channel: ThreadChannel<SequencedItem>;
  /** The thread's end of the port. */
  readonly thread: MessagePort;
  readonly clock: ManualClock;
  readonly board: ThreadBoard;
  readonly idled: number[];
  logClosed: number;
}

function harness(options: { polling?: boolean } = {}): Harness {
  const { port1, port2 } = new MessageChannel();
  const clock = new ManualClock(0);
  const board = ThreadBoard.create(1);
  const log: ThreadLog = {
    init: { port: new MessageChannel().port2, level: new Int32Array(new SharedArrayBuffer(4)) },
    close: () => void h.logClosed++,
  };
  const h: Harness = {
    channel: new ThreadChannel<SequencedItem>({
      index: 0,
      port: port1,
      log,
      board: options.polling === true ? board : undefined,
      clock,
      idleTimeoutMs: 100,
      onIdle: (channel) => h.idled.push(channel.index),
    }),
    thread: port2,
    clock,
    board,
    idled: [],
    logClosed: 0,
  };
  return h;
}

/** Every message waiting on the thread's end, in order. */
function received(port: MessagePort): unknown[] {
  const out: unknown[] = [];
  for (let m = receiveMessageOnPort(port); m !== undefined; m = receiveMessageOnPort(port)) out.push(m.message);
  return out;
}

function decoded(message: unknown): { changes: number[]; seqs: number[] } {
  const changes: number[] = [];
  const items: ThreadItem[] = [];
  decodeWork(message as WorkMessage, (c) => changes.push(c.index), items);
  return { changes, seqs: items.map((i) => i.seq) };
}

const change = (index: number): ChangeSet => ({ index, changes: [] });
const item = (seq: number, payload: unknown = null): SequencedItem => ({
  seq,
  item: { kind: 'run', slot: seq, generation: 1, attempt: 1, run: { taskId: 't', runId: `r${seq}`, scheduledFor: 0, runAt: 0 }, handler: 'h', payload },
});

test('lifecycle: booting, ready, stopping, ended; a stop is posted once, and nothing leaves ended', (t) => {
  const h = harness();
  t.after(() => h.thread.close());
  const { channel } = h;
  assert.equal(channel.state, ChannelState.BOOTING);
  assert.equal(channel.isReady, false);
  assert.equal(channel.markReady(), true);
  assert.equal(channel.isReady, true);
  assert.equal(channel.markReady(), false, 'ready once');
  channel.stop();
  channel.stop();
  assert.equal(channel.state, ChannelState.STOPPING);
  assert.deepEqual(received(h.thread), [{ type: 'stop' }]);
  assert.equal(channel.end(), ChannelState.STOPPING, 'end() tells the state it ended in');
  assert.equal(channel.ended, true);
  assert.equal(h.logClosed, 1);
  assert.throws(() => channel.end(), InvalidStateError);
  // Ended: asking it to stop or terminating it does nothing.
  channel.stop();
  channel.terminateByStop(new ThreadExitedError('late'));
  assert.equal(channel.state, ChannelState.ENDED);
  assert.equal(channel.abort.signal.aborted, false);
});

test('a thread asked to stop while it boots does not serve when it says ready', (t) => {
  const h = harness();
  t.after(() => h.thread.close());
  h.channel.stop();
  assert.equal(h.channel.markReady(), false);
  assert.equal(h.channel.isReady, false);
  assert.equal(h.channel.state, ChannelState.STOPPING);
});

test('terminateByStop marks the end as the stop\'s and keeps the first reason; terminateFor keeps the state', (t) => {
  const h = harness();
  t.after(() => h.thread.close());
  const { channel } = h;
  channel.markReady();
  const forItem = new ThreadExitedError('ignored cancel');
  channel.terminateFor(forItem);
  assert.equal(channel.abort.signal.aborted, true);
  assert.equal(channel.state, ChannelState.READY, 'it serves until its loop ends');
  assert.equal(channel.terminatedFor, forItem);
  channel.terminateByStop(new ThreadExitedError('stopped'));
  channel.terminateByStop(new ThreadExitedError('stopped again'));
  assert.equal(channel.state, ChannelState.TERMINATING);
  assert.equal(channel.terminatedFor, forItem, 'the reason the items were lost to stays');
  assert.equal(channel.isReady, false);
  assert.equal(channel.end(), ChannelState.TERMINATING);
});

test('the idle timer: armed once and only while ready, fires after idleTimeoutMs, disarmed by items, not by commits', (t) => {
  const h = harness();
  t.after(() => h.thread.close());
  const { channel, clock } = h;
  channel.armIdle();
  assert.equal(channel.idleArmed, false, 'not while booting');
  channel.markReady();
  channel.armIdle();
  channel.armIdle();
  assert.equal(clock.pendingTimers, 1);
  channel.addChange(change(1));
  assert.equal(channel.sendWork([], () => assert.fail('nothing to fail')), true);
  clock.advance(100);
  assert.deepEqual(h.idled, [0], 'commits alone are no work');
  assert.equal(channel.idleArmed, false);
  channel.armIdle();
  channel.sendWork([item(1)], () => assert.fail('it clones'));
  clock.advance(1000);
  assert.deepEqual(h.idled, [0], 'an item disarmed it');
  channel.armIdle();
  channel.stop();
  assert.equal(clock.pendingTimers, 0, 'a stop disarms it');
  channel.end();
});

test('sendWork: the commits the thread has not seen go in front of the items, in one message, once', (t) => {
  const h = harness();
  t.after(() => h.thread.close());
  const { channel } = h;
  channel.markReady();
  channel.addChange(change(1));
  channel.addChange(change(2));
  assert.equal(channel.hasChanges, true);
  channel.sendWork([item(7), item(8)], () => assert.fail('it clones'));
  assert.equal(channel.hasChanges, false);
  channel.addChange(change(3));
  channel.dropChanges();
  channel.sendWork([item(9)], () => assert.fail('it clones'));
  assert.deepEqual(received(h.thread).map(decoded), [
    { changes: [1, 2], seqs: [7, 8] },
    { changes: [], seqs: [9] },
  ]);
});

test('sendWork: an item that cannot be cloned fails alone; the commits and the other items still go', (t) => {
  const h = harness();
  t.after(() => h.thread.close());
  const { channel } = h;
  channel.markReady();
  channel.addChange(change(1));
  const failed: number[] = [];
  const sent = channel.sendWork([item(1), item(2, () => 'a function'), item(3)], (bad, error) => {
    assert.ok(error instanceof Error);
    failed.push(bad.seq);
  });
  assert.equal(sent, false);
  assert.deepEqual(failed, [2]);
  assert.deepEqual(received(h.thread).map(decoded), [
    { changes: [1], seqs: [] },
    { changes: [], seqs: [1] },
    { changes: [], seqs: [3] },
  ]);
});

test('every post rings the board when threads poll for work, and never when they do not', (t) => {
  const polling = harness({ polling: true });
  const quiet = harness();
  t.after(() => {
    polling.thread.close();
    quiet.thread.close();
  });
  for (const h of [polling, quiet]) {
    h.channel.markReady();
    h.channel.sendWork([item(1)], () => assert.fail('it clones'));
    h.channel.post({ type: 'reset', full: change(0) });
    h.channel.stop();
  }
  assert.equal(polling.board.posted(0), 3);
  assert.equal(quiet.board.posted(0), 0);
});

test('load: the first item assigned starts at once; an empty thread\'s load is exactly 0 again', () => {
  const h = harness();
  const { channel } = h;
  assert.equal(channel.assign(0.1), true);
  assert.equal(channel.assign(0.2), false);
  assert.equal(channel.assigned, 2);
  assert.ok(Math.abs(channel.loadMs - 0.3) < 1e-12);
  channel.unassign(0.1);
  channel.unassign(0.2);
  assert.equal(channel.assigned, 0);
  assert.equal(channel.loadMs, 0, 'no float residue');
  h.thread.close();
});
