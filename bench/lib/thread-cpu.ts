/**
 * CPU time of the calling process's main thread, in ns: the first field of `/proc/self/task/<pid>/schedstat` (time
 * on a CPU, nanosecond resolution). `process.cpuUsage()` counts every thread of the process, the pool threads and
 * V8's helpers included, which is not what "main's cost per evaluation" means. Undefined where the file is absent
 * (not Linux, or a kernel without schedstats).
 */
import { readFileSync } from 'node:fs';

const path = `/proc/self/task/${process.pid}/schedstat`;

export function mainThreadCpuNs(): number | undefined {
  try {
    const text = readFileSync(path, 'utf8');
    const ns = Number(text.slice(0, text.indexOf(' ')));
    return Number.isFinite(ns) ? ns : undefined;
  } catch {
    return undefined;
  }
}
