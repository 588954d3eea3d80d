import { CronExpressionParser, type CronExpression } from 'cron-parser';
import { InvalidTaskError } from '../../errors.js';
import { checkLimit, checkTime } from './args.js';
import type { Schedule } from './types.js';

const EXPECTED = 'a cron expression with 5 fields (minute hour day-of-month month day-of-week) or 6 (with leading seconds)';

/**
 * Cheap structural check and normalization (single spaces) of a cron expression; the full parse happens once per
 * shared Schedule. Rejects what cron-parser would quietly accept: fewer than 5 fields (it pads 3-field
 * expressions) and `@daily`-style aliases (one field), and `H`, whose random value would make a shared,
 * pure schedule depend on which task created it.
 */
export function parseCron(value: unknown): { readonly text: string } {
  if (typeof value !== 'string' || value.length > 1024) throw new InvalidTaskError('cron', EXPECTED, value);
  const fields = value.trim().split(/\s+/);
  if (fields.length !== 5 && fields.length !== 6) throw new InvalidTaskError('cron', EXPECTED, value);
  // The last two fields (month, day of week) take 3-letter names such as `THU`; cron-parser resolves those
  // before it looks for `H`, so a name is not a hash.
  const hashed = fields.some((field, at) => /H/.test(at >= fields.length - 2 ? field.replace(/[a-z]{3}/gi, '') : field));
  if (hashed) {
    throw new InvalidTaskError('cron', `${EXPECTED}, without the random \`H\``, value);
  }
  return { text: fields.join(' ') };
}

/** PROVISIONAL: plain cron-parser in the zone, not yet DST-corrected. */
export class CronSchedule implements Schedule {
  readonly kind = 'cron' as const;
  readonly key: string;
  readonly #expression: CronExpression;

  constructor(text: string, timezone: string) {
    this.key = `cron:${text}@${timezone}`;
    try {
      this.#expression = CronExpressionParser.parse(text, { tz: timezone });
    } catch (cause) {
      const error = new InvalidTaskError('cron', `${EXPECTED} (${cause instanceof Error ? cause.message : String(cause)})`, text);
      Object.defineProperty(error, 'cause', { value: cause, writable: true, configurable: true });
      throw error;
    }
  }

  next(afterMs: number): number {
    checkTime('afterMs', afterMs);
    this.#expression.reset(new Date(afterMs));
    try {
      return this.#expression.next().getTime();
    } catch {
      return Infinity;
    }
  }

  between(fromExclusive: number, toInclusive: number, limit: number): number[] {
    checkTime('fromExclusive', fromExclusive);
    checkTime('toInclusive', toInclusive);
    checkLimit(limit);
    const out: number[] = [];
    for (let t = this.next(fromExclusive); t <= toInclusive && out.length < limit; t = this.next(t)) out.push(t);
    return out;
  }
}
