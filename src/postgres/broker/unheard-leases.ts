/**
 * Leases the database shows as this process's that it never heard of. An idle enqueue leases its evaluation to a
 * waiting process and tells it in a notification (an offer); a notification can be lost (behind a transaction
 * pooler LISTEN hears nothing at all; a reconnect loses what was sent meanwhile), and so can a fetch's answer (the
 * connection broke after the lease committed). Such a lease would wait out its nack timeout and cost its evaluation
 * a delivery. So at each poll the broker looks for them (`look`) and takes them as they are, token and delivery
 * count unchanged: a lost notification costs at most a poll interval, never a delivery.
 *
 * The look must never take a delivery twice. A token can be in the database as this process's and still not be
 * news in four ways, and this ledger excludes each:
 * - held here: sent with the look, and checked again when its answer comes (an offer heard meanwhile);
 * - being given back (its lease was dropped here before the give-back commits): `givingBack` until it did;
 * - heard while the look was out (an offer taken or declined then), or taken by an earlier look and heard only now
 *   (a late notification): `heard`, and the known tokens;
 * - let go here without its end landing (an end refused, or given up on at the lease's end): `abandoned`, so that
 *   a delivery whose end keeps failing is not run again and again uncharged; its lease runs out for the reaper.
 * Fetches are not run while a look is out (the broker serializes them), so a fetch's rows are always held before a
 * look is sent, or were leased after its snapshot.
 */
export class UnheardLeases {
  readonly #givingBack = new Map<string, number>();
  /** Offers heard while a look is out; undefined while none is. */
  #heardDuringLook: Set<string> | undefined;
  /**
   * Tokens that are no news, the latest `KNOWN_KEPT`: those the looks took (their notifications, should they come
   * after all, are ignored), and those whose end this process gave up on (the lease runs out for the reaper: taking
   * it again would run it again, uncharged, as often as its end fails).
   */
  readonly #known = new Set<string>();

  /** A give-back of `tokens` is on its way. */
  givingBack(tokens: readonly string[]): void {
    for (const t of tokens) this.#givingBack.set(t, (this.#givingBack.get(t) ?? 0) + 1);
  }

  /** The give-back of `tokens` is over (committed, or failed: then the leases run out). */
  gaveBack(tokens: readonly string[]): void {
    for (const t of tokens) {
      const n = (this.#givingBack.get(t) ?? 1) - 1;
      if (n <= 0) this.#givingBack.delete(t);
      else this.#givingBack.set(t, n);
    }
  }

  /** This process let go of `token` without its end landing: no look takes it (its lease runs out). */
  abandoned(token: string): void {
    this.#remember(token);
  }

  /** An offer's notification came (taken or declined). Answers false when a look took it first: ignore it. */
  heard(token: string): boolean {
    if (this.#known.has(token)) return false;
    this.#heardDuringLook?.add(token);
    return true;
  }

  /** A look begins: the tokens it must not take, besides those `held`. */
  begin(held: readonly string[]): string[] {
    this.#heardDuringLook = new Set();
    return [...held, ...this.#givingBack.keys()];
  }

  /** The look's answer is in: a filter that is true for each token it may take (`isHeld` says what is held now). */
  end(isHeld: (token: string) => boolean): (token: string) => boolean {
    const heard = this.#heardDuringLook ?? new Set<string>();
    this.#heardDuringLook = undefined;
    return (token) => {
      if (isHeld(token) || heard.has(token) || this.#givingBack.has(token) || this.#known.has(token)) return false;
      this.#remember(token);
      return true;
    };
  }

  #remember(token: string): void {
    this.#known.add(token);
    if (this.#known.size > KNOWN_KEPT) this.#known.delete(this.#known.values().next().value!);
  }
}

/**
 * Tokens remembered as no news. A look takes only what was not heard in time, a handful at most per poll; a late
 * notification comes a transit after its commit; an abandoned lease runs out within a nack timeout. A few thousand
 * cover each many times over at the rates where these happen (idle enqueues, failed ends).
 */
const KNOWN_KEPT = 4_096;
