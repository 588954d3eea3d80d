/**
 * Task handler `gc`, on a pool thread, every 5 seconds: finds the batch allocations that have finished and returns
 * a plan that deletes them and gives their capacity back to their nodes (Nomad's core GC, much reduced). The main
 * thread submits the plan to the plan applier like any scheduler's: a node that changed meanwhile rejects its part,
 * and the next run collects it.
 */
import type { Plan, WorkContext } from '../../../src/index.js';
import { collectFinished } from '../collect.js';

export interface GcRun {
  readonly taskId: string;
  readonly runId: string;
  readonly scheduledFor: number;
}

export default async function gc(run: GcRun, ctx: WorkContext): Promise<{ readonly plan: Plan | undefined; readonly finished: number }> {
  return collectFinished(ctx.snapshot, run.scheduledFor, () => ctx.throwIfCanceled());
}
