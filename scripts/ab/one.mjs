// One measurement of one build, in a fresh process, for A/B comparisons of two builds (see ab.sh):
//
//   node --expose-gc scripts/ab/one.mjs <build dir> throughput|run|idle|cancel
//
// <build dir> is a checkout with `npx tsc -p tsconfig.json` done (its dist/bench/engine.bench.js is used). Prints the
// directory, the figure and the bench's JSON result: throughput = compareThroughput(2, 200000) (no-op evaluations),
// run = compareRunThroughput(2, 100000) (engine.run() in flight), idle = compareIdleLatency(2, 2000),
// cancel = compareCancelLatency(2, 200). Every figure is a ratio against raw Piscina in the same process.
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

const [dir, what] = process.argv.slice(2);
if (dir === undefined || !['throughput', 'run', 'idle', 'cancel'].includes(what ?? '')) {
  process.stderr.write('usage: node --expose-gc scripts/ab/one.mjs <build dir> throughput|run|idle|cancel\n');
  process.exit(2);
}
const bench = await import(pathToFileURL(resolve(dir, 'dist/bench/engine.bench.js')).href);
const result =
  what === 'throughput' ? await bench.compareThroughput(2, 200_000)
  : what === 'run' ? await bench.compareRunThroughput(2, 100_000)
  : what === 'idle' ? await bench.compareIdleLatency(2, 2_000)
  : await bench.compareCancelLatency(2, 200);
console.log(dir, what, JSON.stringify(result));
process.exit(0);
