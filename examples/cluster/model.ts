/**
 * The records of the simulated cluster, as they sit in the engine's state store. Imported by the main thread and
 * by the schedulers on pool threads, so it holds types and pure helpers only.
 *
 * Tables
 * - `nodes`:  key = node id. A machine with a capacity and the capacity its allocations use. Every placement or stop
 *             rewrites the node record, so its `modifyIndex` is the version a plan must have read (optimistic
 *             concurrency: two plans that pick the same node conflict).
 * - `jobs`:   key = job id. What the user asked for (a job registration writes a new `version`).
 * - `allocs`: key = `<jobId>/<index>`, index in 0..count-1. One placed instance of a job on a node.
 *
 * Invariant (checked by the plan applier's fit check and audited at the end of a run): for every node,
 * `used = Σ resources of the allocs on it` and `used <= capacity`, for CPU and memory.
 */

export const Table = Object.freeze({ NODES: 'nodes', JOBS: 'jobs', ALLOCS: 'allocs' } as const);
export const tables: readonly string[] = Object.values(Table);

export type JobType = 'service' | 'batch';

export interface NodeRecord {
  readonly id: string;
  readonly datacenter: string;
  /** Node class: `general`, `compute`, `memory` or `storage`. */
  readonly nodeClass: string;
  readonly cpuMhz: number;
  readonly memoryMb: number;
  readonly usedCpuMhz: number;
  readonly usedMemoryMb: number;
  /** Allocations on the node. */
  readonly allocs: number;
  /** A few fingerprinted attributes that job constraints can test. */
  readonly attributes: { readonly kernelVersion: string; readonly arch: string; readonly docker: boolean; readonly rack: string };
}

/** `attribute op value`, as in a Nomad job's `constraint` block. */
export interface Constraint {
  readonly attribute: 'kernelVersion' | 'arch' | 'rack' | 'nodeClass';
  readonly operator: '=' | '!=' | 'version>=' | 'regexp';
  readonly value: string;
}

export interface JobRecord {
  readonly id: string;
  readonly type: JobType;
  readonly priority: number;
  /** Bumped by every registration; allocations of an older version are replaced. */
  readonly version: number;
  readonly count: number;
  readonly cpuMhz: number;
  readonly memoryMb: number;
  readonly datacenters: readonly string[];
  readonly constraints: readonly Constraint[];
  /** Place all of the job's allocations in one commit or none (a gang): the plan is submitted `allAtOnce`. */
  readonly allAtOnce: boolean;
  /** Batch only: how long an allocation runs before it is finished (and may be garbage-collected). */
  readonly runtimeMs?: number;
}

export interface AllocRecord {
  readonly id: string;
  readonly jobId: string;
  readonly jobVersion: number;
  readonly nodeId: string;
  readonly cpuMhz: number;
  readonly memoryMb: number;
  /** Epoch ms when a batch allocation finishes; absent for services (they run until replaced). */
  readonly finishAt?: number;
}

/** Largest `count` of a job: the scheduler looks at alloc keys 0..MAX_COUNT-1 of a job. */
export const MAX_COUNT = 12;

export function allocKey(jobId: string, index: number): string {
  return `${jobId}/${index}`;
}

/** Compares dotted numeric versions: negative, zero or positive like a sort comparator. */
export function compareVersions(a: string, b: string): number {
  const x = a.split('.');
  const y = b.split('.');
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = Number(x[i] ?? 0) - Number(y[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}
