/**
 * The README's options tables cannot drift from the code: every option of `createEngine` is documented, every
 * documented option exists, and every documented default is the one `options.ts` (and the broker and backoff
 * defaults) actually apply.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { backoffDefaults } from '../../src/backoff.js';
import { evalBrokerDefaults } from '../../src/broker/broker-options.js';
import { InvalidOptionError } from '../../src/index.js';
import { engineDefaults } from '../../src/engine/options.js';
import { resolveEngineOptions } from '../../src/engine/options.js';

// Compiled tests live in <outDir>/test/examples/: the sources are three levels up.
const root = new URL('../../../', import.meta.url);
const readme = readFileSync(new URL('README.md', root), 'utf8');
const optionsSource = readFileSync(new URL('src/engine/options.ts', root), 'utf8');

interface Row {
  readonly option: string;
  readonly type: string;
  readonly defaultText: string;
  readonly meaning: string;
}

/** Rows of every `| option | type | default | meaning |` table in the README. */
function optionRows(): Row[] {
  const rows: Row[] = [];
  let inTable = false;
  for (const line of readme.split('\n')) {
    if (/^\|\s*option\s*\|\s*type\s*\|\s*default\s*\|\s*meaning\s*\|\s*$/.test(line)) {
      inTable = true;
      continue;
    }
    if (!inTable) continue;
    if (!line.startsWith('|')) {
      inTable = false;
      continue;
    }
    if (/^\|\s*-+/.test(line)) continue;
    // Split on cell bars, not on escaped `\|` inside a cell.
    const cells = line.split(/(?<!\\)\|/).slice(1, -1).map((c) => c.trim());
    assert.equal(cells.length, 4, `an options row has 4 cells: ${line}`);
    const option = /^`([\w.]+)`$/.exec(cells[0]!)?.[1];
    assert.ok(option !== undefined, `the option cell is one code span: ${line}`);
    rows.push({ option, type: cells[1]!, defaultText: cells[2]!, meaning: cells[3]! });
  }
  return rows;
}

/** The keys of `interface EngineOptions` in src/engine/options.ts. */
function engineOptionKeys(): string[] {
  const body = /export interface EngineOptions \{([\s\S]*?)\n\}/.exec(optionsSource)?.[1];
  assert.ok(body !== undefined, 'src/engine/options.ts declares interface EngineOptions');
  return [...body.matchAll(/^\s*readonly (\w+)\?:/gm)].map((m) => m[1]!);
}

/** A default cell holding one number in a code span, e.g. `5000`. */
function numericDefault(row: Row): number {
  const text = /^`(-?[\d_]+)`$/.exec(row.defaultText)?.[1];
  assert.ok(text !== undefined, `${row.option}: the default is a number in a code span, got ${row.defaultText}`);
  return Number(text.replaceAll('_', ''));
}

const rows = optionRows();
const byName = new Map(rows.map((r) => [r.option, r]));

test('the README has option tables, each option once, each with a type and a meaning', () => {
  assert.ok(rows.length >= 20, `expected the options tables, found ${rows.length} rows`);
  assert.equal(byName.size, rows.length, 'no option is documented twice');
  for (const row of rows) {
    assert.notEqual(row.type, '', `${row.option} has a type`);
    assert.notEqual(row.defaultText, '', `${row.option} has a default`);
    assert.ok(row.meaning.length > 10, `${row.option} has a meaning`);
  }
});

test('every createEngine option is documented, and every documented top-level option exists', () => {
  const keys = engineOptionKeys();
  assert.ok(keys.length >= 20, `expected the EngineOptions keys, found ${keys.length}`);
  const documented = rows.map((r) => r.option).filter((o) => !o.includes('.'));
  assert.deepEqual([...documented].sort(), [...keys].sort());
  // The runtime agrees: each documented key is accepted, an unknown one is not.
  for (const key of documented) assert.doesNotThrow(() => resolveEngineOptions({ threads: 1, [key]: undefined }), key);
  assert.throws(() => resolveEngineOptions({ threads: 1, notAnOption: 1 }), InvalidOptionError);
});

test('numeric defaults of createEngine match engineDefaults and what resolveEngineOptions applies', () => {
  const resolved = resolveEngineOptions({ threads: 1 }) as unknown as Record<string, unknown>;
  const numeric = Object.entries(engineDefaults).filter(([key]) => key !== 'workersPerThread');
  assert.ok(numeric.length >= 8);
  for (const [key, value] of numeric) {
    const row = byName.get(key);
    assert.ok(row !== undefined, `engineDefaults.${key} is documented`);
    assert.equal(numericDefault(row), value, `${key}: README default vs engineDefaults`);
    assert.equal(resolved[key], value, `${key}: engineDefaults vs resolveEngineOptions`);
  }
});

test('the machine-dependent and structured defaults say what the code does', () => {
  assert.match(byName.get('threads')!.defaultText, /availableParallelism\(\)/);
  const workers = byName.get('workers')!.defaultText;
  assert.match(workers, new RegExp(`threads\\.max × ${engineDefaults.workersPerThread}\\b`));
  const resolved = resolveEngineOptions({ threads: { min: 1, max: 3 } });
  assert.equal(resolved.workers, 3 * engineDefaults.workersPerThread, 'workers default is threads.max × workersPerThread');
  assert.equal(byName.get('tables')!.defaultText, '`[]`');
  assert.deepEqual(resolved.tables, []);
  assert.equal(byName.get('schedulers')!.defaultText, '`{}`');
  assert.deepEqual(resolved.schedulers, {});
  assert.equal(byName.get('handlers')!.defaultText, '`{}`');
  assert.deepEqual(resolved.handlers, {});
  assert.equal(byName.get('evaluatePlan')!.defaultText, 'none');
  assert.equal(resolved.evaluatePlan, undefined);
  assert.equal(byName.get('resourceLimits')!.defaultText, 'none');
  assert.equal(resolved.resourceLimits, undefined);
  assert.match(byName.get('logger')!.defaultText, /`warn`/);
  assert.equal(resolved.logger.level, 'warn');
  assert.equal(byName.get('clock')!.defaultText, '`systemClock`');
});

test('backoff defaults match backoffDefaults', () => {
  for (const [key, value] of Object.entries(backoffDefaults)) {
    const row = byName.get(`backoff.${key}`);
    assert.ok(row !== undefined, `backoff.${key} is documented`);
    if (typeof value === 'number') assert.equal(numericDefault(row), value, `backoff.${key}`);
    else assert.equal(row.defaultText, `\`'${value}'\``, `backoff.${key}`);
  }
  const documented = rows.filter((r) => r.option.startsWith('backoff.')).map((r) => r.option.slice('backoff.'.length));
  assert.deepEqual(documented.sort(), Object.keys(backoffDefaults).sort(), 'no backoff option documented that does not exist');
  assert.deepEqual(resolveEngineOptions({ threads: 1 }).backoff, backoffDefaults);
});

test('broker defaults match evalBrokerDefaults', () => {
  for (const [key, value] of Object.entries(evalBrokerDefaults)) {
    const row = byName.get(`broker.${key}`);
    assert.ok(row !== undefined, `broker.${key} is documented`);
    assert.equal(numericDefault(row), value, `broker.${key}`);
  }
  const documented = rows.filter((r) => r.option.startsWith('broker.')).map((r) => r.option.slice('broker.'.length));
  // `random` is the one non-numeric broker option an engine user may set (clock, logger and registry are the engine's).
  assert.deepEqual(documented.sort(), [...Object.keys(evalBrokerDefaults), 'random'].sort());
  assert.equal(byName.get('broker.random')!.defaultText, '`Math.random`');
});
