/**
 * Task handler `downsample`, on a pool thread, every second: reduces the last whole second of node metrics
 * (every node's 50 CPU and memory samples) to per-node mean, max and p95, and the cluster's summary. The samples
 * are read from shared memory (node-metrics.ts), not sent in a message.
 *
 * A second that is not complete yet (the writer is a little late) is a retryable failure: the task's `retry`
 * runs it again after the engine's backoff. A second already overwritten (the run started far too late) is not.
 */
import type { WorkContext } from '../../../src/index.js';
import { readSecond, SAMPLES_PER_SECOND, type StreamRef } from '../node-metrics.js';

export interface DownsampleRun {
  readonly taskId: string;
  readonly runId: string;
  readonly scheduledFor: number;
  readonly payload: { readonly stream: StreamRef };
}

export interface SecondSummary {
  readonly second: number;
  readonly nodes: number;
  /** Mean CPU use over all nodes and samples, fraction of capacity. */
  readonly meanCpu: number;
  readonly meanMemory: number;
  /** Nodes whose p95 CPU exceeded 90 %. */
  readonly hotNodes: number;
  /** The node with the highest p95 CPU (its index in the stream: node ids are `node-<index + 1>`). */
  readonly hottest: { readonly index: number; readonly p95Cpu: number; readonly maxCpu: number };
}

export default async function downsample(run: DownsampleRun, ctx: WorkContext): Promise<SecondSummary> {
  const { stream } = run.payload;
  const second = Math.floor(run.scheduledFor / 1000) - 1;
  const read = readSecond(stream, second);
  if (read.status !== 'ready') {
    const error = new Error(`samples of second ${second} are ${read.status} (the block holds ${read.holds}, ${read.written} samples)`);
    throw Object.assign(error, { retryable: read.status === 'not-yet' });
  }
  const { samples } = read;
  const cpu = new Float32Array(SAMPLES_PER_SECOND);
  let cpuSum = 0;
  let memorySum = 0;
  let hotNodes = 0;
  let hottest = { index: -1, p95Cpu: -1, maxCpu: 0 };
  for (let n = 0; n < stream.nodes; n++) {
    if (n % 128 === 0) ctx.throwIfCanceled();
    let max = 0;
    for (let s = 0; s < SAMPLES_PER_SECOND; s++) {
      const at = (n * SAMPLES_PER_SECOND + s) * 2;
      const c = samples[at]!;
      cpu[s] = c;
      cpuSum += c;
      memorySum += samples[at + 1]!;
      if (c > max) max = c;
    }
    cpu.sort();
    const p95 = cpu[Math.ceil(0.95 * SAMPLES_PER_SECOND) - 1]!;
    if (p95 > 0.9) hotNodes++;
    if (p95 > hottest.p95Cpu) hottest = { index: n, p95Cpu: p95, maxCpu: max };
  }
  const count = stream.nodes * SAMPLES_PER_SECOND;
  return { second, nodes: stream.nodes, meanCpu: cpuSum / count, meanMemory: memorySum / count, hotNodes, hottest };
}
