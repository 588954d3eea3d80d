import type { Plan, WorkContext } from '../../src/index.js';

// Runs on a pool thread: count the words of the payload and add them to the job's record.
export default async function wordCount(evaluation: { jobId: string; payload: string }, ctx: WorkContext): Promise<Plan> {
  const words = evaluation.payload.split(/\s+/).filter(Boolean).length;
  const current = ctx.snapshot.get<number>('words', evaluation.jobId);
  const value = (current?.value ?? 0) + words;
  return { writes: [{ table: 'words', key: evaluation.jobId, value, readIndex: current?.modifyIndex ?? 0 }] };
}
