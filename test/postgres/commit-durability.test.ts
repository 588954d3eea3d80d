/**
 * Which of the broker's transactions wait for their WAL flush: an enqueue and an ack do (`accepted` and `done`
 * promise durability), a lease does not (a lease forgotten by a database crash is delivered again and fenced by its
 * token). Each function is called inside an explicit transaction, and the setting its COMMIT will obey is read
 * before that COMMIT.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, describe, test } from 'node:test';
import { encodeValue } from '../../src/postgres/codec.js';
import { adminPool, dropSchema, migratedSchema, requireDatabaseInCI, schemaName, skipWithoutDatabase } from './helpers.js';

requireDatabaseInCI();

describe('commit durability of the broker\'s transactions', { skip: skipWithoutDatabase }, () => {
  const admin = skipWithoutDatabase === false ? adminPool() : undefined;
  const schema = schemaName();
  after(async () => {
    await dropSchema(admin!, schema);
    await admin?.end();
  });

  test('an enqueue and an ack commit synchronously; a lease asynchronously, for its own transaction only', async () => {
    await migratedSchema(schema);
    const S = `"${schema}"`;
    const node = randomUUID();
    const client = await admin!.connect();
    // The setting a COMMIT right now would obey.
    const commitMode = async (): Promise<string> => (await client.query<{ s: string }>(`SELECT current_setting('synchronous_commit') AS s`)).rows[0]!.s;
    try {
      assert.equal(await commitMode(), 'on');
      await client.query('BEGIN');
      await client.query(
        `SELECT * FROM ${S}.enqueue($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::bigint[], $7::bigint[], $8::float8[],
           $9::float8[], $10::bytea[], $11::jsonb[], $12::uuid)`,
        [['e1'], ['default'], ['job-1'], ['place'], [50], [0], [0], [null], [null], [encodeValue({ id: 'e1' })], [null], node],
      );
      assert.equal(await commitMode(), 'on', 'an enqueue waits for its flush');
      await client.query('COMMIT');

      await client.query('BEGIN');
      const leased = await client.query<{ id: string; token: string }>(`SELECT * FROM ${S}.lease_ready($1::text[], 1, 30000, $2::uuid, 0)`, [['place'], node]);
      assert.deepEqual(leased.rows.map((r) => r.id), ['e1']);
      assert.equal(await commitMode(), 'off', 'a lease does not wait for its flush');
      await client.query('COMMIT');
      assert.equal(await commitMode(), 'on', 'the setting ends with the lease\'s transaction');

      await client.query('BEGIN');
      const acked = await client.query<{ status: string }>(
        `SELECT * FROM ${S}.ack_many($1::text[], $2::text[], $3::bytea[], $4::bigint[], $5::int[], $6::text[], $7::text[], $8)`,
        [['e1'], [leased.rows[0]!.token], [encodeValue(undefined)], [0], [1], ['default'], ['job-1'], node],
      );
      assert.equal(acked.rows.length, 1);
      assert.equal(await commitMode(), 'on', 'an ack waits for its flush');
      await client.query('COMMIT');
      const { rows } = await client.query<{ status: string }>(`SELECT outcome->>'status' AS status FROM ${S}.evals WHERE id = 'e1'`);
      assert.deepEqual(rows, [{ status: 'acked' }]);
    } finally {
      client.release();
    }
  });
});
