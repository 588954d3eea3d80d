/**
 * The deliveries this process holds, as the broker calls that name one by (id, token) see them: a delivery held
 * here is answered from `Leases` without I/O; any other is looked up, and refused with the error the in-memory
 * broker gives. A current token this process does not hold (one handed out by another process) is never its own.
 */
import { assertId, assertToken } from '../../broker/arguments.js';
import { DEFAULT_NAMESPACE } from '../../broker/evaluation.js';
import { EvalNotOutstandingError, NackTimeoutReachedError } from '../../errors.js';
import { isStorableKey } from '../../storable-key.js';
import type { Held, Leases } from './leases.js';
import type { BrokerParts } from './parts.js';
import { refusalError, sqlToken } from './refusals.js';

/** The delivery (id, token) if this process holds it. */
export function heldAs(leases: Leases, id: string, token: string): Held | undefined {
  const held = leases.byToken(token);
  return held !== undefined && held.id === id ? held : undefined;
}

type HeldParts = Pick<BrokerParts, 'db' | 'queries' | 'leases'>;

export class HeldDeliveries {
  readonly #parts: HeldParts;

  constructor(parts: HeldParts) {
    this.#parts = parts;
  }

  /** The token of the evaluation's current delivery, or undefined if it is not outstanding. */
  outstanding(id: string): string | undefined | Promise<string | undefined> {
    assertId('id', id);
    const held = this.#parts.leases.byId(id);
    if (held !== undefined) return held.token;
    if (!isStorableKey(id)) return undefined;
    return this.#parts.db
      .query<{ token: string }>(this.#parts.queries.outstanding, [id], 'an outstanding look-up')
      .then((rows) => rows[0]?.token);
  }

  outstandingReset(id: string, token: string): Promise<void> {
    const held = this.#heldOrRefuse(id, token);
    if (held instanceof Promise) return held;
    if (held.paused) return Promise.resolve();
    return this.#parts.leases.extendNow(held).then((extended) => {
      if (!extended) throw new NackTimeoutReachedError(id);
    });
  }

  pauseNackTimeout(id: string, token: string): void | Promise<never> {
    const held = this.#heldOrRefuse(id, token);
    if (held instanceof Promise) return held;
    this.#parts.leases.pause(held);
  }

  resumeNackTimeout(id: string, token: string): void | Promise<never> {
    const held = this.#heldOrRefuse(id, token);
    if (held instanceof Promise) return held;
    this.#parts.leases.resume(held);
  }

  /** The job of a delivery this process holds (the plan committer locks it before acking in its commit). */
  jobOf(id: string, token: string): { namespace: string; jobId: string } | undefined {
    const held = heldAs(this.#parts.leases, id, token);
    if (held === undefined) return undefined;
    return { namespace: held.evaluation.namespace ?? DEFAULT_NAMESPACE, jobId: held.evaluation.jobId };
  }

  /** The held delivery for (id, token), or the refusal the database gives for it. */
  #heldOrRefuse(id: string, token: string): Held | Promise<never> {
    assertId('id', id);
    assertToken(token);
    const held = heldAs(this.#parts.leases, id, token);
    if (held !== undefined) return held;
    if (!isStorableKey(id)) return Promise.reject(new EvalNotOutstandingError(id));
    return this.#refusal(id, sqlToken(token));
  }

  async #refusal(id: string, token: string): Promise<never> {
    const [row] = await this.#parts.db.query<{ refusal: string | null }>(this.#parts.queries.refusal, [id, token], 'a token check');
    // A current token this process does not hold (a delivery handed out by another process) is still not its own.
    throw refusalError(row?.refusal ?? (row === undefined ? 'not_outstanding' : 'mismatch'), id, token);
  }
}
