/**
 * Claims of the shared task store against a real PostgreSQL: fair shares over the live processes, failover of a dead
 * process's tasks within the lease, and the fence: a write under a claim that is no longer current is refused.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { TaskNotClaimedError } from '../../../src/errors.js';
import { validateTask } from '../../../src/tasks/task.js';
import { requireDatabaseInCI, skipWithoutDatabase } from '../helpers.js';
import { cluster, held, rounds, waitFor, type Cluster, type Node } from './harness.js';

requireDatabaseInCI();
const MIN = 60_000;

async function declare(node: Node, count: number, extra: Record<string, unknown> = {}): Promise<void> {
  for (let i = 0; i < count; i++) await node.store.declareTask(validateTask({ id: `t${i}`, every: '1m', maxConcurrency: 1, handler: 'h', ...extra }), {});
}

const total = (nodes: readonly Node[]): number => nodes.reduce((n, node) => n + held(node), 0);

describe('task claims on PostgreSQL', { skip: skipWithoutDatabase }, () => {
  let c: Cluster;
  beforeEach(async () => {
    c = await cluster();
  });
  afterEach(async () => {
    await c?.close();
  });

  test('one process claims every declared task and runs it; any process reads the run log', async () => {
    const a = await c.node();
    await declare(a, 4);
    await waitFor('a holds 4 claims', () => held(a) === 4);
    assert.equal(a.scheduler.stats().claimedTasks, 4);
    c.clock.advance(MIN);
    await waitFor('4 runs started', () => a.executor.executions.length === 4);
    for (const e of a.executor.pending()) e.complete({ value: { ok: e.queued.taskId } });
    const reader = await c.node({ name: 'reader' });
    await waitFor('the runs logged success', async () => (await reader.store.runLog.runs('t0'))[0]?.finalStatus === 'success');
    const [record] = await reader.store.runLog.runs('t0');
    assert.equal(record?.attempts, 1);
    assert.deepEqual(record?.value, { ok: 't0' });
    assert.equal(record?.processes?.length, 1);
    assert.match(record!.processes![0]!, /^node0\//);
  });

  test('live processes share the tasks: after settling each holds ⌈n/k⌉ at most, and all are held', async () => {
    const nodes = [await c.node(), await c.node(), await c.node()];
    await declare(nodes[0]!, 10);
    await waitFor('10 tasks held, 4 / 3 / 3 at most', () => total(nodes) === 10 && nodes.every((n) => held(n) <= 4), 15_000);
    // A task is claimed by one process at a time: the schedulers' claims are disjoint and cover the catalogue.
    const claimed = nodes.flatMap((n) => [...Array(10).keys()].map((i) => `t${i}`).filter((id) => n.scheduler.claimedTask(id) !== undefined));
    assert.equal(new Set(claimed).size, 10);
    assert.equal(claimed.length, 10);

    // One leaves (a stop): its tasks are given back and taken by the two others, ⌈10/2⌉ = 5 each.
    await nodes[2]!.stop();
    await waitFor('10 tasks held by two, 5 each', () => held(nodes[0]!) === 5 && held(nodes[1]!) === 5, 15_000);
  });

  test("a dead process's tasks are claimed by the others within claimTtlMs", async () => {
    const ttl = 1500;
    const a = await c.node({ claimTtlMs: ttl });
    const b = await c.node({ claimTtlMs: ttl });
    await declare(a, 6);
    await waitFor('6 tasks held, 3 each', () => held(a) === 3 && held(b) === 3, 15_000);
    const roundsBefore = rounds(b);
    await a.die();
    let roundsTaken = 0;
    await waitFor('b holds all 6', () => {
      if (held(b) !== 6) return false;
      roundsTaken = rounds(b) - roundsBefore;
      return true;
    }, 10_000);
    // a's lease ends at most claimTtlMs after its last renewal; b renews every tickMs (200 ms here) and wakes for
    // the end of the lease, so the round after it claims the tasks: within the rounds of one lease, and two more.
    const roundsPerLease = Math.ceil(ttl / 200);
    assert.ok(roundsTaken <= roundsPerLease + 2, `the tasks were claimed ${roundsTaken} rounds of b after the death (a lease is ${roundsPerLease})`);
  });

  test('a write under a claim that is no longer current is refused, and the claim is dropped here', async () => {
    const a = await c.node();
    await declare(a, 1);
    await waitFor('a holds t0', () => held(a) === 1);
    c.clock.advance(MIN);
    await waitFor('a run started', () => a.executor.executions.length === 1);
    const run = a.executor.last();
    const S = c.names.S;
    await waitFor('the start is logged', async () => (await c.admin.query(`SELECT status FROM ${S}.task_runs WHERE run_id = $1`, [run.queued.runId])).rows[0]?.status === 'started');
    // Another claim of the task (as a takeover makes): a's epoch is stale from now on.
    await c.admin.query(`UPDATE ${S}.task_state SET epoch = nextval('${c.schema}.task_epoch_seq') WHERE task_id = 't0'`);
    await assert.rejects(a.store.desiredState.finishRun('t0', run.queued.runId, { status: 'success', when: c.clock.now(), attempt: 1 }), TaskNotClaimedError);
    const { rows } = await c.admin.query(`SELECT r.status, l.final_status FROM ${S}.task_runs r JOIN ${S}.task_run_log l USING (run_id) WHERE run_id = $1`, [run.queued.runId]);
    assert.deepEqual(rows[0], { status: 'started', final_status: null }, 'nothing was written');
    // The refusal makes the keeper look: the claim is not a's any more, so its run here is canceled.
    await waitFor('the run here is canceled', () => run.cancelCalls > 0);
    await waitFor('the task is released here', () => a.scheduler.claimedTask('t0') === undefined);
  });

  test('a process whose lease ended in the database lets go of everything and joins again as a new member', async () => {
    const a = await c.node();
    await declare(a, 2);
    await waitFor('a holds 2', () => held(a) === 2);
    const first = a.store.claimStats()?.member;
    c.clock.advance(MIN);
    await waitFor('2 runs started', () => a.executor.executions.length === 2);
    await c.admin.query(`UPDATE ${c.names.S}.task_members SET expires_at = now() - interval '1 second' WHERE id = $1`, [first]);
    await waitFor('its runs canceled', () => a.executor.executions.every((e) => e.cancelCalls > 0));
    await waitFor('it holds both again, as a new member', () => held(a) === 2 && a.store.claimStats()?.member !== first, 10_000);
    assert.equal(a.store.claimStats()?.leasesLost, 1);
  });
});
