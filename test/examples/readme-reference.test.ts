/**
 * The rest of the README's reference cannot drift either: the metrics table (docs/metrics.md, linked from the README's
 * Metrics section) lists exactly the metrics registered in src/, the errors table exactly the codes of src/errors.ts,
 * and the quick start shows the files of examples/quickstart/ (which run and print what the README says).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

// Compiled tests live in <outDir>/test/examples/: the sources are three levels up.
const root = new URL('../../../', import.meta.url);
const readme = readFileSync(new URL('README.md', root), 'utf8');
const metricsDoc = readFileSync(new URL('docs/metrics.md', root), 'utf8');

function sourceFiles(dir: URL): URL[] {
  const out: URL[] = [];
  for (const name of readdirSync(dir)) {
    const url = new URL(name, dir);
    if (statSync(url).isDirectory()) out.push(...sourceFiles(new URL(`${name}/`, dir)));
    else if (name.endsWith('.ts')) out.push(url);
  }
  return out;
}

/** The lines of the README section that starts with `## <title>`. */
function section(title: string): string {
  const start = readme.indexOf(`\n## ${title}\n`);
  assert.ok(start >= 0, `README has a "## ${title}" section`);
  const end = readme.indexOf('\n## ', start + 1);
  return readme.slice(start, end < 0 ? undefined : end);
}

test('the metrics table lists exactly the metrics registered in src/', () => {
  const registered = new Set<string>();
  for (const file of sourceFiles(new URL('src/', root))) {
    for (const m of readFileSync(file, 'utf8').matchAll(/'(tickpool_[a-z_]+)'/g)) registered.add(m[1]!);
  }
  assert.ok(registered.size >= 20, `expected the metrics of src/, found ${registered.size}`);
  assert.match(section('Metrics'), /docs\/metrics\.md/, "the README's Metrics section links docs/metrics.md");
  const documented = new Set([...metricsDoc.matchAll(/^\| `(tickpool_[a-z_]+)(?:\{[a-z_,]+\})?` \|/gm)].map((m) => m[1]!));
  assert.deepEqual([...documented].sort(), [...registered].sort());
});

test('the errors table lists exactly the error classes and codes of src/errors.ts', () => {
  const source = readFileSync(new URL('src/errors.ts', root), 'utf8');
  const declared = new Map<string, string>();
  for (const m of source.matchAll(/export class (\w+) extends \w+ \{\s*(?:\/\*\*[\s\S]*?\*\/\s*)?(?:override )?readonly code: ErrorCode = '(ERR_[A-Z_]+)'/g)) {
    declared.set(m[2]!, m[1]!);
  }
  assert.ok(declared.size >= 25, `expected the error classes, found ${declared.size}`);
  const documented = new Map([...section('Errors').matchAll(/^\| `(ERR_[A-Z_]+)` \| `(\w+)` \|/gm)].map((m) => [m[1]!, m[2]!]));
  assert.deepEqual([...documented.entries()].sort(), [...declared.entries()].sort());
});

test("the quick start shows examples/quickstart/ as it is, importing 'tickpool'", () => {
  const quick = section('Quick start');
  const blocks = [...quick.matchAll(/```ts\n\/\/ (\S+)\n([\s\S]*?)```/g)].map((m) => ({ file: m[1]!, code: m[2]! }));
  assert.deepEqual(
    blocks.map((b) => b.file),
    ['scheduler.ts', 'main.ts'],
  );
  let lines = 0;
  for (const { file, code } of blocks) {
    const source = readFileSync(new URL(`examples/quickstart/${file}`, root), 'utf8').replaceAll("'../../src/index.js'", "'tickpool'");
    assert.equal(code, source, `README block ${file} = examples/quickstart/${file}`);
    lines += source.trimEnd().split('\n').length;
  }
  assert.ok(lines < 30, `the quick start is under 30 lines, got ${lines}`);
});

test('the quick start runs and prints the counts the README promises', { timeout: 30_000 }, async () => {
  const main = fileURLToPath(new URL('../../examples/quickstart/main.js', import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, [main]);
  assert.deepEqual(stdout.trim().split('\n').sort(), ['a 6', 'b 3', 'c 3']);
});
