/**
 * The package as a user gets it: `npm pack`, then checks on the tarball — what it ships (a LICENSE, metadata,
 * source maps whose sources ship, README links that work on the package page, no dependency's types in the public
 * declarations beyond pino's and prom-client's), publint and arethetypeswrong (`esm-only`), and a consumer that
 * installs the tarball, compiles the README's quick start with `tsc --strict` under `module` node16, nodenext and
 * bundler, and runs it.
 *
 * The install resolves dependencies from the npm cache when it has them (`--prefer-offline`), else from the
 * registry; nothing else is fetched. Built by `npm test` first: the tarball packs dist/.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, normalize, posix } from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const exec = promisify(execFile);
// Compiled tests live in <outDir>/test/package/: the repository root is three levels up.
const root = fileURLToPath(new URL('../../../', import.meta.url));
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Record<string, any>;
const readme = readFileSync(join(root, 'README.md'), 'utf8');
const scratch = mkdtempSync(join(tmpdir(), 'tickpool-package-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

/** The environment of a child npm: without the `npm_*` variables of the `npm test` that runs this file. */
function npmEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.toLowerCase().startsWith('npm_')) env[key] = value;
  return { ...env, npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false' };
}

let tarball = '';
let shipped = new Set<string>();

before(async () => {
  const { stdout } = await exec('npm', ['pack', '--json', '--pack-destination', scratch], { cwd: root, env: npmEnv(), maxBuffer: 16 << 20 });
  const [info] = JSON.parse(stdout) as Array<{ filename: string; files: Array<{ path: string }> }>;
  tarball = join(scratch, info!.filename);
  shipped = new Set(info!.files.map((f) => f.path));
});

test('the tarball ships an MIT LICENSE, and package.json says where the project lives', () => {
  assert.ok(shipped.has('LICENSE'), 'LICENSE is in the tarball');
  assert.equal(pkg['license'], 'MIT');
  assert.match(readFileSync(join(root, 'LICENSE'), 'utf8'), /^MIT License\n[\s\S]*Permission is hereby granted, free of charge/);
  assert.match(pkg['repository']?.url, /^git\+https:\/\/github\.com\/tickpool\/tickpool\.git$/);
  assert.match(pkg['homepage'], /^https:\/\/github\.com\/tickpool\/tickpool/);
  assert.match(pkg['bugs']?.url, /^https:\/\/github\.com\/tickpool\/tickpool\/issues$/);
  assert.ok(Array.isArray(pkg['keywords']) && pkg['keywords'].length >= 3, 'keywords');
});

test('runtime dependencies take ^ ranges a consumer can dedupe; prom-client is a peer ^15', () => {
  for (const [name, range] of Object.entries(pkg['dependencies'] as Record<string, string>)) assert.match(range, /^\^\d/, `${name}: ${range}`);
  assert.equal(pkg['dependencies']['prom-client'], undefined, 'prom-client is not a dependency: the application brings its own');
  assert.equal(pkg['peerDependencies']?.['prom-client'], '^15');
  assert.match(pkg['devDependencies']?.['prom-client'] ?? '', /^15\./, 'and a dev dependency for the tests');
});

test('every source map in the tarball points at sources the tarball ships', () => {
  const maps = [...shipped].filter((f) => f.endsWith('.js.map'));
  assert.ok(maps.length > 10, `source maps ship (${maps.length})`);
  for (const map of maps) {
    const { sources } = JSON.parse(readFileSync(join(root, map), 'utf8')) as { sources: string[] };
    for (const source of sources) {
      const target = posix.normalize(posix.join(posix.dirname(map), source));
      assert.ok(shipped.has(target), `${map} → ${source} (${target}) ships`);
    }
  }
});

test('README links work on the package page: absolute, or to a file the tarball ships', () => {
  const links = [...readme.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
  assert.ok(links.length > 0);
  for (const link of links) {
    if (/^https?:\/\//.test(link) || link.startsWith('#')) continue;
    assert.ok(shipped.has(normalize(link.split('#')[0]!)), `${link} is absolute or ships with the package`);
  }
});

test('README marks `await using` as TypeScript syntax (plain JavaScript on Node 20 cannot parse it)', () => {
  const uses = readme.split('\n').filter((line) => line.includes('await using'));
  assert.ok(uses.length > 0);
  for (const line of uses) assert.match(line, /TypeScript/, line);
});

test("the public declarations name no dependency's types but pino's and prom-client's", () => {
  const declarations = [...shipped].filter((f) => f.endsWith('.d.ts'));
  assert.ok(declarations.length > 10);
  for (const file of declarations) {
    const text = readFileSync(join(root, file), 'utf8');
    const imports = [...text.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s+['"]([^'"]+)['"]/gm), ...text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)];
    for (const m of imports) {
      const specifier = m[1]!;
      if (specifier.startsWith('.') || specifier.startsWith('node:')) continue;
      assert.ok(['pino', 'prom-client'].includes(specifier), `${file} imports types of ${specifier}`);
    }
  }
});

test('publint (strict) and arethetypeswrong (esm-only) find nothing wrong with the tarball', { timeout: 60_000 }, async () => {
  const bin = (name: string): string => join(root, 'node_modules', '.bin', name);
  const publint = await exec(bin('publint'), ['run', tarball, '--strict'], { cwd: scratch, env: npmEnv() });
  assert.match(publint.stdout, /All good!/, publint.stdout);
  // attw exits non-zero on any problem of the profile.
  await exec(bin('attw'), [tarball, '--profile', 'esm-only', '--format', 'ascii'], { cwd: scratch, env: npmEnv() });
});

test("a consumer installs the tarball, compiles the README's quick start with tsc --strict (node16, nodenext, bundler) and runs it", { timeout: 120_000 }, async () => {
  const app = join(scratch, 'consumer');
  mkdirSync(app);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  const typesNode = `@types/node@${pkg['devDependencies']['@types/node']}`;
  await exec('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball, typesNode], { cwd: app, env: npmEnv(), timeout: 90_000 });

  const start = readme.indexOf('\n## Quick start\n');
  const quick = readme.slice(start, readme.indexOf('\n## ', start + 1));
  const files = [...quick.matchAll(/```ts\n\/\/ (\S+\.ts)\n([\s\S]*?)```/g)].map((m) => ({ name: m[1]!, code: m[2]! }));
  assert.ok(files.length >= 2, `the quick start has its files: ${files.map((f) => f.name).join(', ')}`);
  for (const { name, code } of files) {
    mkdirSync(dirname(join(app, name)), { recursive: true });
    writeFileSync(join(app, name), code);
  }
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const settings: Record<string, readonly string[]> = {
    node16: ['--module', 'node16'],
    nodenext: ['--module', 'nodenext'],
    bundler: ['--module', 'esnext', '--moduleResolution', 'bundler'],
  };
  for (const [label, flags] of Object.entries(settings)) {
    const args = [tsc, '--strict', '--target', 'es2022', '--types', 'node', ...flags, '--outDir', `out-${label}`, ...files.map((f) => f.name)];
    const compiled = await exec(process.execPath, args, { cwd: app }).catch((error: { stdout?: string }) => ({ failed: error.stdout ?? String(error) }));
    assert.ok(!('failed' in compiled), `tsc --strict under module ${label}:\n${'failed' in compiled ? compiled.failed : ''}`);
  }
  const main = files.find((f) => f.name === 'main.ts')!.name.replace(/\.ts$/, '.js');
  const ran = await exec(process.execPath, [join(app, 'out-node16', main)], { cwd: app, timeout: 30_000 });
  assert.notEqual(ran.stdout.trim(), '', 'the quick start printed its result');
});
