/**
 * Later migrations that change a function take its text from the migration that defined it and change it at named
 * places, each checked to occur exactly once, so that nothing else in it can differ from what was measured and
 * tested there.
 */

/** The definition of function `name` in `schema` (the text of an earlier migration), as CREATE OR REPLACE. */
export function functionText(schema: string, S: string, name: string, migration: number): string {
  const head = `CREATE FUNCTION ${S}.${name}(`;
  const start = schema.indexOf(head);
  const end = schema.indexOf('\n$$;\n', start);
  if (start < 0 || end < 0 || schema.indexOf(head, start + 1) >= 0) throw new Error(`migration ${migration}: the text defines ${name} other than once`);
  return `CREATE OR REPLACE FUNCTION ${S}.${name}(${schema.slice(start + head.length, end)}\n$$;\n`;
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
