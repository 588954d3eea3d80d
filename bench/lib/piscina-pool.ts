/**
 * The raw Piscina baselines' pool. Piscina marks the threads it starts with the pool as ready before they have
 * loaded their task module, and Piscina 5 loads that module through `require()`; terminating a thread while Node 20
 * is inside that load aborts the whole process with a fatal error (`loadESMFromCJS` in its report). A short round
 * (a few ms of tiny tasks, all on the first thread) could destroy its pool that early, as could a run that ends
 * right after an abort replaced a thread. So every thread runs a barrier task before the pool is used and again
 * before it is destroyed: a thread that has run a task has loaded its module.
 */
import { Piscina } from 'piscina';

const BARRIER = new URL('../fixtures/piscina-barrier.js', import.meta.url).href;

async function everyThreadLoaded(pool: Piscina, threads: number): Promise<void> {
  const arrived = new Int32Array(new SharedArrayBuffer(4));
  await Promise.all(Array.from({ length: threads }, () => pool.run({ arrived, threads }, { filename: BARRIER })));
}

/** Runs `use` with a Piscina pool of `threads` threads on `filename`, every thread loaded before and after. */
export async function withPiscina<T>(filename: URL, threads: number, use: (pool: Piscina) => Promise<T>): Promise<T> {
  const pool = new Piscina({ filename: filename.href, minThreads: threads, maxThreads: threads });
  try {
    await everyThreadLoaded(pool, threads);
    const result = await use(pool);
    await everyThreadLoaded(pool, threads);
    return result;
  } finally {
    await pool.destroy();
  }
}
