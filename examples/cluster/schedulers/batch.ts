/**
 * Scheduler for `batch` evaluations, loaded by name on every pool thread. Batch work is short-lived: pack it,
 * prefer `compute` nodes, and take whatever placements commit (a partly rejected plan is re-run for the rest).
 */
import type { Plan, WorkContext } from '../../../src/index.js';
import { countUnplaced, enter, leave, type ProbeRef } from '../probe.js';
import { schedule, type ClusterEvaluation, type Strategy } from './placement.js';

const strategy: Strategy = { antiAffinity: 0, preferClass: { nodeClass: 'compute', bonus: 0.2 }, pickAmong: 32 };

export default async function batch(
  evaluation: ClusterEvaluation & { readonly payload?: { readonly probe?: ProbeRef } },
  ctx: WorkContext,
): Promise<Plan | undefined> {
  const probe = evaluation.payload?.probe;
  const entered = enter(probe);
  try {
    const { plan, unplaced } = schedule(evaluation, ctx, strategy, Date.now());
    countUnplaced(probe, unplaced);
    return plan;
  } finally {
    leave(probe, ctx.threadIndex, entered);
  }
}
