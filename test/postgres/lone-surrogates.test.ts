/**
 * A key that is not well-formed Unicode (a lone UTF-16 surrogate) would be stored by the driver with U+FFFD in its
 * place, so that two different ids became one row. Both backends refuse such keys at the entry, by the same rule
 * (`storable-key.ts`), and agree on every string: what one accepts the other accepts, and PostgreSQL then holds it
 * exactly.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Registry } from 'prom-client';
import { EvalBroker } from '../../src/broker/eval-broker.js';
import type { EvaluationInput } from '../../src/broker/evaluation.js';
import { openBackend, silentLogger } from './backend-harness.js';
import { adminPool, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';

requireDatabaseInCI();

const refusedAs = (e: unknown): string => (e as { code?: string }).code ?? `uncoded ${String(e)}`;

test("an id with a lone surrogate is refused in both backends; 'sur\\uFFFDx' is then a new id of its own", { skip: skipWithoutDatabase, timeout: 30_000 }, async () => {
  const schema = schemaName('surrogate');
  const admin = adminPool();
  const backend = await openBackend({ schema });
  const memory = new EvalBroker({ logger: silentLogger, registry: new Registry(), knownTypes: ['service'] });
  try {
    for (const [field, input] of [
      ['evaluation.id', { id: 'sur\uD800x', type: 'service' }],
      ['evaluation.jobId', { id: 'j', jobId: 'sur\uDC00x', type: 'service' }],
      ['evaluation.namespace', { id: 'n', namespace: '\uD83D', type: 'service' }],
    ] as const) {
      for (const broker of [backend.broker, memory]) {
        assert.throws(
          () => broker.enqueue(input),
          (e: unknown) => refusedAs(e) === 'ERR_INVALID_EVALUATION' && (e as Error).message.includes(field) && /lone surrogate/.test((e as Error).message),
          field,
        );
      }
    }
    const handle = backend.broker.enqueue({ id: 'sur\uFFFDx', type: 'service' });
    await handle.accepted;
    const { rows } = await admin.query<{ id: string; state: string }>(`SELECT id, state FROM "${schema}".evals`);
    assert.deepEqual(rows, [{ id: 'sur\uFFFDx', state: 'ready' }], 'admitted as new work, not taken for one already held');
    assert.equal((await backend.broker.dequeue(['service'], 10_000))?.evaluation.id, 'sur\uFFFDx');
  } finally {
    await backend.close();
    await dropSchema(admin, schema);
    await admin.end();
  }
});

test('property: for any string as an id, job id or namespace, both backends accept or refuse it alike, and PostgreSQL keeps an accepted one exactly', { skip: skipWithoutDatabase, timeout: 120_000 }, async () => {
  const schema = schemaName('surrogate');
  const admin = adminPool();
  const backend = await openBackend({ schema });
  const memory = new EvalBroker({ logger: silentLogger, registry: new Registry(), knownTypes: ['service'] });
  let n = 0;
  try {
    // 'binary' units reach every UTF-16 code unit: NULs and lone surrogates come up often.
    const key = fc.oneof(fc.string({ unit: 'binary', maxLength: 12 }), fc.constantFrom('\u0000', '\uD800', '\uDFFF', 'a\uD800b', '\uFFFD'));
    await fc.assert(
      fc.asyncProperty(key, fc.constantFrom('id', 'jobId', 'namespace'), async (value, field) => {
        // Ids kept distinct between runs: a suffix after the value, which keeps what the value is (lone, NUL, empty).
        const id = field === 'id' ? (value.length === 0 ? value : `${value}#${n}`) : `p${n}`;
        n++;
        const input: EvaluationInput = field === 'id' ? { id, type: 'service' } : { id, type: 'service', [field]: value };
        const outcome = (broker: { enqueue(e: EvaluationInput): { accepted: Promise<void> } }): { refused: string } | { accepted: Promise<void> } => {
          try {
            return { accepted: broker.enqueue(input).accepted };
          } catch (error) {
            return { refused: refusedAs(error) };
          }
        };
        const inMemory = outcome(memory);
        const onPg = outcome(backend.broker);
        const label = `${field} ${JSON.stringify(value)}`;
        assert.deepEqual('refused' in onPg ? onPg : 'accepted', 'refused' in inMemory ? inMemory : 'accepted', label);
        if ('accepted' in onPg) {
          await onPg.accepted;
          // Read back and compared here: a comparison in SQL would convert a lone surrogate in the parameter too.
          const { rows } = await admin.query<{ id: string; job_id: string; namespace: string }>(`SELECT id, job_id, namespace FROM "${schema}".evals WHERE seq = (SELECT max(seq) FROM "${schema}".evals)`);
          const stored = { id: rows[0]!.id, jobId: rows[0]!.job_id, namespace: rows[0]!.namespace };
          assert.equal(stored[field], field === 'id' ? id : value, `stored exactly: ${label}`);
        }
      }),
      { numRuns: 300 },
    );
  } finally {
    await backend.close();
    await dropSchema(admin, schema);
    await admin.end();
  }
});
