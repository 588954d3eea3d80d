/**
 * Scheduler for `service` evaluations, loaded by name on every pool thread. Services are long-running: pack them
 * tightly, keep the instances of one job apart (anti-affinity), and place all of a job's instances or none.
 */
import type { Plan, WorkContext } from '../../../src/index.js';
import { countUnplaced, enter, leave, type ProbeRef } from '../probe.js';
import { schedule, type ClusterEvaluation, type Strategy } from './placement.js';

const strategy: Strategy = { antiAffinity: 0.5, pickAmong: 32 };

export default async function service(
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
