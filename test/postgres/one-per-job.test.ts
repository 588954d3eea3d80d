/**
 * One per job across processes: three backends on one schema enqueue evaluations of the same few jobs at once and
 * work them off concurrently. Sampled all along, no job ever has two evaluations ready or unacked; in the end every
 * evaluation was acked or superseded, once, and none is left.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PostgresBackend } from '../../src/postgres/backend.js';
import { openBackend } from './backend-harness.js';
import { adminPool, dropSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';

requireDatabaseInCI();

const JOBS = 5;
const PER_BACKEND = 40;

async function work(backend: PostgresBackend, stop: () => boolean): Promise<number> {
  let acked = 0;
  while (!stop()) {
    const batch = await backend.broker.dequeueMany(['service'], 8, 50);
    await Promise.all(batch.map(async (d) => {
      await backend.broker.ack(d.evaluation.id, d.token);
      acked++;
    }));
  }
  return acked;
}

test('three backends, the same jobs: never two ready-or-unacked evaluations of one job; all acked or superseded', { skip: skipWithoutDatabase, timeout: 120_000 }, async () => {
  const schema = schemaName('job');
  const admin = adminPool();
  const backends = await Promise.all([0, 1, 2].map(() => openBackend({ schema })));
  const S = `"${schema}"`;
  try {
    let done = false;
    let workers: Promise<number>[] | undefined;
    const handles = [];
    for (let i = 0; i < PER_BACKEND; i++) {
      for (const [n, b] of backends.entries()) handles.push(b.broker.enqueue({ id: `b${n}-${i}`, jobId: `job-${i % JOBS}`, type: 'service', modifyIndex: i }));
    }
    const outcomes = Promise.allSettled(handles.map((h) => h.done));
    await Promise.all(handles.map((h) => h.accepted));
    let samples = 0;
    for (;;) {
      const { rows } = await admin.query(
        `SELECT namespace, job_id, count(*)::int AS n FROM ${S}.evals WHERE state IN ('ready', 'unacked') AND queue <> '_failed'
          GROUP BY namespace, job_id HAVING count(*) > 1`,
      );
      assert.deepEqual(rows, [], 'a job with two evaluations ready or unacked');
      samples++;
      // The workers start after the first sample, so that the samples see the work going on, not only its end.
      workers ??= backends.map((b) => work(b, () => done));
      const left = (await admin.query(`SELECT count(*)::int AS n FROM ${S}.evals WHERE state IN ('ready', 'unacked', 'pending', 'waiting')`)).rows[0].n;
      if (left === 0) break;
    }
    done = true;
    const acked = (await Promise.all(workers!)).reduce((a, b) => a + b, 0);
    const settled = await outcomes;
    const superseded = settled.filter((s) => s.status === 'rejected' && (s.reason as { code?: string }).code === 'ERR_SUPERSEDED').length;
    assert.equal(settled.filter((s) => s.status === 'fulfilled').length, acked);
    assert.equal(acked + superseded, handles.length, `${acked} acked + ${superseded} superseded`);
    const states = (await admin.query(`SELECT state, count(*)::int AS n FROM ${S}.evals GROUP BY state ORDER BY state`)).rows;
    assert.ok(superseded > 0, 'newer evaluations superseded older pending ones');
    assert.deepEqual(states, [{ state: 'acked', n: acked }, ...(superseded > 0 ? [{ state: 'cancelable', n: superseded }] : [])]);
    assert.ok(samples > 1, 'sampled while the work went on');
  } finally {
    await Promise.all(backends.map((b) => b.close()));
    await dropSchema(admin, schema);
    await admin.end();
  }
});
