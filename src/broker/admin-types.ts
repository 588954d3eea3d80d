/**
 * What an operator sees of the broker and may do to it: evaluations listed by state a page at a time, one in detail
 * with its deliveries, a failed one replayed or discarded, a type paused. Shapes shared by every backend.
 */

/** The states an operator lists by: `delayed` is an evaluation waiting out `wait`/`waitUntil` or a nack delay. */
export type AdminEvaluationState = 'ready' | 'unacked' | 'pending' | 'delayed' | 'failed';

export const ADMIN_EVALUATION_STATES: readonly AdminEvaluationState[] = Object.freeze(['ready', 'unacked', 'pending', 'delayed', 'failed']);

/** Most evaluations one page holds. */
export const MAX_PAGE_SIZE = 500;

export interface EvaluationQuery {
  readonly state: AdminEvaluationState;
  /** Only this type (the scheduler's name); for `failed`, the type the evaluation had. */
  readonly type?: string;
  readonly namespace?: string;
  readonly jobId?: string;
  /** By enqueue order: `newest` (default) or `oldest` first. */
  readonly order?: 'newest' | 'oldest';
  /** 1 to `MAX_PAGE_SIZE`, default 50. */
  readonly limit?: number;
  /** The `nextCursor` of the page before. */
  readonly cursor?: string;
}

export interface EvaluationSummary {
  readonly id: string;
  readonly namespace: string;
  readonly jobId: string;
  readonly type: string;
  readonly priority: number;
  readonly state: AdminEvaluationState;
  /** Deliveries from its scheduler queue so far. */
  readonly deliveries: number;
}

export interface EvaluationPage {
  readonly items: readonly EvaluationSummary[];
  /** Where the next page starts; undefined on the last page. */
  readonly nextCursor: string | undefined;
}

/** An error as an operator reads it: text, never markup. */
export interface ErrorView {
  readonly name: string;
  readonly code: string | undefined;
  readonly message: string;
}

/** One delivery of an evaluation: when it started and ended, where it ran, how it ended. */
export interface DeliveryRecord {
  readonly startedAt: number;
  /** Undefined while it runs. */
  readonly endedAt: number | undefined;
  readonly end: 'acked' | 'nacked' | 'timed-out' | 'failed' | 'given-back' | 'removed' | undefined;
  /** The reason it ended with, if any. */
  readonly error: ErrorView | undefined;
  /** The process that held it (`host/pid`). */
  readonly process: string;
}

export interface EvaluationDetail extends EvaluationSummary {
  /** Its queue: the type, or `_failed`. */
  readonly queue: string | undefined;
  readonly holdsJobSlot: boolean;
  readonly payload: unknown;
  /** The reason of its last nack or timeout. */
  readonly lastError: ErrorView | undefined;
  /** Why it is in `_failed`. */
  readonly failure: ErrorView | undefined;
  /** Its most recent deliveries, oldest first. */
  readonly history: readonly DeliveryRecord[];
}

/** How many evaluations are in each state, and ready and unacked per type; each count stops at the cap asked for. */
export interface QueueDepths {
  readonly totals: Readonly<Record<AdminEvaluationState, number>>;
  readonly byType: Readonly<Record<string, { readonly ready: number; readonly unacked: number }>>;
  /** The cap the counts stop at: a count equal to it means "at least". */
  readonly cap: number;
}

/** What a backend's broker offers the admin API. */
export interface BrokerAdmin {
  /** Counts by state and type, each up to `cap` (a database counts a bounded number of rows, not a million). */
  depths(cap: number): QueueDepths | Promise<QueueDepths>;
  listEvaluations(query: EvaluationQuery): EvaluationPage | Promise<EvaluationPage>;
  evaluationDetail(id: string): EvaluationDetail | undefined | Promise<EvaluationDetail | undefined>;
  /** A failed evaluation (not in flight) back to its type's queue with no deliveries counted; false when it is not one. */
  replay(id: string): boolean | Promise<boolean>;
  /** Ids of failed evaluations of `type` (not in flight), up to `limit`. */
  failedIds(type: string, limit: number): readonly string[] | Promise<readonly string[]>;
  /** Workers stop taking `type`; what is in flight finishes. */
  pauseType(type: string): void | Promise<void>;
  resumeType(type: string): void | Promise<void>;
  pausedTypes(): readonly string[] | Promise<readonly string[]>;
}

/** The error as text fields. */
export function errorView(error: unknown): ErrorView | undefined {
  if (error === undefined || error === null) return undefined;
  if (typeof error !== 'object') return { name: 'Error', code: undefined, message: String(error) };
  const e = error as { name?: unknown; code?: unknown; message?: unknown };
  return {
    name: typeof e.name === 'string' ? e.name : 'Error',
    code: typeof e.code === 'string' ? e.code : undefined,
    message: typeof e.message === 'string' ? e.message : String(error),
  };
}
