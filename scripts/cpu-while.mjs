#!/usr/bin/env node
// CPU seconds that every process on this machine used while a command ran, summed by command name (Linux only).
//
//   node scripts/cpu-while.mjs node dist/bench/postgres.bench.js --parts plans
//
// The bench's worker processes and PostgreSQL's backends come and go during a run, so a process's own rusage or a
// `time` of the bench misses them: this reads /proc/<pid>/stat (utime + stime, all threads) of every process every
// 100 ms and keeps the last reading of each; a process that was there before the command counts from its first
// reading, a new one from zero. CPU a process used after its last reading (at most 100 ms of it) is not counted.
// Run the same command with a tiny workload too (e.g. `--plans 1`) and take it off to leave startup out.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

const TICKS_PER_SECOND = 100; // USER_HZ: 100 on every Linux this project runs on
const SAMPLE_MS = 100;

/** pid → { name, ticks } for every process readable now. */
function readAll() {
  const out = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // ended between the listing and the read
    }
    // The name is in parentheses and may itself hold spaces or parentheses: the fields start after the last ')'.
    const close = stat.lastIndexOf(')');
    const name = stat.slice(stat.indexOf('(') + 1, close);
    const fields = stat.slice(close + 2).split(' ');
    out.set(entry, { name, ticks: Number(fields[11]) + Number(fields[12]) });
  }
  return out;
}

const [command, ...args] = process.argv.slice(2);
if (command === undefined) {
  process.stderr.write('usage: node scripts/cpu-while.mjs COMMAND [ARG…]\n');
  process.exit(2);
}
const first = readAll();
const last = new Map(first);
const timer = setInterval(() => {
  for (const [pid, reading] of readAll()) last.set(pid, reading);
}, SAMPLE_MS);
const child = spawn(command, args, { stdio: 'inherit' });
child.on('exit', (code, signal) => {
  clearInterval(timer);
  for (const [pid, reading] of readAll()) last.set(pid, reading);
  const byName = new Map();
  for (const [pid, { name, ticks }] of last) {
    const before = first.get(pid);
    const used = ticks - (before !== undefined && before.name === name ? before.ticks : 0);
    // Node names its worker processes after their script in some versions: group them all as node.
    const group = name.startsWith('node') ? 'node' : name;
    byName.set(group, (byName.get(group) ?? 0) + used);
  }
  const rows = [...byName].filter(([, ticks]) => ticks > 0).sort((a, b) => b[1] - a[1]).slice(0, 8);
  for (const [name, ticks] of rows) process.stderr.write(`cpu ${name} ${(ticks / TICKS_PER_SECOND).toFixed(2)} s\n`);
  process.exit(code ?? (signal === null ? 1 : 128));
});
