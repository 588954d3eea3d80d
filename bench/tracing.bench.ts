/**
 * What tracing costs, in one process and alternating rounds: no-op evaluations/s of one engine with no provider
 * registered, with a provider whose sampler records nothing, and with everything sampled (spans go to a processor
 * that drops them, so the exporter's own cost is not counted). The two ratios against "no provider" (goals: ≥ 0.95
 * for the sampler that records nothing; the cost of everything sampled is reported).
 *
 *   node --expose-gc dist/bench/tracing.bench.js [--rounds 4] [--drain 100000]
 */
import { pathToFileURL } from 'node:url';
import { trace } from '@opentelemetry/api';
import { AlwaysOffSampler, AlwaysOnSampler, BasicTracerProvider, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { pino } from 'pino';
import { createEngine } from '../src/engine/engine.js';

const noop = new URL('../test/fixtures/noop.js', import.meta.url);

/** Takes every span and keeps none. */
const dropping: SpanProcessor = {
  onStart: () => undefined,
  onEnd: () => undefined,
  forceFlush: () => Promise.resolve(),
  shutdown: () => Promise.resolve(),
};

type Mode = 'none' | 'off' | 'on';

function use(mode: Mode): void {
  trace.disable();
  if (mode === 'off') trace.setGlobalTracerProvider(new BasicTracerProvider({ sampler: new AlwaysOffSampler() }));
  if (mode === 'on') trace.setGlobalTracerProvider(new BasicTracerProvider({ sampler: new AlwaysOnSampler(), spanProcessors: [dropping] }));
}

export async function runTracingBench(rounds = 4, drain = 100_000): Promise<Record<Mode, number[]>> {
  const engine = createEngine({ threads: 2, logger: pino({ level: 'silent' }), schedulers: { work: noop } });
  await engine.start();
  const perSec: Record<Mode, number[]> = { none: [], off: [], on: [] };
  let n = 0;
  const run = async (count: number): Promise<number> => {
    const started = performance.now();
    const all: Promise<unknown>[] = [];
    for (let i = 0; i < count; i++) all.push(engine.run({ id: `e${n++}`, type: 'work' }));
    await Promise.all(all);
    return count / ((performance.now() - started) / 1000);
  };
  try {
    await run(20_000);
    const modes: Mode[] = ['none', 'off', 'on'];
    for (let r = 0; r < rounds; r++) {
      // Each round in another order: a drift of the machine does not favour one mode.
      const order = r % 3 === 0 ? modes : r % 3 === 1 ? [modes[1]!, modes[2]!, modes[0]!] : [modes[2]!, modes[0]!, modes[1]!];
      for (const mode of order) {
        use(mode);
        (globalThis as { gc?: () => void }).gc?.();
        perSec[mode].push(await run(drain));
      }
    }
  } finally {
    trace.disable();
    await engine.stop({ graceMs: 100 });
  }
  return perSec;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const arg = (name: string): number | undefined => {
    const at = process.argv.indexOf(`--${name}`);
    return at < 0 ? undefined : Number(process.argv[at + 1]);
  };
  const perSec = await runTracingBench(arg('rounds') ?? 4, arg('drain') ?? 100_000);
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  for (const mode of ['none', 'off', 'on'] as const) {
    process.stdout.write(`${mode.padEnd(5)} ${perSec[mode].map((x) => Math.round(x).toLocaleString('en-US')).join(' / ')} evaluations/s\n`);
  }
  const ratios = (mode: 'off' | 'on'): string => perSec[mode].map((x, i) => (x / perSec.none[i]!).toFixed(3)).join(', ');
  process.stdout.write(`sampler that records nothing / no provider: ${ratios('off')} (median ${(median(perSec.off) / median(perSec.none)).toFixed(3)})\n`);
  process.stdout.write(`everything sampled / no provider: ${ratios('on')} (median ${(median(perSec.on) / median(perSec.none)).toFixed(3)})\n`);
}
