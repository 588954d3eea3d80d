import type { Scheduler } from '../../src/index.js';

// Runs on a pool thread: count the words of the payload, add them to the job's record, and hand back the total.
const wordCount: Scheduler<string, number> = async (evaluation, ctx) => {
  const words = evaluation.payload.split(/\s+/).filter(Boolean).length;
  const current = ctx.snapshot.get<number>('words', evaluation.jobId);
  const value = (current?.value ?? 0) + words;
  return { writes: [{ table: 'words', key: evaluation.jobId, value, readIndex: current?.modifyIndex ?? 0 }], value };
};
export default wordCount;
