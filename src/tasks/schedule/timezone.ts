import { InvalidTaskError } from '../../errors.js';

const EXPECTED = "an IANA time zone name like 'UTC' or 'America/New_York'";

// Valid names seen so far → canonical name. Only valid names are stored and there are a few hundred of them
// (plus spelling variants), so the map is capped rather than evicted with care.
const canonical = new Map<string, string>();
const CANONICAL_CAP = 1024;

/**
 * Validates a time zone with the runtime's Intl data and returns its canonical spelling
 * (`'america/new_york'` → `'America/New_York'`), so that sharing keys do not split on case.
 * `undefined` means UTC.
 */
export function parseTimezone(value: unknown): string {
  if (value === undefined) return 'UTC';
  if (typeof value !== 'string' || value.length === 0 || value.length > 64) {
    throw new InvalidTaskError('timezone', EXPECTED, value);
  }
  const known = canonical.get(value);
  if (known !== undefined) return known;
  let name: string;
  try {
    name = new Intl.DateTimeFormat('en-US', { timeZone: value }).resolvedOptions().timeZone;
  } catch {
    throw new InvalidTaskError('timezone', EXPECTED, value);
  }
  if (canonical.size >= CANONICAL_CAP) canonical.clear();
  canonical.set(value, name);
  return name;
}
