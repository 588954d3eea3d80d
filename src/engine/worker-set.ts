/**
 * The engine's scheduling workers as one set: which worker holds which delivery (a token → worker index, so that a
 * lease extension, a cancel and an abort find their worker in O(1)), the broker hooks that need it (it is the
 * broker's `LeaseKeeper`), and the operations on all of them (start, pause, resume, stop, cancel what they hold,
 * count what they gave back).
 */
import type { BrokerBackend, LeaseKeeper } from '../backend/broker-backend.js';
import type { DeliveryIndex, SchedulingWorker } from './scheduling-worker.js';
import { WorkerView, type EngineWorker } from './worker-view.js';

export interface WorkerInfo {
  readonly id: number;
  readonly status: SchedulingWorker['status'];
  readonly activity: SchedulingWorker['activity'];
  readonly evaluationId: string | undefined;
  readonly processed: number;
}

export class WorkerSet implements DeliveryIndex, LeaseKeeper {
  readonly #workers: SchedulingWorker[] = [];
  /** Token of each delivery a worker holds → that worker. */
  readonly #byToken = new Map<string, SchedulingWorker>();
  #views: readonly EngineWorker[] | undefined;

  /**
   * The broker asks before a delivery's lease ends (`LeaseKeeper`): a lease counts from the start of the work, and a
   * heartbeat written into the slot since the last look keeps a long scheduler from being redelivered.
   */
  leaseProgress(evaluationId: string, token: string): boolean | number {
    return this.holderOf(evaluationId, token)?.deadlineProgress(token) ?? false;
  }

  /** `leaseProgress` as a function, for a broker's `extendNackDeadline` option. */
  readonly extendNackDeadline = (evaluationId: string, token: string): boolean | number => this.leaseProgress(evaluationId, token);

  /**
   * Makes `count` workers (`make` gets each one's id and this index), keeps `broker`'s leases and listens to it: a
   * delivery whose lease ended has been redelivered, so its thread is asked to stop working on the old one.
   */
  serve(broker: BrokerBackend, count: number, make: (id: number, deliveries: DeliveryIndex) => SchedulingWorker): void {
    for (let id = 0; id < count; id++) this.#workers.push(make(id, this));
    broker.keepLeases(this);
    broker.events.on('broker:nack', ({ evaluation, token, timedOut }) => {
      if (timedOut) this.holderOf(evaluation.id, token)?.cancelCurrent();
    });
  }

  held(token: string, worker: SchedulingWorker): void {
    this.#byToken.set(token, worker);
  }

  released(token: string): void {
    this.#byToken.delete(token);
  }

  get size(): number {
    return this.#workers.length;
  }

  /**
   * The worker holding this delivery of the evaluation. By token: after a nack deadline fires, the worker with the
   * old delivery keeps it until its thread lets go while another already runs the redelivery.
   */
  holderOf(evaluationId: string, token: string): SchedulingWorker | undefined {
    const worker = this.#byToken.get(token);
    const current = worker?.current;
    return current !== undefined && current.token === token && current.evaluation.id === evaluationId ? worker : undefined;
  }

  /** Cancels the delivery `token` of the evaluation if a worker holds it (its scheduler sees `ctx.canceled`). */
  cancel(evaluationId: string, token: string): boolean {
    return this.holderOf(evaluationId, token)?.cancelCurrent() ?? false;
  }

  /**
   * Cancels every delivery of the evaluation that a worker here holds, without asking the broker which is current:
   * besides the current one there is at most an older one whose lease ended, already told to stop. False when no
   * worker holds it. A scan: a cancel by id is rare, and an index by id would cost every delivery a map write.
   */
  cancelEvaluation(evaluationId: string): boolean {
    let canceled = false;
    for (const worker of this.#workers) {
      if (worker.current?.evaluation.id === evaluationId && worker.cancelCurrent()) canceled = true;
    }
    return canceled;
  }

  /** Gives up the delivery for good (removed once its thread lets go); false when no worker holds it. */
  abort(evaluationId: string, token: string, cause: unknown): boolean {
    return this.holderOf(evaluationId, token)?.abortCurrent(token, cause) ?? false;
  }

  /** Cancels whatever every worker holds. */
  cancelAll(): void {
    for (const worker of this.#workers) worker.cancelCurrent();
  }

  start(): void {
    for (const worker of this.#workers) void worker.start();
  }

  pause(): void {
    for (const worker of this.#workers) worker.pause();
  }

  resume(): void {
    for (const worker of this.#workers) worker.resume();
  }

  stop(): Promise<void> {
    return Promise.all(this.#workers.map((w) => w.stop())).then(() => undefined);
  }

  /** Evaluations the workers nacked back into the broker while stopping. */
  get givenBack(): number {
    let n = 0;
    for (const worker of this.#workers) n += worker.givenBack;
    return n;
  }

  /** Read-only views (status, activity, the evaluation held, `pause()`/`resume()`). */
  get views(): readonly EngineWorker[] {
    return (this.#views ??= Object.freeze(this.#workers.map((w) => new WorkerView(w))));
  }

  infos(): WorkerInfo[] {
    return this.#workers.map((w) => ({ id: w.id, status: w.status, activity: w.activity, evaluationId: w.current?.evaluation.id, processed: w.processed }));
  }
}
