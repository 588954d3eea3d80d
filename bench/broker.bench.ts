/**
 * Broker throughput: enqueue → dequeue → ack cycles per second on one core (goal ≥ 1,000,000).
 *
 * Each tinybench iteration runs a batch of `BATCH` cycles, because one cycle (under a microsecond) is close to the
 * cost of the timestamp calls around it; ops/s and the per-cycle p50/p99 are derived from the batch times (so the
 * percentiles are of 1000-cycle averages, not of single cycles).
 *
 *   node dist/bench/broker.bench.js [--quick] [--json]
 */
import { pathToFileURL } from 'node:url';
import { Bench } from 'tinybench';
import { EvalBroker } from '../src/broker/eval-broker.js';
import type { Evaluation } from '../src/broker/evaluation.js';
import { pino } from 'pino';

export interface BenchResult {
  readonly name: string;
  readonly opsPerSec: number;
  readonly p50Us?: number;
  readonly p99Us?: number;
  readonly notes?: string;
}

const BATCH = 1000;
const TYPES = ['service'] as const;

// Job ids are built once: a cycle measures the broker, not string building (evaluation ids are fresh per cycle,
// as they would be in a real engine).
const jobIds = Array.from({ length: 1000 }, (_, j) => `job-${j}`);

function evaluation(id: number, job: number | string, priority = 50): Evaluation {
  return { id: `e${id}`, jobId: typeof job === 'string' ? job : jobIds[job % 1000]!, type: 'service', priority };
}

function quietBroker(): EvalBroker {
  // A real pino logger at `warn`: the per-evaluation debug guards are part of what is measured.
  return new EvalBroker({ logger: pino({ level: 'warn' }) });
}

interface Scenario {
  readonly name: string;
  readonly notes: string;
  /** Builds the broker state; `batch` runs BATCH cycles. */
  setup(): { readonly broker: EvalBroker; readonly batch: () => void | Promise<void> };
}

/**
 * Fills `jobs` jobs with one ready evaluation each and returns a batch of BATCH cycles: dequeue, ack, and a
 * replacement enqueue for the freed job (the steady state of the first and third scenarios).
 */
function cycleAcrossJobs(broker: EvalBroker, jobs: number): () => void {
  let next = 0;
  for (let j = 0; j < jobs; j++) broker.enqueue(evaluation(next++, j, 1 + (j % 100)));
  return () => {
    for (let i = 0; i < BATCH; i++) {
      const d = broker.tryDequeue(TYPES)!;
      broker.ack(d.evaluation.id, d.token);
      broker.enqueue(evaluation(next++, d.evaluation.jobId, d.evaluation.priority));
    }
  };
}

