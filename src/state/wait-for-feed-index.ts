/**
 * `waitForIndex` of every `StateBackend`, written once over the `ChangeFeed` it waits on: the feed's `index` only
 * moves with a change set delivered to its listeners, so the change set that reaches `index` settles the wait.
 */
import type { ChangeFeed } from '../backend/state-backend.js';
import { AbortedError, InvalidArgumentError } from '../errors.js';

/**
 * Resolves once `feed` is at `index` or beyond: `undefined` at once when it already is (nothing to wait for, no
 * promise), else a promise settled by the change set that reaches it, or rejected with `AbortedError` when `signal`
 * aborts. Throws `InvalidArgumentError` for an index that is not an integer >= 0 or a signal that is not one.
 * The listener is gone once the promise settles, either way.
 */
export function waitForFeedIndex(feed: Pick<ChangeFeed, 'index' | 'onChange'>, index: number, signal?: AbortSignal): Promise<void> | undefined {
  if (!Number.isSafeInteger(index) || index < 0) throw new InvalidArgumentError('index', 'an integer >= 0', index);
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new InvalidArgumentError('signal', 'an AbortSignal or undefined', signal);
  if (index <= feed.index) return undefined;
  if (signal?.aborted === true) return Promise.reject(new AbortedError('waitForIndex', { cause: signal.reason }));
  return new Promise<void>((resolve, reject) => {
    const onAbort = (): void => {
      unsubscribe();
      reject(new AbortedError('waitForIndex', { cause: signal!.reason }));
    };
    const unsubscribe = feed.onChange((change) => {
      if (change.index < index) return;
      unsubscribe();
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
