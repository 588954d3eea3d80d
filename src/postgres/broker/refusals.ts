/**
 * How the PostgreSQL broker answers a settlement the database refused: the schema's refusal codes as the errors the
 * in-memory broker throws for the same case, and tokens as a statement can carry them. A refusal never reaches the
 * caller as a driver error.
 */
import { EvalNotOutstandingError, NackTimeoutReachedError, TokenMismatchError } from '../../errors.js';

/** A refusal code from the schema's functions as the error the in-memory broker throws for it. */
export function refusalError(status: string, id: string, token: unknown): Error {
  switch (status) {
    case 'timed_out':
    case 'expired':
      return new NackTimeoutReachedError(id);
    case 'mismatch':
      return new TokenMismatchError(id, token);
    default:
      return new EvalNotOutstandingError(id);
  }
}

/**
 * A token as a statement can carry it. Tokens are the broker's own UUIDs; one that `text` cannot hold (a NUL, a lone
 * surrogate) matches no delivery, so it is sent as a token that matches none either, and the database answers with
 * the refusal the in-memory broker gives (mismatch, or not outstanding), rather than with a driver error.
 */
export function sqlToken(token: string): string {
  return token.includes('\u0000') || !token.isWellFormed() ? NO_SUCH_TOKEN : token;
}
/** Never a delivery's token (those are UUIDs), and not empty (which `remove` reads as "no token"). */
const NO_SUCH_TOKEN = '-';

/** Sets `cause` the way the Error constructor does (own, non-enumerable), for errors whose constructor takes none. */
export function withCause<E extends Error>(error: E, cause: unknown): E {
  if (cause !== undefined) Object.defineProperty(error, 'cause', { value: cause, writable: true, configurable: true, enumerable: false });
  return error;
}
