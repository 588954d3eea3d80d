/**
 * Later migrations that change a function take its text from the migration that defined it and change it at named
 * places, each checked to occur exactly once, so that nothing else in it can differ from what was measured and
 * tested there.
 */

/**
 * The definition of function `name` in `schema` (the text of an earlier migration, which defines it with CREATE or
 * CREATE OR REPLACE), as CREATE OR REPLACE.
 */
export function functionText(schema: string, S: string, name: string, migration: number): string {
  const heads = [`CREATE FUNCTION ${S}.${name}(`, `CREATE OR REPLACE FUNCTION ${S}.${name}(`];
  const found = heads.flatMap((head) => {
    const at = schema.indexOf(head);
    return at < 0 ? [] : [{ head, at, again: schema.indexOf(head, at + 1) >= 0 }];
  });
  const only = found.length === 1 && !found[0]!.again ? found[0] : undefined;
  const end = only === undefined ? -1 : schema.indexOf('\n$$;\n', only.at);
  if (only === undefined || end < 0) throw new Error(`migration ${migration}: the text defines ${name} other than once`);
  return `CREATE OR REPLACE FUNCTION ${S}.${name}(${schema.slice(only.at + only.head.length, end)}\n$$;\n`;
}

/** `text` with each `[from, to]` replaced, each `from` required to occur exactly once. */
export function replacedOnce(text: string, replacements: readonly (readonly [string, string])[], what: string): string {
  let result = text;
  for (const [from, to] of replacements) {
    const at = result.indexOf(from);
    if (at < 0 || result.indexOf(from, at + 1) >= 0) throw new Error(`${what} holds ${JSON.stringify(from)} other than once`);
    result = result.slice(0, at) + to + result.slice(at + from.length);
  }
  return result;
}
