// Bytes allocated on the main thread per no-op evaluation (or per engine.run() with `--run`), by allocating
// function: V8's sampling heap profiler with the objects collected by minor and major GCs included, over N
// evaluations after a warm-up. Deterministic to a few percent, so small allocation changes show where timings
// cannot:
//
//   node --expose-gc scripts/ab/alloc-per-evaluation.mjs <build dir> [N, default 100000] [--run]
import { Session } from 'node:inspector/promises';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const run = args.includes('--run');
const [dir, n = '100000'] = args.filter((a) => a !== '--run');
if (dir === undefined) {
  process.stderr.write('usage: node --expose-gc scripts/ab/alloc-per-evaluation.mjs <build dir> [N] [--run]\n');
  process.exit(2);
}
const count = Number(n);
const bench = await import(pathToFileURL(resolve(dir, 'dist/bench/engine.bench.js')).href);
const once = (k) => (run ? bench.engineRunThroughput(2, k) : bench.engineThroughput(2, k));
await once(20_000);
const session = new Session();
session.connect();
await session.post('HeapProfiler.startSampling', { samplingInterval: 256, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
await once(count);
const { profile } = await session.post('HeapProfiler.stopSampling');
const bySite = new Map();
let total = 0;
const walk = (node) => {
  const f = node.callFrame;
  const site = `${f.functionName || '(anonymous)'} ${f.url.replace(/.*\/(dist|node_modules)\//, '')}:${f.lineNumber + 1}`;
  if (node.selfSize > 0) {
    bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
    total += node.selfSize;
  }
  for (const child of node.children) walk(child);
};
walk(profile.head);
console.log(`${dir}: ${(total / count).toFixed(0)} B per ${run ? 'engine.run()' : 'evaluation'}`);
for (const [site, bytes] of [...bySite].sort((x, y) => y[1] - x[1]).slice(0, 30)) console.log(String((bytes / count).toFixed(0)).padStart(6), site);
process.exit(0);
