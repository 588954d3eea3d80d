/**
 * LISTEN on a dedicated connection (a session of its own: LISTEN cannot live on a pooled client). Notifications are
 * hints, never the truth: after every (re)connect the listener LISTENs first and then tells every subscriber to
 * catch up (`onConnect`), since whatever was notified while it was away is lost; each subscriber also polls as the
 * backstop. A dropped connection is retried with a growing delay.
 */
import type { Clock, TimerHandle } from '../clock.js';
import type { Logger } from '../observability/logger.js';
import type { Database, ListenClient } from './database.js';

export interface Subscription {
  /** Called with each notification's payload on the channel. */
  readonly onNotify: (payload: string) => void;
  /** Called after each (re)connect, once LISTEN is in place: look for what may have been missed. */
  readonly onConnect: () => void;
}

const RETRY_MIN_MS = 50;
const RETRY_MAX_MS = 2_000;

export class Listener {
  readonly #db: Database;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #subscriptions = new Map<string, Subscription[]>();
  #client: ListenClient | undefined;
  #connecting: Promise<void> | undefined;
  #retry: TimerHandle | undefined;
  #retryMs = RETRY_MIN_MS;
  #closed = false;
  #connected = false;

  constructor(db: Database, clock: Clock, logger: Logger) {
    this.#db = db;
    this.#clock = clock;
    this.#logger = logger;
  }

  /** Whether LISTEN is in place right now (notifications may arrive). */
  get connected(): boolean {
    return this.#connected;
  }

  /** Subscribes to `channel`; takes effect at the next (re)connect when already connected. */
  subscribe(channel: string, subscription: Subscription): void {
    const list = this.#subscriptions.get(channel) ?? [];
    list.push(subscription);
    this.#subscriptions.set(channel, list);
    if (this.#connected && this.#client !== undefined) {
      this.#client.query(`LISTEN "${channel}"`).then(
        () => subscription.onConnect(),
        (error: unknown) => this.#logger.warn({ err: error, channel }, 'LISTEN failed'),
      );
    }
  }

  /** Connects and LISTENs; resolves once listening, rejects when the first connection fails (later ones retry). */
  start(): Promise<void> {
    this.#connecting ??= this.#connect();
    return this.#connecting;
  }

  async #connect(): Promise<void> {
    const client = this.#db.newClient();
    client.on('notification', (message) => this.#dispatch(message));
    client.on('error', (error: Error) => this.#lost(client, error));
    client.on('end', () => this.#lost(client, undefined));
    await client.connect();
    if (this.#closed) {
      await client.end().catch(() => undefined);
      return;
    }
    for (const channel of this.#subscriptions.keys()) await client.query(`LISTEN "${channel}"`);
    this.#client = client;
    this.#connected = true;
    this.#retryMs = RETRY_MIN_MS;
    for (const list of this.#subscriptions.values()) for (const s of list) this.#safely(() => s.onConnect());
  }

  #dispatch(message: { readonly channel: string; readonly payload?: string | undefined }): void {
    const list = this.#subscriptions.get(message.channel);
    if (list === undefined) return;
    for (const s of list) this.#safely(() => s.onNotify(message.payload ?? ''));
  }

  #lost(client: ListenClient, error: Error | undefined): void {
    // Only the current client's loss counts (once): a failed connect attempt is retried by its own caller.
    if (client !== this.#client) return;
    this.#connected = false;
    this.#client = undefined;
    client.end().catch(() => undefined);
    if (this.#closed) return;
    this.#logger.warn({ err: error }, 'notification connection lost; reconnecting (polling meanwhile)');
    this.#scheduleRetry();
  }

  #scheduleRetry(): void {
    if (this.#closed || this.#retry !== undefined) return;
    const delay = this.#retryMs;
    this.#retryMs = Math.min(RETRY_MAX_MS, this.#retryMs * 2);
    this.#retry = this.#clock.setTimer(() => {
      this.#retry = undefined;
      this.#connect().catch((error: unknown) => {
        this.#logger.debug({ err: error }, 'notification reconnect failed');
        this.#scheduleRetry();
      });
    }, delay, { unref: true });
  }

  #safely(fn: () => void): void {
    try {
      fn();
    } catch (error) {
      this.#logger.error({ err: error }, 'notification subscriber threw');
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#retry !== undefined) this.#clock.clearTimer(this.#retry);
    this.#retry = undefined;
    await this.#connecting?.catch(() => undefined);
    const client = this.#client;
    this.#client = undefined;
    this.#connected = false;
    await client?.end().catch(() => undefined);
  }
}
