import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { adminPool, dropSchema, schemaName, skipWithoutDatabase } from './helpers.js';
import { openBackend } from './backend-harness.js';

test('smoke', { skip: skipWithoutDatabase }, async () => {
  const schema = schemaName();
  const admin = adminPool();
  after(async () => { await dropSchema(admin, schema); await admin.end(); });
  const b = await openBackend({ schema });
  try {
    const h = b.broker.enqueue({ id: 'e1', jobId: 'j', type: 'service' });
    await h.accepted;
    console.log(await b.broker.stats(), await b.broker.inspect('e1'));
    const d = await b.broker.dequeue(['service'], 1000);
    console.log(d);
    assert.ok(d);
    await b.broker.ack(d.evaluation.id, d.token, { value: 42, index: 0 });
    console.log(await h.done);
    const r = await b.state.write((t) => t.put('allocs', 'x', { a: 1 }));
    console.log(r, b.state.index);
    const e2 = b.broker.enqueue({ id: 'e2', jobId: 'j2', type: 'service' });
    const d2 = (await b.broker.dequeue(['service'], 1000))!;
    const out = await b.plans.submit({ writes: [{ table: 'allocs', key: 'y', value: 2, readIndex: 0 }] }, { evaluationId: 'e2', token: d2.token, ack: { value: 'v', attempts: 1 } });
    console.log(out, await e2.done, b.state.snapshot().get('allocs', 'y'));
  } finally {
    await b.close();
  }
});
