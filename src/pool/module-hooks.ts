/**
 * Pool threads load user modules however the main thread loads its own.
 *
 * A pool thread inherits the main thread's `execArgv` (Piscina's `execArgv` is left unset, so Node copies the
 * parent's), which covers what Node does itself: `--experimental-strip-types` / `--experimental-transform-types`
 * (Node 22.6+) and `--import` preloads run on every thread. What it does not cover is tsx (`tsx main.ts`, `node
 * --import tsx`): its `--import` preload runs on each thread, but on Node versions whose worker threads do not run
 * module hooks of their own (Node 20, among others) it registers its ESM hooks on the main thread only, and a worker
 * thread's `import()` of a `.ts` file then fails with `ERR_UNKNOWN_FILE_EXTENSION`. So when main runs under tsx, each
 * thread registers tsx's ESM hooks itself (`tsx/esm/api`'s `register()`) before it imports a user module. On a Node
 * where tsx already registered them in the thread, the second registration chains the same hooks, which only costs
 * the second a look at source that is JavaScript by then.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { ModuleRef } from '../protocol/messages.js';

const PRELOAD_FLAGS: ReadonlySet<string> = new Set(['--import', '--loader', '--experimental-loader']);

/**
 * The module hooks every pool thread must register before importing user modules, for a main thread started with
 * `execArgv` (and `NODE_OPTIONS`) in `cwd`: `tsx/esm/api`'s `register` when main loads tsx, else none.
 */
export function threadModuleHooks(
  execArgv: readonly string[] = process.execArgv,
  nodeOptions: string | undefined = process.env['NODE_OPTIONS'],
  cwd: string = process.cwd(),
): ModuleRef[] {
  const hooks = new Map<string, ModuleRef>();
  for (const specifier of preloads([...execArgv, ...(nodeOptions?.split(/\s+/).filter(Boolean) ?? [])])) {
    const api = tsxEsmApi(specifier, cwd);
    if (api !== undefined) hooks.set(api, { url: api, exportName: 'register' });
  }
  return [...hooks.values()];
}

/** The module specifiers of `--import X`, `--import=X`, `--loader X`, … in `args`. */
function preloads(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const eq = arg.indexOf('=');
    const flag = eq < 0 ? arg : arg.slice(0, eq);
    if (!PRELOAD_FLAGS.has(flag)) continue;
    const value = eq < 0 ? args[++i] : arg.slice(eq + 1);
    if (value !== undefined && value !== '') out.push(value.replace(/^(["'])(.*)\1$/, '$2'));
  }
  return out;
}

/** The `file:` URL of tsx's ESM API when `specifier` (as main's preload resolves it from `cwd`) is part of tsx. */
function tsxEsmApi(specifier: string, cwd: string): string | undefined {
  let file: string;
  try {
    if (specifier.startsWith('file:')) file = fileURLToPath(specifier);
    else if (isAbsolute(specifier) || specifier.startsWith('.')) file = resolve(cwd, specifier);
    else file = createRequire(join(cwd, 'noop.js')).resolve(specifier);
  } catch {
    return undefined;
  }
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const manifest = join(dir, 'package.json');
    if (existsSync(manifest)) {
      const pkg = readJson(manifest);
      if (pkg?.['name'] !== undefined) return pkg['name'] === 'tsx' ? esmApiOf(dir, pkg) : undefined;
    }
    if (dirname(dir) === dir) return undefined;
  }
}

/** `exports['./esm/api'].import` of tsx's package.json, as a `file:` URL. */
function esmApiOf(root: string, pkg: Record<string, unknown>): string | undefined {
  const entry = (pkg['exports'] as Record<string, unknown> | undefined)?.['./esm/api'];
  const imported = (entry as { import?: unknown } | undefined)?.import;
  const target = typeof imported === 'string' ? imported : (imported as { default?: unknown } | undefined)?.default;
  if (typeof target !== 'string') return undefined;
  const file = join(root, target);
  return existsSync(file) ? pathToFileURL(file).href : undefined;
}

function readJson(file: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}
