/**
 * Every option of `EngineOptions` says its default in its doc comment (`@default`, what an editor shows on hover),
 * and the numeric ones say what `engineDefaults` applies.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { backoffDefaults } from '../../src/backoff.js';
import { evalBrokerDefaults } from '../../src/broker/broker-options.js';
import { engineDefaults } from '../../src/engine/options.js';

const source = readFileSync(new URL('../../../src/engine/options.ts', import.meta.url), 'utf8');

/** `key → doc comment` of each member of `interface EngineOptions`. */
function documented(): Map<string, string> {
  const body = /export interface EngineOptions \{([\s\S]*?)\n\}/.exec(source)?.[1];
  assert.ok(body !== undefined, 'src/engine/options.ts declares interface EngineOptions');
  const out = new Map<string, string>();
  for (const m of body.matchAll(/(?:\/\*\*([\s\S]*?)\*\/\s*)?readonly (\w+)\?:/g)) out.set(m[2]!, m[1] ?? '');
  return out;
}

test('every EngineOptions option has @default in its doc comment', () => {
  const docs = documented();
  assert.ok(docs.size >= 20, `found ${docs.size} options`);
  for (const [key, doc] of docs) assert.match(doc, /@default \S/, `${key} documents its default`);
});

test('the numeric @defaults are the ones engineDefaults applies', () => {
  const docs = documented();
  for (const [key, value] of Object.entries(engineDefaults)) {
    if (key === 'workersPerThread') continue;
    const text = /@default (\S+)/.exec(docs.get(key) ?? '')?.[1];
    assert.equal(Number(text?.replaceAll('_', '')), value, `${key}: @default ${text} vs engineDefaults ${value}`);
  }
  assert.match(docs.get('workers')!, new RegExp(`@default \`threads\\.max × ${engineDefaults.workersPerThread}\``));
});

test('the structured @defaults of backoff and broker spell out backoffDefaults and evalBrokerDefaults', () => {
  const docs = documented();
  for (const [key, value] of Object.entries(backoffDefaults)) {
    assert.ok(docs.get('backoff')!.includes(`${key}: ${typeof value === 'string' ? `'${value}'` : value}`), `backoff.${key}`);
  }
  for (const [key, value] of Object.entries(evalBrokerDefaults)) assert.ok(docs.get('broker')!.includes(`${key}: ${value}`), `broker.${key}`);
});
