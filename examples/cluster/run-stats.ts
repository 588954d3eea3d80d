/**
 * What the demo counts while it runs, from the engine's events, its change stream and its Prometheus registry:
 * nothing here reaches into the engine's internals.
 */
import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';
import type { Evaluation } from '../../src/broker/index.js';
import type { Engine } from '../../src/index.js';
import { Table } from './model.js';
import type { Probe, ProbeRef } from './probe.js';

function probeOf(evaluation: Evaluation): ProbeRef | undefined {
  return (evaluation.payload as { probe?: ProbeRef } | undefined)?.probe;
}

/** Sum of a prom-client counter's values, optionally per label value. */
async function counterValues(engine: Engine, name: string, label?: string): Promise<Record<string, number>> {
  const metric = engine.options.registry.getSingleMetric(name);
  const out: Record<string, number> = {};
  if (metric === undefined) return out;
  const { values } = await metric.get();
  for (const v of values) {
    const key = label === undefined ? 'total' : String(v.labels[label] ?? '');
    out[key] = (out[key] ?? 0) + v.value;
  }
  return out;
}

export interface PlanCounts {
  /** Plans submitted to the plan applier (every scheduler run that returned a plan). */
  readonly submitted: number;
  /** Scheduler re-runs after a partly rejected plan. */
  readonly refreshes: number;
  /** Rejected writes by reason: `conflict` (version check), `evaluate` (fit check), `all_at_once`. */
  readonly rejectedWrites: Readonly<Record<string, number>>;
}

export class RunStats {
  readonly #engine: Engine;
  readonly #probe: Probe;
  /** Enqueue → scheduler entry, ns. */
  readonly dispatch: RecordableHistogram = createHistogram();
  /** Enqueue → scheduler entry per evaluation type, ns. */
  readonly dispatchByType = new Map<string, RecordableHistogram>();
  /** Enqueue → ack, ns. */
  readonly endToEnd: RecordableHistogram = createHistogram();
  acked = 0;
  failed = 0;
  readonly failedBy: Record<string, number> = {};
  nacks = 0;
  nackTimeouts = 0;
  /** Evaluations superseded by a newer one of the same job (drained from the broker's cancelable list). */
  superseded = 0;
  /** Allocation records written (new placements and replacements) and deleted. */
  placements = 0;
  stops = 0;

  constructor(engine: Engine, probe: Probe) {
    this.#engine = engine;
    this.#probe = probe;
    engine.broker.events.on('broker:ack', ({ evaluation }) => {
      this.acked++;
      const ref = probeOf(evaluation);
      if (ref === undefined) return;
      const dispatched = probe.dispatchNs(ref);
      if (dispatched !== undefined) {
        const ns = dispatched > 0n ? dispatched : 1n;
        this.dispatch.record(ns);
        let byType = this.dispatchByType.get(evaluation.type);
        if (byType === undefined) this.dispatchByType.set(evaluation.type, (byType = createHistogram()));
        byType.record(ns);
      }
      const total = probe.sinceEnqueueNs(ref);
      if (total !== undefined) this.endToEnd.record(total > 0n ? total : 1n);
      probe.release(ref);
    });
    engine.broker.events.on('broker:failed', ({ evaluation, reason }) => {
      this.failed++;
      const code = (reason as { code?: string }).code ?? reason.name;
      this.failedBy[code] = (this.failedBy[code] ?? 0) + 1;
      const ref = probeOf(evaluation);
      if (ref !== undefined) probe.release(ref);
    });
    engine.broker.events.on('broker:nack', ({ timedOut }) => {
      this.nacks++;
      if (timedOut) this.nackTimeouts++;
    });
    engine.state.onChange(({ changes }) => {
      for (const change of changes) {
        if (change.table !== Table.ALLOCS) continue;
        if (change.value === undefined) this.stops++;
        else this.placements++;
      }
    });
  }

  /** Takes the superseded evaluations out of the broker (as Nomad's leader reaps cancelable evaluations). */
  reapSuperseded(): void {
    for (const evaluation of this.#engine.broker.drainCancelable()) {
      this.superseded++;
      const ref = probeOf(evaluation);
      if (ref !== undefined) this.#probe.release(ref);
    }
  }

  async plans(): Promise<PlanCounts> {
    const [submitted, refreshes, rejectedWrites] = await Promise.all([
      counterValues(this.#engine, 'tickpool_plan_submitted_total'),
      counterValues(this.#engine, 'tickpool_worker_plan_refresh_total'),
      counterValues(this.#engine, 'tickpool_plan_rejected_writes_total', 'reason'),
    ]);
    return { submitted: submitted['total'] ?? 0, refreshes: refreshes['total'] ?? 0, rejectedWrites };
  }
}