const scenarios: Scenario[] = [
  {
    name: 'cycle, 1k ready across 1k jobs (tryDequeue)',
    notes: 'ready heap of 1000; ack, then a replacement enqueue for the freed job',
    setup() {
      const broker = quietBroker();
      return { broker, batch: cycleAcrossJobs(broker, 1000) };
    },
  },
  {
    name: 'cycle, 1k evaluations across 100 jobs (tryDequeue)',
    notes: '100 ready + 900 pending at start; each cycle enqueues into a busy job (pending), acks (promote + cancelable); drainCancelable per batch',
    setup() {
      const broker = quietBroker();
      let next = 0;
      for (let k = 0; k < 10; k++) for (let j = 0; j < 100; j++) broker.enqueue(evaluation(next++, j, 1 + (j % 100)));
      const batch = (): void => {
        for (let i = 0; i < BATCH; i++) {
          broker.enqueue(evaluation(next++, next % 100, 1 + (next % 100)));
          const d = broker.tryDequeue(TYPES)!;
          broker.ack(d.evaluation.id, d.token);
        }
        broker.drainCancelable();
      };
      return { broker, batch };
    },
  },
  {
    name: 'cycle, 1k ready + 100k unacked deadlines pending',
    notes: '100k outstanding deliveries in the deadline heap while cycling as in the first scenario',
    setup() {
      const broker = quietBroker();
      for (let j = 0; j < 100_000; j++) broker.enqueue({ id: `u${j}`, jobId: `held-${j}`, type: 'held', priority: 50 });
      for (let j = 0; j < 100_000; j++) broker.tryDequeue(['held']);
      return { broker, batch: cycleAcrossJobs(broker, 1000) };
    },
  },
  {
    name: 'cycle, 1k ready across 1k jobs (await dequeue)',
    notes: 'the promise API: one resolved promise and one await per cycle',
    setup() {
      const broker = quietBroker();
      let next = 0;
      for (let j = 0; j < 1000; j++) broker.enqueue(evaluation(next++, j, 1 + (j % 100)));
      const batch = async (): Promise<void> => {
        for (let i = 0; i < BATCH; i++) {
          const d = (await broker.dequeue(TYPES, 0))!;
          broker.ack(d.evaluation.id, d.token);
          broker.enqueue(evaluation(next++, d.evaluation.jobId, d.evaluation.priority));
        }
      };
      return { broker, batch };
    },
  },
  {
    name: 'cycle, waiting dequeue woken by enqueue',
    notes: 'empty broker: dequeue waits, enqueue hands it the evaluation, ack',
    setup() {
      const broker = quietBroker();
      let next = 0;
      const batch = async (): Promise<void> => {
        for (let i = 0; i < BATCH; i++) {
          const waiting = broker.dequeue(TYPES, 0);
          broker.enqueue(evaluation(next++, next, 50));
          const d = (await waiting)!;
          broker.ack(d.evaluation.id, d.token);
        }
      };
      return { broker, batch };
    },
  },
  {
    name: 'cycle, 2 types with equal priority (random tie-break)',
    notes: '500 ready per type; dequeue across both',
    setup() {
      const broker = quietBroker();
      const types = ['service', 'batch'];
      let next = 0;
      for (let j = 0; j < 1000; j++) broker.enqueue({ id: `e${next++}`, jobId: `job-${j}`, type: types[j % 2]!, priority: 50 });
      const batch = (): void => {
        for (let i = 0; i < BATCH; i++) {
          const d = broker.tryDequeue(types)!;
          broker.ack(d.evaluation.id, d.token);
          broker.enqueue({ id: `e${next++}`, jobId: d.evaluation.jobId, type: d.evaluation.type, priority: 50 });
        }
      };
      return { broker, batch };
    },
  },
];

export async function runBrokerBench(options: { quick?: boolean } = {}): Promise<BenchResult[]> {
  const quick = options.quick === true;
  const results: BenchResult[] = [];
  for (const scenario of scenarios) {
    const { broker, batch } = scenario.setup();
    const bench = new Bench({ time: quick ? 150 : 1500, warmupIterations: quick ? 20 : 200, iterations: 20, throws: true });
    bench.add(scenario.name, batch);
    await bench.run();
    // Disabling clears the broker's deadline timer, which would otherwise keep the process alive until it fires.
    broker.setEnabled(false);
    const task = bench.tasks[0]!;
    const result = task.result;
    if (result.state !== 'completed') throw new Error(`bench ${scenario.name} ended ${result.state}`);
    const meanMs = result.latency.mean;
    results.push({
      name: scenario.name,
      opsPerSec: Math.round((BATCH * 1000) / meanMs),
      p50Us: round((result.latency.p50 * 1000) / BATCH),
      p99Us: round((result.latency.p99 * 1000) / BATCH),
      notes: scenario.notes,
    });
  }
  return results;
}

function round(n: number): number {
  return Math.round(n * 1000) / 1000;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const quick = process.argv.includes('--quick');
  const results = await runBrokerBench({ quick });
  if (process.argv.includes('--json')) console.log(JSON.stringify(results, null, 2));
  else {
    console.table(results.map((r) => ({ name: r.name, 'cycles/s': r.opsPerSec.toLocaleString('en-US'), 'p50 µs/cycle': r.p50Us, 'p99 µs/cycle': r.p99Us })));
  }
}
