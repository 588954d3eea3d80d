/**
 * `postgresBackend({...})`: its options are checked where they are given, before anything connects. Each refusal is
 * an `InvalidOptionError` (code `ERR_INVALID_OPTION`) naming the option, what was expected and what was received;
 * the defaults are `postgresDefaults`. No database: nothing here opens a connection.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidOptionError, TickpoolError } from '../../src/errors.js';
import { postgresBackend } from '../../src/postgres/index.js';
import { postgresDefaults, resolvePostgresOptions, type PoolLike } from '../../src/postgres/options.js';

const url = 'postgres://u:p@127.0.0.1:5432/db';

/** A pool by shape; never used, since nothing connects. */
const pool: PoolLike = {
  connect: () => Promise.reject(new Error('not used')),
  query: () => Promise.reject(new Error('not used')),
  on: () => undefined,
  end: () => Promise.resolve(),
};

/** The refusal of `options`: an InvalidOptionError about `name`, its message saying expected and received. */
function refuses(options: unknown, name: string, expected: RegExp, received: string): void {
  assert.throws(
    () => postgresBackend(options as never),
    (error: unknown) => {
      assert.ok(error instanceof InvalidOptionError, `an InvalidOptionError, got ${String(error)}`);
      assert.ok(error instanceof TickpoolError);
      assert.equal(error.code, 'ERR_INVALID_OPTION');
      assert.equal(error.details?.['name'], name);
      assert.match(error.message, new RegExp(`^Expected \`${name.replace('.', '\\.')}\` to be `));
      assert.match(String(error.details?.['expected']), expected);
      assert.ok(error.message.endsWith(`, got ${received}`), `${error.message} ends with the received ${received}`);
      return true;
    },
    `${JSON.stringify(options) ?? String(options)} → ${name}`,
  );
}

test('the defaults, and both ways to reach the database', () => {
  assert.deepEqual(postgresDefaults, { schema: 'tickpool', pollMs: 1000, runLogLimit: 100 });
  assert.deepEqual(resolvePostgresOptions({ connectionString: url }), { connectionString: url, pool: undefined, ...postgresDefaults });
  assert.deepEqual(resolvePostgresOptions({ pool, schema: 'a_1', pollMs: 10, runLogLimit: 1 }), {
    connectionString: undefined,
    pool,
    schema: 'a_1',
    pollMs: 10,
    runLogLimit: 1,
  });
  assert.equal(resolvePostgresOptions({ connectionString: url, schema: `_${'z'.repeat(39)}`, pollMs: 3_600_000, runLogLimit: 100_000 }).schema.length, 40);
  const factory = postgresBackend({ connectionString: url });
  assert.equal(factory.name, 'postgres');
  assert.ok(Object.isFrozen(factory));
});

test('options that are not an object', () => {
  for (const [bad, received] of [[null, '`null`'], ['postgres://x', '`"postgres://x"` (string)'], [[url], `\`["${url}"]\` (array)`], [42, '`42` (number)']] as const) {
    refuses(bad, 'options', /connectionString \| pool/, received);
  }
});

test('connectionString | pool: exactly one, each of its kind', () => {
  refuses(undefined, 'connectionString', /connection string, or a `pool`/, '`undefined`');
  refuses({}, 'connectionString', /connection string, or a `pool`/, '`undefined`');
  refuses({ schema: 'x' }, 'connectionString', /connection string, or a `pool`/, '`undefined`');
  refuses({ connectionString: url, pool }, 'pool', /absent when `connectionString` is given/, '`{}` (object)');
  refuses({ connectionString: '' }, 'connectionString', /non-empty string/, '`""` (string)');
  refuses({ connectionString: 5432 }, 'connectionString', /non-empty string/, '`5432` (number)');
  refuses({ pool: {} }, 'pool', /pg\.Pool/, '`{}` (object)');
  refuses({ pool: { connect() {}, query() {}, on() {} } }, 'pool', /pg\.Pool \(connect, query, on, end\)/, '`{}` (object)');
  refuses({ pool: 'pool' }, 'pool', /pg\.Pool/, '`"pool"` (string)');
});

test('schema: a lowercase SQL identifier of at most 40 characters', () => {
  for (const [bad, received] of [
    ['Tickpool', '`"Tickpool"` (string)'],
    ['1st', '`"1st"` (string)'],
    ['a-b', '`"a-b"` (string)'],
    ['', '`""` (string)'],
    ['"x"; DROP', '`"\\"x\\"; DROP"` (string)'],
    ['a'.repeat(41), `\`"${'a'.repeat(41)}"\` (string)`],
    [7, '`7` (number)'],
  ] as const) {
    refuses({ connectionString: url, schema: bad }, 'schema', /lowercase SQL identifier.*at most 40 characters/, received);
  }
});

test('pollMs: an integer number of ms from 10 to 3600000', () => {
  for (const [bad, received] of [
    [9, '`9` (number)'],
    [0, '`0` (number)'],
    [-1, '`-1` (number)'],
    [3_600_001, '`3600001` (number)'],
    [12.5, '`12.5` (number)'],
    [Number.NaN, '`NaN` (number)'],
    [Number.POSITIVE_INFINITY, '`Infinity` (number)'],
    ['1000', '`"1000"` (string)'],
  ] as const) {
    refuses({ connectionString: url, pollMs: bad }, 'pollMs', /^an integer number of ms from 10 to 3600000$/, received);
  }
});

test('runLogLimit: an integer from 1 to 100000', () => {
  for (const [bad, received] of [[0, '`0` (number)'], [100_001, '`100001` (number)'], [1.5, '`1.5` (number)'], ['100', '`"100"` (string)']] as const) {
    refuses({ connectionString: url, runLogLimit: bad }, 'runLogLimit', /^an integer from 1 to 100000$/, received);
  }
});

test('an unknown option is a mistake, not ignored: named with the known ones', () => {
  refuses({ connectionString: url, pollms: 100 }, 'pollms', /known option \(connectionString, pool, schema, pollMs, runLogLimit\)/, '`"pollms"` (string)');
  refuses({ connectionString: url, poolMs: 100 }, 'poolMs', /known option/, '`"poolMs"` (string)');
});
