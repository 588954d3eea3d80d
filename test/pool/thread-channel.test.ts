/**
 * `ThreadChannel`, main's end of one pool thread, on a real `MessageChannel` (the test reads the thread's end with
 * `receiveMessageOnPort`): its lifecycle and what it posts. The work itself goes through shared memory.
 */
import assert from 'node:assert/strict';
import { MessageChannel, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { test } from 'node:test';
import { InvalidStateError, ThreadExitedError } from '../../src/errors.js';
import type { ThreadLog } from '../../src/observability/thread-log-sink.js';
import { createResultRing } from '../../src/protocol/result-ring.js';
import { ThreadBoard } from '../../src/protocol/thread-board.js';
import { ChannelState, ThreadChannel } from '../../src/pool/thread-channel.js';

interface Harness {
  readonly channel: ThreadChannel<unknown>;
  /** The thread's end of the port. */
  readonly thread: MessagePort;
  readonly board: ThreadBoard;
  logClosed: number;
}

function harness(): Harness {
  const { port1, port2 } = new MessageChannel();
  const board = ThreadBoard.create(1);
  const log: ThreadLog = {
    init: { port: new MessageChannel().port2, level: new Int32Array(new SharedArrayBuffer(4)) },
    close: () => void h.logClosed++,
  };
  const h: Harness = {
    channel: new ThreadChannel<unknown>({ index: 0, port: port1, log, board, results: createResultRing(1024) }),
    thread: port2,
    board,
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

test('every post bumps the thread\'s POSTED word: a thread busy with items sees a message wait without its event loop', (t) => {
  const h = harness();
  t.after(() => h.thread.close());
  h.channel.markReady();
  assert.equal(h.board.posted(0), 0);
  h.channel.post({ type: 'unshare', id: 1 });
  h.channel.stop();
  assert.equal(h.board.posted(0), 2);
  assert.deepEqual(received(h.thread), [{ type: 'unshare', id: 1 }, { type: 'stop' }]);
});
