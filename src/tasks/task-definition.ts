/**
 * When two declarations of a task are the same declaration: every field equal, the payload by value (a
 * re-declaration at a process's start-up builds a new payload object each time). `engine.tasks.add` of a claimed id
 * with the same definition changes nothing; with another, it replaces the task.
 */
import { isDeepStrictEqual } from 'node:util';
import type { Task } from './task.js';

export function sameTaskDefinition(a: Task, b: Task): boolean {
  return a === b || isDeepStrictEqual(a, b);
}
