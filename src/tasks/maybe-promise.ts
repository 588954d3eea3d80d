/**
 * The desired state, the log writer and the executor's `finished()` may answer with a value or a promise (a durable
 * backend is async, the in-memory one is not). The scheduler takes the synchronous path whenever it can, so that a
 * run created by a synchronous desired state starts inside `tick()` itself.
 */
export type MaybePromise<T> = T | PromiseLike<T>;

/** `value` is a promise or another thenable. */
export function isPromiseLike<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/**
 * Calls `next` with the value: at once when it is not a promise, on settlement otherwise. A rejection (or a throw)
 * goes to `failed`. Neither callback's own throw escapes as an unhandled rejection: it goes to `internal`.
 */
export function settle<T>(
  value: MaybePromise<T>,
  next: (value: T) => void,
  failed: (error: unknown) => void,
  internal: (error: unknown) => void,
): void {
  if (!isPromiseLike(value)) {
    next(value);
    return;
  }
  value.then(
    (resolved) => {
      try {
        next(resolved);
      } catch (error) {
        internal(error);
      }
    },
    (error: unknown) => {
      try {
        failed(error);
      } catch (inner) {
        internal(inner);
      }
    },
  );
}
