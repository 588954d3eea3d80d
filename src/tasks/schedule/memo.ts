/**
 * Memo of a schedule's answers as one stretch of *consecutive* scheduled instants:
 * `points[0] < points[1] < …` with no scheduled instant between neighbours, and none in `(lo, points[0])`.
 * Any `after` in `[lo, last point)` then answers by binary search, without a cron evaluation (orders of magnitude
 * dearer).
 *
 * One stretch fits how a shared schedule is asked: many tasks ask about the same `after` (the same tick or the
 * same just-finished `scheduledFor`), and time only moves forward, so each new answer extends the stretch at its
 * end. An `after` far from the stretch starts a new one; the answers stay correct, only the memo is replaced.
 */
const CAPACITY = 64;

export class StretchMemo {
  #lo = Infinity;
  #points: number[] = [];

  /** The memoized `next(after)`, or `undefined` when `after` is outside the stretch. */
  lookup(after: number): number | undefined {
    const points = this.#points;
    const last = points.length - 1;
    if (last < 0 || after < this.#lo || after >= points[last]!) return undefined;
    // Smallest point > after; one exists because after < points[last].
    let low = 0;
    let high = last;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (points[mid]! > after) high = mid;
      else low = mid + 1;
    }
    return points[low];
  }

  /** Records that `next` is the smallest scheduled instant > `after` (a miss of `lookup`). */
  record(after: number, next: number): void {
    const points = this.#points;
    const last = points.length - 1;
    if (last >= 0 && after === points[last]) {
      points.push(next);
      if (points.length > CAPACITY) {
        // Keep the newest half: time moves forward, and this keeps the push amortized O(1).
        const drop = CAPACITY / 2;
        this.#lo = points[drop - 1]!;
        points.splice(0, drop);
      }
    } else if (last >= 0 && next === points[0] && after < this.#lo) {
      this.#lo = after; // the same stretch, known from further back
    } else {
      this.#lo = after;
      this.#points = [next];
    }
  }
}
