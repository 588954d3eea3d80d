/**
 * A JSON parser that rejects an object with a key twice. `JSON.parse` keeps the last value of a duplicate key
 * silently, as most log pipelines do (others keep the first): a log line with one is a line whose meaning depends
 * on who reads it.
 */
export function parseStrictJson(text: string): unknown {
  let at = 0;
  const fail = (what: string): never => {
    throw new SyntaxError(`${what} at ${at} in ${text.length > 200 ? `${text.slice(0, 200)}…` : text}`);
  };
  const space = (): void => {
    while (at < text.length && ' \t\n\r'.includes(text[at]!)) at++;
  };
  const value = (): unknown => {
    space();
    const c = text[at];
    if (c === '{') {
      at++;
      const out: Record<string, unknown> = {};
      const seen = new Set<string>();
      space();
      if (text[at] === '}') {
        at++;
        return out;
      }
      for (;;) {
        space();
        if (text[at] !== '"') fail('expected a key');
        const key = string();
        if (seen.has(key)) fail(`duplicate key ${JSON.stringify(key)}`);
        seen.add(key);
        space();
        if (text[at++] !== ':') fail('expected ":"');
        Object.defineProperty(out, key, { value: value(), enumerable: true, writable: true, configurable: true });
        space();
        const next = text[at++];
        if (next === '}') return out;
        if (next !== ',') fail('expected "," or "}"');
      }
    }
    if (c === '[') {
      at++;
      const out: unknown[] = [];
      space();
      if (text[at] === ']') {
        at++;
        return out;
      }
      for (;;) {
        out.push(value());
        space();
        const next = text[at++];
        if (next === ']') return out;
        if (next !== ',') fail('expected "," or "]"');
      }
    }
    if (c === '"') return string();
    const literal = /^(?:-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(text.slice(at))?.[0];
    if (literal === undefined) fail('unexpected character');
    at += literal!.length;
    return JSON.parse(literal!) as unknown;
  };
  const string = (): string => {
    const start = at;
    at++;
    while (at < text.length && text[at] !== '"') at += text[at] === '\\' ? 2 : 1;
    if (at >= text.length) fail('unterminated string');
    at++;
    return JSON.parse(text.slice(start, at)) as string;
  };
  const result = value();
  space();
  if (at !== text.length) fail('trailing characters');
  return result;
}
