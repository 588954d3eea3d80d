/** Flags of the benchmarks that also run as scripts on their own (`node dist/bench/<name>.bench.js --flag n`). */

/** The whole number after `name` on the command line, or `fallback`; anything below `min` is refused. */
export function integerArg(name: string, fallback: number, min = 1): number {
  const argv = process.argv;
  const at = argv.indexOf(name);
  if (at < 0) return fallback;
  const raw = argv[at + 1];
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`Expected ${name} to be a whole number >= ${min}, got ${String(raw)}`);
  return value;
}
