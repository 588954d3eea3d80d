/**
 * Piscina's entry on every pool thread. The engine submits one long-lived task per thread carrying a
 * `MessagePort`; the task runs the thread loop until main says stop. Never imported by main-thread code.
 */
import type { MessagePort } from 'node:worker_threads';
import type { ThreadInit } from '../protocol/messages.js';
import { ThreadLoop } from './thread-loop.js';

export interface ThreadTask {
  readonly port: MessagePort;
  readonly init: ThreadInit;
}

export default async function threadEntry(task: ThreadTask): Promise<void> {
  await new ThreadLoop(task.port, task.init).run();
}
