// The build: a clean dist/, the TypeScript compiled, and the files the code reads at run time (the PostgreSQL
// migrations, the dashboard's page) copied beside the modules that read them.
import { execFileSync } from 'node:child_process';
import { cpSync, readdirSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
rmSync(join(root, 'dist'), { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
try {
  execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.json')], { stdio: 'inherit' });
} catch {
  process.exit(1); // tsc has printed what is wrong
}
copyAssets(join(root, 'src'), join(root, 'dist', 'src'));

/** Copies every `.sql` file, and every file of an `assets` folder, under `from` to the same place under `to`. */
function copyAssets(from, to, inAssets = false) {
  for (const entry of readdirSync(from, { withFileTypes: true })) {
    if (entry.isDirectory()) copyAssets(join(from, entry.name), join(to, entry.name), inAssets || entry.name === 'assets');
    else if (inAssets || entry.name.endsWith('.sql')) cpSync(join(from, entry.name), join(to, entry.name));
  }
}
