/**
 * Test oracle for wall clocks, written independently of src/tasks/schedule/zone.ts (formatToParts, no regex,
 * no offset arithmetic), so the DST tests do not check the implementation against itself.
 */

export interface Wall {
  readonly year: number;
  readonly month: number;
  readonly day: number;
  readonly hour: number;
  readonly minute: number;
  readonly second: number;
  /** 0 = Sunday. */
  readonly weekday: number;
}

const formats = new Map<string, Intl.DateTimeFormat>();
const WEEKDAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];

export function wall(instant: number, timeZone: string): Wall {
  let format = formats.get(timeZone);
  if (format === undefined) {
    format = new Intl.DateTimeFormat('en-GB', {
      timeZone,
      hourCycle: 'h23',
      weekday: 'short',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    formats.set(timeZone, format);
  }
  const parts = new Map<string, string>(format.formatToParts(instant).map((part) => [part.type, part.value]));
  const num = (type: string): number => Number(parts.get(type));
  return {
    year: num('year'),
    month: num('month'),
    day: num('day'),
    hour: num('hour'),
    minute: num('minute'),
    second: num('second'),
    weekday: WEEKDAYS.indexOf(parts.get('weekday') ?? ''),
  };
}

/** `2026-11-01 01:30:00`: readable in assertion messages and a set key for "same wall time". */
export function wallText(instant: number, timeZone: string): string {
  const w = wall(instant, timeZone);
  const p = (n: number): string => String(n).padStart(2, '0');
  return `${w.year}-${p(w.month)}-${p(w.day)} ${p(w.hour)}:${p(w.minute)}:${p(w.second)}`;
}

export const MINUTE = 60_000;
export const HOUR = 3_600_000;
export const DAY = 86_400_000;

/**
 * Brute-force `next` for minute-precision expressions: scans whole minutes after `after`, and takes the first
 * instant whose wall time matches and has not been seen at an earlier instant (the scan starts 3 hours early to
 * know which wall times an overlap already showed). The definition, written as a search.
 */
export function bruteNext(after: number, timeZone: string, matches: (w: Wall) => boolean, horizon = 2 * DAY): number {
  const seen = new Set<string>();
  const start = Math.floor((after - 3 * HOUR) / MINUTE) * MINUTE;
  for (let t = start; t <= after + horizon; t += MINUTE) {
    const text = wallText(t, timeZone);
    const firstTime = !seen.has(text);
    seen.add(text);
    if (t > after && firstTime && matches(wall(t, timeZone))) return t;
  }
  throw new Error(`no match within the horizon after ${new Date(after).toISOString()}`);
}
