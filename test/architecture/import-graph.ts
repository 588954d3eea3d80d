/**
 * The import graph of the TypeScript sources, as the compiler's pre-processor reads it: `import`, `import type`,
 * `export … from` and `import()` alike. Scanning the sources rather than the compiled JavaScript sees type-only
 * imports too (they vanish from the output); under `verbatimModuleSyntax` every runtime import of the output is
 * written in the source as it is, so this graph holds the runtime graph as well.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';

/** Module (a path relative to the root, `/`-separated) → the modules it imports, in order. */
export type ImportGraph = ReadonlyMap<string, readonly string[]>;

function sourceFiles(dir: string, out: string[] = []): string[] {
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) sourceFiles(path, out);
    else if (path.endsWith('.ts') || path.endsWith('.cts')) out.push(path);
  }
  return out;
}

const key = (root: string, path: string): string => relative(root, path).split(sep).join('/');

/** The graph of every `.ts` and `.cts` file under `dirs` (relative to `root`); imports of packages are left out. */
export function importGraph(root: string, dirs: readonly string[]): { graph: ImportGraph; unresolved: string[] } {
  const graph = new Map<string, string[]>();
  const unresolved: string[] = [];
  for (const file of dirs.flatMap((d) => sourceFiles(join(root, d)))) {
    const deps: string[] = [];
    for (const { fileName } of ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const target = resolve(dirname(file), fileName).replace(/\.js$/, '.ts').replace(/\.cjs$/, '.cts');
      if (existsSync(target)) deps.push(key(root, target));
      else unresolved.push(`${key(root, file)} → ${fileName}`);
    }
    graph.set(key(root, file), deps);
  }
  return { graph, unresolved };
}

/** Every cycle's members (strongly connected components of two or more modules, or one importing itself), sorted. */
export function importCycles(graph: ImportGraph): string[][] {
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, counter);
    low.set(v, counter++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const members: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      members.push(w);
    } while (w !== v);
    if (members.length > 1 || (graph.get(v) ?? []).includes(v)) cycles.push(members.sort());
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return cycles.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** Every module reachable from `starts` (the starts included). */
export function reachable(graph: ImportGraph, starts: Iterable<string>): Set<string> {
  const seen = new Set<string>();
  const todo = [...starts];
  while (todo.length > 0) {
    const v = todo.pop()!;
    if (seen.has(v)) continue;
    seen.add(v);
    todo.push(...(graph.get(v) ?? []));
  }
  return seen;
}

/**
 * Imports that break a fence: each `from → to` where `from` is in `inside` and `to` is outside `allowed`. The
 * allowed modules are `allowed` roots and, transitively, what they import: a module the replica needs may be
 * imported by thread code too.
 */
export function fenceBreaks(graph: ImportGraph, inside: (module: string) => boolean, allowedRoots: (module: string) => boolean): string[] {
  const allowed = reachable(graph, [...graph.keys()].filter((m) => allowedRoots(m) && !inside(m)));
  const breaks: string[] = [];
  for (const [from, deps] of graph) {
    if (!inside(from)) continue;
    for (const to of deps) if (!inside(to) && !allowed.has(to)) breaks.push(`${from} → ${to}`);
  }
  return breaks.sort();
}
