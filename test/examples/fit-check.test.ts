/**
 * The demo's plan logic in process, without threads: the fit check (evaluate-plan.ts) on a real PlanApplier, the
 * bin-packing scheduler against a real snapshot, and the garbage collection plan. After every step the audit of
 * the model's invariant holds: for every node, Σ allocations = used ≤ capacity.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Plan, WorkContext } from '../../src/index.js';
import { PlanApplier } from '../../src/state/plan-applier.js';
import { StateStore } from '../../src/state/state-store.js';
import { auditCapacity, seededRandom, seedNodes } from '../../examples/cluster/cluster-state.js';
import { collectFinished } from '../../examples/cluster/collect.js';
import { createFitCheck } from '../../examples/cluster/evaluate-plan.js';
import { allocKey, Table, tables, type AllocRecord, type JobRecord, type NodeRecord } from '../../examples/cluster/model.js';
import { schedule } from '../../examples/cluster/schedulers/placement.js';

function node(id: string, cpuMhz: number, memoryMb: number): NodeRecord {
  return {
    id,
    datacenter: 'dc1',
    nodeClass: 'general',
    cpuMhz,
    memoryMb,
    usedCpuMhz: 0,
    usedMemoryMb: 0,
    allocs: 0,
    attributes: { kernelVersion: '6.1.0', arch: 'amd64', docker: true, rack: 'rack-a1' },
  };
}

function setup(nodes: NodeRecord[]): { state: StateStore; applier: PlanApplier; stats: ReturnType<typeof createFitCheck>['stats'] } {
  const state = new StateStore({ tables });
  state.write((txn) => {
    for (const n of nodes) txn.put(Table.NODES, n.id, n);
  });
  const fit = createFitCheck();
  return { state, applier: new PlanApplier({ state, evaluatePlan: fit.evaluatePlan }), stats: fit.stats };
}

/** A plan placing `allocs` (jobId/index → node, cpu, mem) as read from `state` at this moment. */
function placement(state: StateStore, allocs: Array<{ key: string; nodeId: string; cpu: number; mem: number; finishAt?: number }>): Plan {
  const snapshot = state.snapshot();
  const writes: Plan['writes'][number][] = [];
  const used = new Map<string, { cpu: number; mem: number; n: number }>();
  for (const a of allocs) {
    const value: AllocRecord = {
      id: a.key,
      jobId: a.key.split('/')[0]!,
      jobVersion: 1,
      nodeId: a.nodeId,
      cpuMhz: a.cpu,
      memoryMb: a.mem,
      ...(a.finishAt === undefined ? {} : { finishAt: a.finishAt }),
    };
    writes.push({ table: Table.ALLOCS, key: a.key, value, readIndex: snapshot.get(Table.ALLOCS, a.key)?.modifyIndex ?? 0 });
    const u = used.get(a.nodeId) ?? { cpu: 0, mem: 0, n: 0 };
    used.set(a.nodeId, { cpu: u.cpu + a.cpu, mem: u.mem + a.mem, n: u.n + 1 });
  }
  for (const [nodeId, u] of used) {
    const record = snapshot.get<NodeRecord>(Table.NODES, nodeId)!;
    const value = { ...record.value, usedCpuMhz: record.value.usedCpuMhz + u.cpu, usedMemoryMb: record.value.usedMemoryMb + u.mem, allocs: record.value.allocs + u.n };
    writes.push({ table: Table.NODES, key: nodeId, value, readIndex: record.modifyIndex });
  }
  return { writes };
}

function assertConsistent(state: StateStore): void {
  const audit = auditCapacity(state.snapshot());
  assert.equal(audit.overcommitted, 0, 'no node overcommitted');
  assert.equal(audit.mismatched, 0, 'used capacity = sum of allocations on every node');
  assert.equal(audit.orphanAllocs, 0);
}

test('a plan that fits commits whole', async () => {
  const { state, applier } = setup([node('a', 4000, 8192)]);
  const result = await applier.submit(placement(state, [{ key: 'web/0', nodeId: 'a', cpu: 1000, mem: 1024 }]));
  assert.deepEqual(result.rejected, []);
  assert.equal(state.snapshot().get<NodeRecord>(Table.NODES, 'a')?.value.usedCpuMhz, 1000);
  assertConsistent(state);
});

test('two plans that picked the same node: the second loses its node write and the fit check rejects its allocation', async () => {
  const { state, applier, stats } = setup([node('a', 4000, 8192), node('b', 4000, 8192)]);
  // Both read the same state, as two schedulers on two threads would.
  const first = placement(state, [{ key: 'web/0', nodeId: 'a', cpu: 3000, mem: 1024 }]);
  const second = placement(state, [
    { key: 'api/0', nodeId: 'a', cpu: 3000, mem: 1024 },
    { key: 'api/1', nodeId: 'b', cpu: 500, mem: 512 },
  ]);
  const [r1, r2] = await Promise.all([applier.submit(first), applier.submit(second)]);
  assert.deepEqual(r1.rejected, []);
  assert.deepEqual(r2.rejected.map((w) => `${w.table}/${w.key}`).sort(), ['allocs/api/0', 'nodes/a']);
  assert.ok(r2.refreshIndex > 0, 'the loser is told which state to re-plan against');
  assert.equal(stats.staleNode, 1);
  assert.equal(state.snapshot().get(Table.ALLOCS, 'api/0'), undefined, 'the allocation on the contended node was not committed');
  assert.equal(state.snapshot().get<AllocRecord>(Table.ALLOCS, 'api/1')?.value.nodeId, 'b', 'the one on the other node was');
  assertConsistent(state);
});

