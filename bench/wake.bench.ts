/**
 * How long waking an idle pool thread takes on this machine, by mechanism: the floor under every idle-latency
 * figure in the suite. One thread, one small message at a time (an evaluation-sized object), main → thread:
 * - `futex`: `postMessage`, then `Atomics.notify` to a thread in `Atomics.wait`, which takes the message with
 *   `receiveMessageOnPort` (Piscina's idle path);
 * - `event-loop`: `postMessage` to a thread idle in its event loop (the engine's pool threads);
 * - `ring`: the message as JSON bytes in shared memory plus `Atomics.notify` (no MessagePort);
 * - `poll-port` / `poll-ring`: a thread that polls a shared cell instead of sleeping (the engine does not: see README), the message
 *   through its port or as JSON bytes in shared memory: what a ring of encoded items would save a polling thread.
 * Reported per mechanism: one-way latency (before the send → the thread has the message) and how long the send
 * itself blocks main, p10/p50/p90 over rounds that alternate the mechanisms.
 *
 *   node dist/bench/wake.bench.js [--samples 2000] [--rounds 6]
 */
import { once } from 'node:events';
import { MessageChannel, Worker } from 'node:worker_threads';
import { pathToFileURL } from 'node:url';
import { Cell, STAMP_INDEX, WAKE_BYTES_OFFSET, WAKE_SHARED_BYTES, isPolled, isRing, type WakeMode } from './fixtures/wake-layout.js';
import { Latency, nowUs } from './lib/latency.js';
import { waitCell } from './lib/shared-cells.js';
import type { BenchResult } from './lib/types.js';
import { integerArg } from './lib/script-args.js';
import { printTable } from './lib/table.js';

const MODES: readonly WakeMode[] = ['futex', 'event-loop', 'ring', 'poll-port', 'poll-ring'];
const message = { id: 'eval-000000000001', jobId: 'job-1', type: 'service', priority: 50, status: 'pending', modifyIndex: 12, createIndex: 12 };

async function measure(mode: WakeMode, samples: number, oneWay: Latency, send: Latency): Promise<void> {
  const shared = new SharedArrayBuffer(WAKE_SHARED_BYTES);
  const cells = new Int32Array(shared);
  const stamps = new Float64Array(shared, 0, 1);
  const bytes = new Uint8Array(shared, WAKE_BYTES_OFFSET);
  const encoder = new TextEncoder();
  const { port1, port2 } = new MessageChannel();
  const worker = new Worker(new URL('./fixtures/wake-thread.js', import.meta.url), { workerData: { mode, shared, port: port2 }, transferList: [port2] });
  const post = (sequence: number, stop = false): void => {
    const body = { ...message, sequence, ...(stop ? { stop } : {}) };
    if (isRing(mode)) {
      Atomics.store(cells, Cell.LENGTH, encoder.encodeInto(JSON.stringify(body), bytes).written);
    } else {
      port1.postMessage(body);
    }
    if (mode !== 'event-loop') {
      Atomics.store(cells, Cell.POSTED, sequence);
      // A polling thread needs no wake-up: the store is the whole signal.
      if (!isPolled(mode)) Atomics.notify(cells, Cell.POSTED);
    }
  };
  // A thread that throws or exits early fails the measurement instead of leaving `done` waiting forever.
  const failed = new Promise<never>((_, reject) => {
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`Expected the ${mode} thread to answer, but it exited with ${code}`)));
  });
  failed.catch(() => undefined); // it also settles when the thread is terminated at the end
  const done = (sequence: number): Promise<void> => Promise.race([waitCell(cells, Cell.DONE, sequence), failed]);
  try {
    await once(worker, 'online');
    for (let i = -100; i < samples; i++) {
      // A pause, so that the thread is really idle (asleep) when the next message comes.
      await new Promise((resolve) => setTimeout(resolve, 1));
      const sequence = i + 101;
      const t0 = nowUs();
      post(sequence);
      const t1 = nowUs();
      await done(sequence);
      if (i >= 0) {
        oneWay.recordUs(stamps[STAMP_INDEX]! - t0);
        send.recordUs(t1 - t0);
      }
    }
    post(samples + 101, true);
    await done(samples + 101);
  } finally {
    port1.close();
    await worker.terminate();
  }
}

export async function runWakeBench(samples = 2000, rounds = 6): Promise<BenchResult[]> {
  const oneWay = new Map(MODES.map((m) => [m, new Latency()]));
  const send = new Map(MODES.map((m) => [m, new Latency()]));
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? MODES : [...MODES].reverse();
    for (const mode of order) await measure(mode, Math.ceil(samples / rounds), oneWay.get(mode)!, send.get(mode)!);
  }
  const us = (l: Latency, p: number): number => Math.round(l.percentileUs(p) * 10) / 10;
  return MODES.map((mode) => {
    const o = oneWay.get(mode)!;
    const s = send.get(mode)!;
    return {
      scope: 'engine',
      id: `engine.wake.${mode}`,
      name: `wake an idle thread: ${mode}`,
      p50Us: us(o, 50),
      p99Us: us(o, 99),
      threads: 1,
      notes: `one-way p10/p50/p90 ${us(o, 10)} / ${us(o, 50)} / ${us(o, 90)} µs; the send blocks main p10/p50/p90 ${us(s, 10)} / ${us(s, 50)} / ${us(s, 90)} µs; ${o.count} samples`,
    } satisfies BenchResult;
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  printTable('waking an idle thread (1 thread, one message at a time)', await runWakeBench(integerArg('--samples', 2000), integerArg('--rounds', 6)));
}
