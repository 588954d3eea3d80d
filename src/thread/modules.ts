/**
 * Loads user modules (schedulers, task handlers) on a pool thread. Only modules registered on main by name are
 * ever loaded: the name comes from the evaluation's `type` or the task's `handler`, the URL from the engine options,
 * never from evaluation data.
 */
import { UnknownHandlerError, UnknownSchedulerError, InvalidArgumentError } from '../errors.js';
import type { ModuleRef } from '../pool/messages.js';

export type UserFunction = (input: unknown, ctx: unknown) => unknown;

export class ModuleTable {
  readonly #refs: Readonly<Record<string, ModuleRef>>;
  readonly #kind: 'scheduler' | 'handler';
  readonly #loaded = new Map<string, UserFunction>();
  readonly #loading = new Map<string, Promise<UserFunction>>();

  constructor(refs: Readonly<Record<string, ModuleRef>>, kind: 'scheduler' | 'handler') {
    this.#refs = refs;
    this.#kind = kind;
  }

  /** The loaded function, or undefined when it still has to be imported (then call `load`). */
  loaded(name: string): UserFunction | undefined {
    return this.#loaded.get(name);
  }

  load(name: string): Promise<UserFunction> {
    const ready = this.#loaded.get(name);
    if (ready !== undefined) return Promise.resolve(ready);
    let pending = this.#loading.get(name);
    if (pending === undefined) {
      pending = this.#import(name);
      this.#loading.set(name, pending);
      pending.then(
        (fn) => {
          this.#loaded.set(name, fn);
          this.#loading.delete(name);
        },
        () => this.#loading.delete(name),
      );
    }
    return pending;
  }

  /** Imports every registered module (at thread start, so the first item does not pay for it). */
  async preload(): Promise<void> {
    await Promise.allSettled(Object.keys(this.#refs).map((name) => this.load(name)));
  }

  async #import(name: string): Promise<UserFunction> {
    const ref = Object.hasOwn(this.#refs, name) ? this.#refs[name] : undefined;
    if (ref === undefined) {
      const known = Object.keys(this.#refs);
      throw this.#kind === 'scheduler' ? new UnknownSchedulerError(name, known) : new UnknownHandlerError(name, known);
    }
    const module = (await import(ref.url)) as Record<string, unknown>;
    const fn = module[ref.exportName];
    if (typeof fn !== 'function') {
      throw new InvalidArgumentError(`${this.#kind}s.${name}`, `a module exporting a function as \`${ref.exportName}\` (${ref.url})`, fn);
    }
    return fn as UserFunction;
  }
}