test('a node write that would overcommit, or that does not add up, is rejected with its allocations', async () => {
  const { state, applier, stats } = setup([node('a', 4000, 8192), node('b', 4000, 8192)]);
  const over = await applier.submit(placement(state, [{ key: 'big/0', nodeId: 'a', cpu: 5000, mem: 1024 }]));
  assert.equal(over.rejected.length, 2);
  assert.equal(stats.overcommit, 1);

  const plan = placement(state, [{ key: 'odd/0', nodeId: 'b', cpu: 1000, mem: 1024 }]);
  const forged = {
    writes: plan.writes.map((w) => (w.table === Table.NODES ? { ...w, value: { ...(w.value as NodeRecord), usedCpuMhz: 10 } } : w)),
  };
  const mismatch = await applier.submit(forged);
  assert.equal(mismatch.rejected.length, 2);
  assert.equal(stats.mismatch, 1);
  assert.equal(auditCapacity(state.snapshot()).allocs, 0);
  assertConsistent(state);
});

test('the bin-packing scheduler places within capacity and constraints, and concurrent plans stay consistent', async () => {
  const state = new StateStore({ tables });
  seedNodes(state, 60, seededRandom(7));
  const fit = createFitCheck();
  const applier = new PlanApplier({ state, evaluatePlan: fit.evaluatePlan });
  const jobs: JobRecord[] = Array.from({ length: 12 }, (_, i) => ({
    id: `job-${i}`,
    type: 'service',
    priority: 50,
    version: 1,
    count: 4,
    cpuMhz: 1500,
    memoryMb: 2048,
    datacenters: ['dc1', 'dc2'],
    constraints: [{ attribute: 'arch', operator: '=', value: 'amd64' }],
    allAtOnce: false,
  }));
  state.write((txn) => {
    for (const job of jobs) txn.put(Table.JOBS, job.id, job);
  });
  const ctx = (attempt: number): WorkContext =>
    ({ snapshot: state.snapshot(), attempt, canceled: false, throwIfCanceled: () => {} }) as unknown as WorkContext;
  const strategy = { antiAffinity: 0.5, pickAmong: 4 };
  // Round 1: every job plans against the same state; the applier sorts out who gets which node.
  const firstRound = jobs.map((job) => schedule({ id: `e-${job.id}`, jobId: job.id }, ctx(1), strategy, 0).plan!);
  await Promise.all(firstRound.map((plan) => applier.submit(plan)));
  assertConsistent(state);
  // Refresh until every job is placed (each round re-plans only what is missing).
  for (let attempt = 2; attempt <= 10; attempt++) {
    const plans = jobs.map((job) => schedule({ id: `e-${job.id}`, jobId: job.id }, ctx(attempt), strategy, 0).plan).filter((p) => p !== undefined);
    if (plans.length === 0) break;
    for (const plan of plans) await applier.submit(plan);
    assertConsistent(state);
  }
  const snapshot = state.snapshot();
  for (const job of jobs) {
    for (let i = 0; i < job.count; i++) {
      const alloc = snapshot.get<AllocRecord>(Table.ALLOCS, allocKey(job.id, i))?.value;
      assert.ok(alloc !== undefined, `${job.id}/${i} placed`);
      const host = snapshot.get<NodeRecord>(Table.NODES, alloc.nodeId)!.value;
      assert.ok(['dc1', 'dc2'].includes(host.datacenter), 'in one of the job datacenters');
      assert.equal(host.attributes.arch, 'amd64', 'constraint respected');
    }
  }
  assert.ok(fit.stats.plans > 0);
});

test('garbage collection deletes finished allocations and gives their capacity back', async () => {
  const { state, applier } = setup([node('a', 8000, 8192), node('b', 8000, 8192)]);
  await applier.submit(
    placement(state, [
      { key: 'batch/0', nodeId: 'a', cpu: 1000, mem: 1024, finishAt: 100 },
      { key: 'batch/1', nodeId: 'b', cpu: 1000, mem: 1024, finishAt: 100 },
      { key: 'batch/2', nodeId: 'b', cpu: 1000, mem: 1024, finishAt: 900 },
      { key: 'web/0', nodeId: 'a', cpu: 2000, mem: 2048 },
    ]),
  );
  const { plan, finished } = collectFinished(state.snapshot(), 500);
  assert.equal(finished, 2);
  const result = await applier.submit(plan!);
  assert.deepEqual(result.rejected, []);
  const snapshot = state.snapshot();
  assert.deepEqual([...snapshot.list(Table.ALLOCS)].map((r) => r.key).sort(), ['batch/2', 'web/0']);
  assert.equal(snapshot.get<NodeRecord>(Table.NODES, 'a')?.value.usedCpuMhz, 2000);
  assert.equal(snapshot.get<NodeRecord>(Table.NODES, 'b')?.value.usedCpuMhz, 1000);
  assertConsistent(state);
  assert.equal(collectFinished(state.snapshot(), 500).plan, undefined, 'nothing left to collect');
});
