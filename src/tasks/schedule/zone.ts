/**
 * Wall clocks of one IANA time zone, from the runtime's Intl data.
 *
 * A "wall time" here is the local date and time written as if it were UTC, in epoch ms: 2026-03-08 02:30 in
 * New York is `Date.UTC(2026, 2, 8, 2, 30)`. Wall times have no DST, so cron matching can run on them with
 * cron-parser in UTC, and the zone only decides which instants (none, one or two) carry a given wall time.
 */

const DAY_MS = 86_400_000;

/** Instants this module supports: years 1000 to 9999, where Intl and `Date.UTC` agree on every field. */
export const MIN_INSTANT = Date.UTC(1000, 0, 2);
export const MAX_INSTANT = Date.UTC(9999, 11, 30);

// "3/8/2026, 02:30:00" for en-US with numeric fields and a 24-hour cycle.
const FORMATTED = /^(\d+)\/(\d+)\/(\d+),? (\d+):(\d+):(\d+)$/;

export class Zone {
  readonly name: string;
  readonly #format: Intl.DateTimeFormat;

  constructor(name: string) {
    this.name = name;
    this.#format = new Intl.DateTimeFormat('en-US', {
      timeZone: name,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
  }

  /** Wall time (local time as UTC ms) at `instant`. */
  wallOf(instant: number): number {
    const subSecond = instant - Math.floor(instant / 1000) * 1000;
    // `format` + a regex is about 3× faster than `formatToParts`; the parts path is the fallback should an ICU
    // update change the punctuation.
    const match = FORMATTED.exec(this.#format.format(instant));
    if (match === null) return this.wallOfByParts(instant);
    return (
      Date.UTC(Number(match[3]), Number(match[1]) - 1, Number(match[2]), Number(match[4]), Number(match[5]), Number(match[6])) +
      subSecond
    );
  }

  /** `wallOf` through `formatToParts`: slower, independent of punctuation. Public so tests can hold both to the same answers. */
  wallOfByParts(instant: number): number {
    const subSecond = instant - Math.floor(instant / 1000) * 1000;
    const fields: Record<string, number> = {};
    for (const part of this.#format.formatToParts(instant)) fields[part.type] = Number(part.value);
    return (
      Date.UTC(fields['year'] ?? NaN, (fields['month'] ?? NaN) - 1, fields['day'], fields['hour'], fields['minute'], fields['second']) +
      subSecond
    );
  }

  /** UTC offset in ms at `instant` (wall = instant + offset). */
  offsetAt(instant: number): number {
    return this.wallOf(instant) - instant;
  }

  /**
   * The instants whose wall time is `wall`, ascending: none in a spring-forward gap, two in a fall-back overlap,
   * one otherwise. Assumes at most one offset change within a day of `wall`, which holds for every zone in
   * use (this is also how Temporal resolves wall times).
   */
  instantsOf(wall: number): number[] {
    const before = this.offsetAt(wall - DAY_MS);
    const after = this.offsetAt(wall + DAY_MS);
    const out: number[] = [];
    // The earlier offset gives the earlier instant in an overlap (before > after there).
    const first = wall - before;
    if (this.wallOf(first) === wall) out.push(first);
    if (after !== before) {
      const second = wall - after;
      if (this.wallOf(second) === wall) {
        if (out.length === 1 && out[0]! > second) out.unshift(second);
        else out.push(second);
      }
    }
    return out;
  }

  /**
   * The first instant with the new offset, given `lo` < `hi` whose offsets differ by exactly one change.
   * Binary search to the millisecond: about 25 Intl calls, paid only around a transition.
   */
  transitionIn(lo: number, hi: number): number {
    const target = this.offsetAt(hi);
    let low = lo; // offset differs from target
    let high = hi; // offset equals target
    while (high - low > 1) {
      const mid = Math.floor((low + high) / 2);
      if (this.offsetAt(mid) === target) high = mid;
      else low = mid;
    }
    return high;
  }
}

// One Zone per canonical name; a few hundred names exist, so the map stays small.
const zones = new Map<string, Zone>();

export function zoneOf(name: string): Zone {
  let zone = zones.get(name);
  if (zone === undefined) {
    zone = new Zone(name);
    zones.set(name, zone);
  }
  return zone;
}
