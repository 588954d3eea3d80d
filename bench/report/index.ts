import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { renderReport } from './html.js';
import type { SuiteReport } from './model.js';

export { renderReport } from './html.js';
export type { SuiteReport, MachineInfo, RatioLine } from './model.js';

/** Writes `DIR/index.html` (self-contained) and `DIR/results.json`; returns the page's path. */
export async function writeReport(dir: string, report: SuiteReport): Promise<string> {
  const root = resolve(dir);
  await mkdir(root, { recursive: true });
  const page = join(root, 'index.html');
  await writeFile(page, renderReport(report));
  await writeFile(join(root, 'results.json'), `${JSON.stringify(report, null, 2)}\n`);
  return page;
}
