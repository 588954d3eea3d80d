/**
 * The file Piscina loads on every pool thread. Piscina tries `require()` before `import()`, and on Node 20
 * `require()` of an ES module can meet an `import()` of the same graph still in flight and abort the whole process
 * (a V8 fatal error in `Module::IsGraphAsync`). As CommonJS with no ES module behind a `require()`, this file keeps
 * the thread's ES module graph on `import()` alone.
 */
import type { ThreadTask } from './entry.js';

export = async function piscinaEntry(task: ThreadTask): Promise<void> {
  const { default: threadEntry } = await import('./entry.js');
  await threadEntry(task);
};
