/**
 * What the parts of the PostgreSQL task store share: the database, the schema's SQL texts, this process's claims
 * and run fences, and the way back to the claim keeper when the database refuses a write as stale.
 */
import { TaskNotClaimedError } from '../../errors.js';
import type { Logger } from '../../observability/logger.js';
import type { Database } from '../database.js';
import type { HeldClaim, HeldClaims } from './held-claims.js';
import type { TaskQueries } from './queries.js';
import type { RunWrites } from './run-writes.js';

export interface TaskStoreContext {
  readonly db: Database;
  /** The SQL texts of the schema. */
  readonly queries: TaskQueries;
  readonly claims: HeldClaims;
  /** The creates, starts and finishes of runs, sent in batches. */
  readonly writes: RunWrites;
  /** Run log entries kept per task. */
  readonly runLogLimit: number;
  readonly logger: Logger;
  /** The database refused a write of `claim` as stale: the claim keeper looks at this process's claims at once. */
  staleClaim(claim: HeldClaim): void;
}

/** The refusal of a write under a claim that is no longer current (taken over, deleted, or its lease ended). */
export function staleClaimError(claim: HeldClaim): TaskNotClaimedError {
  const error = new TaskNotClaimedError(claim.taskId);
  error.message = `Expected task "${claim.taskId}" to be claimed by this process (claim epoch ${claim.epoch}), but that claim is no longer current: the write was refused`;
  return error;
}
