/**
 * Loads user modules (schedulers, task handlers) on a pool thread. Only modules registered on main by name are
 * ever loaded: the name comes from the evaluation's `type` or the task's `handler`, the URL from the engine options,
 * never from evaluation data.
 *
 * A module that cannot be loaded (its import throws, or it exports no function under its export name) fails as a
 * `ModuleLoadError`, both when the thread preloads every module at start (main is told in the thread's `ready`
 * message, and `engine.start()` rejects with it) and for each item that needs it afterwards.
 */
import { InvalidArgumentError, ModuleLoadError, UnknownHandlerError, UnknownSchedulerError, toWire } from '../errors.js';
import type { Logger } from 'pino';
import type { ModuleLoadFailure, ModuleRef } from '../protocol/messages.js';

export type UserFunction = (input: unknown, ctx: unknown) => unknown;

export class ModuleTable {
  readonly #refs: Readonly<Record<string, ModuleRef>>;
  readonly #kind: 'scheduler' | 'handler';
  readonly #threadIndex: number;
  readonly #loaded = new Map<string, UserFunction>();
  readonly #loading = new Map<string, Promise<UserFunction>>();

  constructor(refs: Readonly<Record<string, ModuleRef>>, kind: 'scheduler' | 'handler', threadIndex: number) {
    this.#refs = refs;
    this.#kind = kind;
    this.#threadIndex = threadIndex;
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

  /**
   * Imports every registered module (at thread start, so the first item does not pay for it) and returns the ones
   * that failed, with the error of each.
   */
  async preload(): Promise<ModuleLoadFailure[]> {
    const names = Object.keys(this.#refs);
    const results = await Promise.allSettled(names.map((name) => this.load(name)));
    const failures: ModuleLoadFailure[] = [];
    results.forEach((result, i) => {
      if (result.status === 'fulfilled') return;
      const ref = this.#refs[names[i]!]!;
      const reason: unknown = result.reason;
      const error = reason instanceof ModuleLoadError ? reason.cause : reason;
      failures.push({ kind: this.#kind, name: names[i]!, url: ref.url, exportName: ref.exportName, error: toWire(error) });
    });
    return failures;
  }

  async #import(name: string): Promise<UserFunction> {
    const ref = Object.hasOwn(this.#refs, name) ? this.#refs[name] : undefined;
    if (ref === undefined) {
      const known = Object.keys(this.#refs);
      throw this.#kind === 'scheduler' ? new UnknownSchedulerError(name, known) : new UnknownHandlerError(name, known);
    }
    const module = { kind: this.#kind, name, url: ref.url, exportName: ref.exportName, threadIndex: this.#threadIndex };
    let namespace: Record<string, unknown>;
    try {
      namespace = (await import(ref.url)) as Record<string, unknown>;
    } catch (error) {
      throw new ModuleLoadError(module, error);
    }
    const fn = namespace[ref.exportName];
    if (typeof fn !== 'function') {
      throw new ModuleLoadError(module, new InvalidArgumentError(`${this.#kind}s.${name}`, `a module exporting a function as \`${ref.exportName}\``, fn));
    }
    return fn as UserFunction;
  }
}

/**
 * Registers the module hooks main asked for (see `src/pool/module-hooks.ts`) on this thread, before any user module
 * is imported: a module whose import failed for want of them stays failed in this thread's module cache. A hook
 * that cannot be registered is logged; the modules that needed it then fail to load and are reported as such.
 */
export async function registerModuleHooks(hooks: readonly ModuleRef[], logger: Logger): Promise<void> {
  for (const hook of hooks) {
    try {
      const namespace = (await import(hook.url)) as Record<string, unknown>;
      (namespace[hook.exportName] as () => unknown)();
    } catch (error) {
      logger.warn({ err: error, hook: hook.url }, 'could not register the module hooks of the main thread on this pool thread');
    }
  }
}
