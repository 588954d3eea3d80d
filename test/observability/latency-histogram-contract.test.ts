/**
 * `LatencyHistogram` is not a prom-client metric: it answers prom-client's metric protocol itself (what a registry
 * calls: `name`, `help`, `type`, `aggregator`, `get()` with `metricName`d values, `reset()`), which prom-client does
 * not document. This contract pins that protocol against every prom-client the peer range `^15` lets a user bring:
 * for the same observations, each copy's registry must export the hand-rolled histogram exactly as it exports its own
 * `Histogram` — in the Prometheus text format, the OpenMetrics format, as JSON, and aggregated across registries
 * the way `AggregatorRegistry` merges cluster workers.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as own from 'prom-client';
import * as other from 'prom-client-alt';
import { LatencyHistogram } from '../../src/observability/latency-histogram.js';

type PromClient = typeof own;
const copies: ReadonlyArray<readonly [string, PromClient]> = [
  ['prom-client (dev dependency)', own],
  ['prom-client-alt (15.1.2)', other as unknown as PromClient],
];

const bucketsSeconds = [0.001, 0.01, 0.1, 1];
/** Milliseconds chosen so that ms / 1000 and the sums are the same doubles on both sides. */
const observationsMs: Readonly<Record<string, readonly number[]>> = { a: [0.5, 5, 50, 500, 5000], b: [1, 1, 10] };

/** The same observations in a hand-rolled histogram and in prom-client's own, under one name each. */
function pair(prom: PromClient, contentType?: string): { ours: own.Registry; theirs: own.Registry; reference: own.Histogram<'type'> } {
  // The constructor's content-type parameter is typed as a generic literal; either value is fine at run time.
  const Registry = prom.Registry as unknown as new (contentType?: string) => own.Registry;
  const ours = new Registry(contentType);
  const theirs = new Registry(contentType);
  const histogram = LatencyHistogram.on(ours, { name: 'contract_seconds', help: 'contract', labelName: 'type', bucketsSeconds });
  const reference = new prom.Histogram({ name: 'contract_seconds', help: 'contract', labelNames: ['type'], buckets: bucketsSeconds, registers: [theirs] });
  for (const [type, values] of Object.entries(observationsMs)) {
    const series = histogram.series(type);
    for (const ms of values) {
      series.observeMs(ms);
      reference.observe({ type }, ms / 1000);
    }
  }
  return { ours, theirs, reference };
}

for (const [label, prom] of copies) {
  test(`${label}: the Prometheus text export is the one of prom-client's own Histogram`, async () => {
    const { ours, theirs } = pair(prom);
    const text = await ours.metrics();
    assert.equal(text, await theirs.metrics());
    assert.match(text, /^contract_seconds_bucket\{le="\+Inf",type="a"\} 5$/m);
  });

  test(`${label}: the OpenMetrics export is the one of prom-client's own Histogram`, async () => {
    const { ours, theirs } = pair(prom, prom.Registry.OPENMETRICS_CONTENT_TYPE);
    assert.equal(await ours.metrics(), await theirs.metrics());
  });

  test(`${label}: JSON, cluster aggregation, lookup and reset behave as for prom-client's own Histogram`, async () => {
    const { ours, theirs, reference } = pair(prom);
    // As JSON: what cluster workers send their master (prom-client's own sum and count carry `exemplar: undefined`).
    const asJson = async (r: own.Registry): Promise<unknown> => JSON.parse(JSON.stringify(await r.getMetricsAsJSON())) as unknown;
    assert.deepEqual(await asJson(ours), await asJson(theirs));
    const [oursJson, theirsJson] = await Promise.all([ours.getMetricsAsJSON(), theirs.getMetricsAsJSON()]);
    const merged = (json: unknown): Promise<string> => prom.AggregatorRegistry.aggregate([json, json] as never).metrics();
    assert.equal(await merged(oursJson), await merged(theirsJson));
    // A second engine on the same registry finds the histogram the first registered.
    assert.ok(ours.getSingleMetric('contract_seconds') instanceof LatencyHistogram);
    assert.equal(LatencyHistogram.on(ours, { name: 'contract_seconds', help: 'contract', labelName: 'type' }), ours.getSingleMetric('contract_seconds'));
    // A reset keeps each series at zero (components hold their series to observe without a lookup), where
    // prom-client drops its label sets: the same export as prom-client's after `zero()` of each label set.
    ours.resetMetrics();
    theirs.resetMetrics();
    for (const type of Object.keys(observationsMs)) reference.zero({ type });
    assert.equal(await ours.metrics(), await theirs.metrics());
  });
}
