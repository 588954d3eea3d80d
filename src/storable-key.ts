/**
 * What a key may be: the one rule for every string that names something a backend stores and looks up by equality
 * (an evaluation's id, job id, namespace and type; a task's id; a record's table and key). Both backends apply it at
 * their public entries, so an input that one of them refuses the other refuses too, with the same code.
 *
 * The rule is what PostgreSQL can hold exactly, as an index key:
 * - no NUL (U+0000): `text` cannot hold it (SQLSTATE 22021), and the statement carrying it fails whole;
 * - well-formed UTF-16 (no lone surrogate): the driver encodes a lone surrogate as U+FFFD, so two different keys
 *   would become one row (`'a\uD800'` would alias `'a\uFFFD'`);
 * - at most `MAX_KEY_BYTES` in UTF-8: a btree entry over 2,704 bytes is refused (SQLSTATE 54000), and a record's
 *   key shares its index entry with its table's name.
 * In memory none of this breaks anything by itself; it is applied there so that code that runs on the in-memory
 * backend runs unchanged on PostgreSQL.
 */

/** The longest key, in UTF-8 bytes (a table name and a record key together stay within one btree entry). */
export const MAX_KEY_BYTES = 1_024;

/** What every key is expected to be, for `expected … got …` messages. */
export const KEY_EXPECTED = `a non-empty string of well-formed Unicode (no lone surrogate), without NUL (U+0000), of at most ${MAX_KEY_BYTES} bytes in UTF-8`;

/** Why `value` cannot be a key (a phrase for a message), or undefined when it can. */
export function keyProblem(value: unknown): string | undefined {
  if (typeof value !== 'string' || value.length === 0) return 'not a non-empty string';
  if (value.includes('\u0000')) return `a NUL (U+0000) at index ${value.indexOf('\u0000')}`;
  if (!value.isWellFormed()) return 'a lone surrogate';
  // A string of a third as many UTF-16 units cannot pass the limit in UTF-8: most are not measured.
  if (value.length > MAX_KEY_BYTES / 3) {
    const bytes = Buffer.byteLength(value, 'utf8');
    if (bytes > MAX_KEY_BYTES) return `${bytes} bytes in UTF-8`;
  }
  return undefined;
}

/** True when `value` may be a key. */
export function isStorableKey(value: unknown): value is string {
  return keyProblem(value) === undefined;
}

/**
 * Throws the caller's typed error (`make(name, expected, received)`) when `value` cannot be a key; the expectation
 * names the rule and what broke it.
 */
export function assertKey<E extends Error>(
  name: string,
  value: unknown,
  make: new (name: string, expected: string, received: unknown) => E,
): asserts value is string {
  const problem = keyProblem(value);
  if (problem === undefined) return;
  // Not a string at all: the plain expectation, as every other field states it.
  if (typeof value !== 'string' || value.length === 0) throw new make(name, 'a non-empty string', value);
  throw new make(name, `${KEY_EXPECTED} (this one has ${problem})`, value);
}
