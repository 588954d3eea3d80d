import type { ChangeSet } from './types.js';

/**
 * The last `limit` committed change sets, for replicas that fell behind. Indexes are consecutive, so the change set
 * for index i sits at a fixed distance from the oldest one kept.
 */
export class ChangeHistory {
  readonly #limit: number;
  #sets: ChangeSet[] = [];
  /** Position of the oldest kept set in `#sets`; trimming moves it instead of shifting the array each time. */
  #head = 0;

  constructor(limit: number) {
    this.#limit = limit;
  }

  push(set: ChangeSet): void {
    if (this.#limit === 0) return;
    this.#sets.push(set);
    if (this.#sets.length - this.#head > this.#limit) {
      this.#sets[this.#head] = undefined as unknown as ChangeSet;
      this.#head++;
      // Compact once the dead prefix is as long as the live part: amortized O(1) per push.
      if (this.#head >= this.#limit) {
        this.#sets = this.#sets.slice(this.#head);
        this.#head = 0;
      }
    }
  }

  /** Change sets after `index` up to `current`; undefined when some of them were trimmed. */
  since(index: number, current: number): readonly ChangeSet[] | undefined {
    if (index === current) return [];
    const oldest = this.#sets[this.#head];
    if (oldest === undefined || oldest.index > index + 1) return undefined;
    return this.#sets.slice(this.#head + (index + 1 - oldest.index));
  }
}
