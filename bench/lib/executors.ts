import type { Executor, QueuedRun, RunPromise, RunResult } from '../../src/tasks/types.js';

const DONE: Promise<RunResult> = Promise.resolve({});

/** An executor that does nothing and is done at once; `onEntry` sees each run as it enters. */
export function instantExecutor(onEntry?: (run: QueuedRun) => void): Executor {
  return {
    execute(run: QueuedRun): RunPromise {
      onEntry?.(run);
      return { run: () => run, wait: () => DONE, cancel: () => undefined };
    },
  };
}

/** An executor for benchmarks in which no run may become due: one that does is a bug in the benchmark. */
export function neverExecutor(): Executor {
  return {
    execute() {
      throw new Error('no run is due in this benchmark');
    },
  };
}
