import type { SchedulerPlan, WorkContext } from '../../src/index.js';

// Runs on a pool thread: count the words of the payload, add them to the job's record, and hand back the total.
export default async function wordCount(evaluation: { jobId: string; payload: string }, ctx: WorkContext): Promise<SchedulerPlan<number>> {
  const words = evaluation.payload.split(/\s+/).filter(Boolean).length;
  const current = ctx.snapshot.get<number>('words', evaluation.jobId);
  const value = (current?.value ?? 0) + words;
  return { writes: [{ table: 'words', key: evaluation.jobId, value, readIndex: current?.modifyIndex ?? 0 }], value };
}
