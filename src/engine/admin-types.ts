/**
 * `engine.admin`'s shapes beyond the broker's (`broker/admin-types.ts`): tasks, threads, processes, the events every
 * mutation emits, and who made it.
 */
import type { RunRecord } from '../tasks/types.js';

/** Who made a change: the dashboard passes its caller; code names itself. Default `'api'`. */
export interface ActorOptions {
  readonly by?: string;
}

export interface TaskView {
  readonly id: string;
  /** `cron` text, or `every` in ms. */
  readonly schedule: { readonly cron: string; readonly timezone: string | undefined } | { readonly every: number };
  readonly handler: string;
  readonly maxConcurrency: number;
  /** False while disabled: it creates no runs and keeps its definition. */
  readonly enabled: boolean;
  /** When its next run is due (epoch ms); undefined when disabled or not scheduled here. */
  readonly nextDue: number | undefined;
  /**
   * Runs in flight here, and the runner slots they hold (`maxConcurrency` in use); for a task of a shared store
   * that another process claims, its runs created and not yet ended there, with no slots here.
   */
  readonly runsActive: number;
  readonly slotsBusy: number;
  /** Its newest logged run. */
  readonly lastRun: RunRecord | undefined;
  /** With a shared store: the live process that claims it (as `processes()` names it), if one does. */
  readonly claimedBy?: { readonly host: string; readonly pid: number } | undefined;
}

export interface TaskDetail extends TaskView {
  readonly payload: unknown;
  /** Its run log, newest first. */
  readonly runs: readonly RunRecord[];
}

export interface ThreadView {
  readonly index: number;
  readonly ready: boolean;
  readonly parked: boolean;
  /** What it runs now, if anything. */
  readonly running:
    | {
        readonly kind: 'eval' | 'run';
        /** The evaluation's id, or the task run's. */
        readonly id: string;
        /** The evaluation's type, or the task's id. */
        readonly name: string;
        readonly startedAt: number | undefined;
        /** The pool's prediction for its type or handler, ms. */
        readonly predictedMs: number;
      }
    | undefined;
}

export interface ProcessView {
  readonly host: string;
  readonly pid: number;
  readonly threads: number;
  /** When it last showed it was alive (epoch ms): now, for this process. */
  readonly lastSeen: number;
  /** The tasks it has claimed. */
  readonly claimedTasks: readonly string[];
}

export interface AdminEvents {
  'admin:replay': { readonly id: string; readonly by: string };
  'admin:discard': { readonly id: string; readonly by: string };
  'admin:pause': { readonly type: string; readonly by: string };
  'admin:resume': { readonly type: string; readonly by: string };
  'admin:force-run': { readonly taskId: string; readonly runId: string; readonly by: string };
  'admin:disable': { readonly taskId: string; readonly by: string };
  'admin:enable': { readonly taskId: string; readonly by: string };
  'admin:cancel': { readonly threadIndex: number; readonly id: string; readonly by: string };
}
