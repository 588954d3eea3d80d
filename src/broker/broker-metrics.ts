import type { Counter, Registry } from 'prom-client';
import { LatencyHistogram, type LatencySeries } from '../observability/latency-histogram.js';
import { counter, gauge } from '../observability/metrics.js';

/**
 * The broker's Prometheus metrics, named after Nomad's (`nomad.broker.total_ready` → `tickpool_broker_total_ready`).
 *
 * Cost model: the broker's hot path (enqueue → dequeue → ack) must stay around a microsecond, and one prom-client
 * `Histogram.observe` costs hundreds of nanoseconds (it allocates a closure, hashes the labels and scans the
 * buckets). So:
 * - gauges are computed at scrape time from `stats()` (prom-client `collect`), costing nothing per evaluation;
 * - latency histograms are `LatencyHistogram`s (src/observability/latency-histogram.ts): a few ns per observation,
 *   nothing sampled or dropped.
 *
 * All brokers sharing a registry share one hub (an engine re-created in a test, two brokers in one process):
 * gauges sum over the live brokers, histograms accumulate across them.
 */

/** What the gauges read at scrape time; one per broker. */
export interface BrokerGaugeSource {
  gaugeSnapshot(): BrokerGaugeSnapshot;
}

export interface BrokerGaugeSnapshot {
  readonly totalReady: number;
  readonly totalUnacked: number;
  readonly totalPending: number;
  readonly totalWaiting: number;
  readonly totalCancelable: number;
  readonly totalFailed: number;
  readonly byScheduler: Readonly<Record<string, { readonly ready: number; readonly unacked: number }>>;
}

/** The three latency series of one queue (scheduler type or `_failed`). */
export interface QueueLatencies {
  /** Ready → dequeued. */
  readonly wait: LatencySeries;
  /** Dequeued → acked, nacked or failed. */
  readonly process: LatencySeries;
  /** Ready → acked, nacked or failed (Nomad's response time: last enqueue to finished). */
  readonly response: LatencySeries;
}

export class BrokerMetricsHub {
  readonly #sources = new Set<WeakRef<BrokerGaugeSource>>();
  readonly #waitTime: LatencyHistogram;
  readonly #processTime: LatencyHistogram;
  readonly #responseTime: LatencyHistogram;
  readonly nacks: Counter<'type'>;
  readonly nackTimeouts: Counter<'type'>;
  readonly failed: Counter<'type'>;

  constructor(registry: Registry) {
    const hub = this;
    const total = (name: string, help: string, pick: (s: BrokerGaugeSnapshot) => number): void => {
      gauge(registry, {
        name,
        help,
        collect() {
          this.set(hub.#sum(pick));
        },
      });
    };
    total('tickpool_broker_total_ready', 'Evaluations ready to be dequeued (scheduler queues, not _failed).', (s) => s.totalReady);
    total('tickpool_broker_total_unacked', 'Evaluations dequeued and not yet acked or nacked.', (s) => s.totalUnacked);
    total('tickpool_broker_total_pending', 'Evaluations blocked behind another evaluation of their job.', (s) => s.totalPending);
    total('tickpool_broker_total_waiting', 'Evaluations held for wait/waitUntil or a nack re-enqueue delay.', (s) => s.totalWaiting);
    total('tickpool_broker_total_cancelable', 'Superseded evaluations waiting for drainCancelable().', (s) => s.totalCancelable);
    total('tickpool_broker_total_failed', 'Evaluations ready in the _failed queue.', (s) => s.totalFailed);
    const perType = (name: string, help: string, pick: (x: { ready: number; unacked: number }) => number): void => {
      gauge<'type'>(registry, {
        name,
        help,
        labelNames: ['type'],
        collect() {
          this.reset();
          const sums = new Map<string, number>();
          for (const snapshot of hub.#snapshots()) {
            for (const [type, counts] of Object.entries(snapshot.byScheduler)) sums.set(type, (sums.get(type) ?? 0) + pick(counts));
          }
          for (const [type, value] of sums) this.set({ type }, value);
        },
      });
    };
    perType('tickpool_broker_ready', 'Ready evaluations per queue (scheduler type or _failed).', (x) => x.ready);
    perType('tickpool_broker_unacked', 'Unacked evaluations per queue (scheduler type or _failed).', (x) => x.unacked);

    this.#waitTime = new LatencyHistogram(registry, {
      name: 'tickpool_broker_wait_time_seconds',
      help: 'Time an evaluation was ready before it was dequeued.',
      labelName: 'type',
    });
    this.#processTime = new LatencyHistogram(registry, {
      name: 'tickpool_broker_process_time_seconds',
      help: 'Time from dequeue to ack, nack or fail.',
      labelName: 'type',
    });
    this.#responseTime = new LatencyHistogram(registry, {
      name: 'tickpool_broker_response_time_seconds',
      help: 'Time from becoming ready to ack, nack or fail.',
      labelName: 'type',
    });
    this.nacks = counter<'type'>(registry, { name: 'tickpool_broker_nacks_total', help: 'Nacks, explicit or by nack timeout.', labelNames: ['type'] });
    this.nackTimeouts = counter<'type'>(registry, {
      name: 'tickpool_broker_nack_timeouts_total',
      help: 'Deliveries whose nack deadline passed without an ack.',
      labelNames: ['type'],
    });
    this.failed = counter<'type'>(registry, {
      name: 'tickpool_broker_failed_total',
      help: 'Evaluations moved to the _failed queue, by their scheduler type.',
      labelNames: ['type'],
    });
  }

  /** Registers a broker for the gauges. Held weakly: a broker that is garbage collected stops counting. */
  addSource(source: BrokerGaugeSource): void {
    this.#sources.add(new WeakRef(source));
  }

  latencies(queue: string): QueueLatencies {
    return { wait: this.#waitTime.series(queue), process: this.#processTime.series(queue), response: this.#responseTime.series(queue) };
  }

  *#snapshots(): Generator<BrokerGaugeSnapshot> {
    for (const ref of this.#sources) {
      const source = ref.deref();
      if (source === undefined) this.#sources.delete(ref);
      else yield source.gaugeSnapshot();
    }
  }

  #sum(pick: (s: BrokerGaugeSnapshot) => number): number {
    let sum = 0;
    for (const snapshot of this.#snapshots()) sum += pick(snapshot);
    return sum;
  }
}

const hubs = new WeakMap<Registry, BrokerMetricsHub>();

/** The metrics hub of `registry`, created (and its metrics registered) on first use. */
export function brokerMetricsHub(registry: Registry): BrokerMetricsHub {
  let hub = hubs.get(registry);
  if (hub === undefined) {
    hub = new BrokerMetricsHub(registry);
    hubs.set(registry, hub);
  }
  return hub;
}
