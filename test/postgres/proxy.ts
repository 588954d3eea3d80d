/**
 * A TCP proxy on loopback between one engine process and PostgreSQL, to cut that process off: `hold()` stops every
 * byte both ways on the connections it has (a network partition: nothing is closed, nothing arrives), `release()`
 * lets them flow again, in order; `sever()` drops them and refuses new ones until `heal()`; `cutAfterCommit()` lets
 * one COMMIT through and loses its answer. With `dropNotifications`, every NotificationResponse the server sends
 * is dropped on its way to the client, and everything else passes: a stand-in for a transaction pooler, where
 * LISTEN succeeds and nothing is ever heard.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export class Partition {
  readonly #server: Server;
  readonly #pairs = new Set<[Socket, Socket]>();
  #held = false;
  #severed = false;
  /** Armed by `cutAfterCommit()`: the next COMMIT reaches the server, its answer never reaches the client. */
  #cutAfterCommit: (() => void) | undefined;
  /** With `late`: the COMMIT, held back until another connection asked the server about the state's log or counter. */
  #lateCommit = false;
  #heldCommit: (() => void) | undefined;
  /** Connections refused while severed, and who waits for a count of them (`refusals`). */
  #refused = 0;
  #refusalWaiters: { readonly count: number; readonly resolve: () => void }[] = [];
  readonly port: Promise<number>;

  constructor(targetPort: number, options: { readonly dropNotifications?: boolean } = {}) {
    this.#server = createServer((client) => {
      if (this.#severed) {
        client.destroy();
        this.#refused++;
        this.#refusalWaiters = this.#refusalWaiters.filter((w) => (this.#refused >= w.count ? (w.resolve(), false) : true));
        return;
      }
      const upstream = connect(targetPort, '127.0.0.1');
      const pair: [Socket, Socket] = [client, upstream];
      /** The COMMIT this connection holds back (`late`): only another connection's statement lets it go. */
      let heldHere: (() => void) | undefined;
      this.#pairs.add(pair);
      // Forwarding by hand (not pipe()), so that a hold stops it where it is.
      const withoutNotifications = options.dropNotifications === true ? notificationFilter() : undefined;
      const forward = (from: Socket, to: Socket): void => {
        from.on('data', (received: Buffer) => {
          const chunk = from === upstream && withoutNotifications !== undefined ? withoutNotifications(received) : received;
          if (chunk.length === 0) return;
          // A simple-protocol Query message ('Q', length, text) whose text is COMMIT, on its way to the server.
          const isCommit = from === client && this.#cutAfterCommit !== undefined && chunk[0] === 0x51 && chunk.subarray(5).toString('utf8').startsWith('COMMIT');
          if (isCommit && this.#lateCommit) this.#heldCommit = () => to.write(chunk);
          else to.write(chunk);
          if (from === client && this.#heldCommit !== undefined && this.#heldCommit !== heldHere && /state_(log|counter)/.test(chunk.toString('latin1'))) {
            const late = this.#heldCommit;
            this.#heldCommit = undefined;
            late();
          }
          if (isCommit) {
            heldHere = this.#heldCommit;
            const done = this.#cutAfterCommit!;
            this.#cutAfterCommit = undefined;
            // The server gets the COMMIT and answers into a socket that no longer reaches the client.
            upstream.removeAllListeners('data');
            upstream.on('data', () => undefined);
            // The server's side stays open (a held COMMIT still has to get there): only the client's side is cut.
            client.removeAllListeners('end');
            client.removeAllListeners('close');
            client.destroy();
            done();
          }
        });
        from.on('end', () => to.end());
        from.on('error', () => to.destroy());
        from.on('close', () => {
          to.destroy();
          this.#pairs.delete(pair);
        });
      };
      forward(client, upstream);
      forward(upstream, client);
      if (this.#held) {
        client.pause();
        upstream.pause();
      }
    });
    this.port = new Promise((resolve) => this.#server.listen(0, '127.0.0.1', () => resolve((this.#server.address() as { port: number }).port)));
  }

  /**
   * Resolves once a COMMIT went through and its connection was cut before the answer came back. `late`: the COMMIT
   * reaches the server only right after another connection sent it a statement on the state's log or counter (the
   * check a client makes after the cut, on another connection, then races the COMMIT on the server).
   */
  cutAfterCommit(options: { late?: boolean } = {}): Promise<void> {
    this.#lateCommit = options.late === true;
    return new Promise<void>((resolve) => (this.#cutAfterCommit = resolve));
  }

  /** Drops every connection and refuses new ones until `heal()`: the database is gone for this process. */
  sever(): void {
    this.#severed = true;
    for (const [a, b] of this.#pairs) {
      a.destroy();
      b.destroy();
    }
  }

  heal(): void {
    this.#severed = false;
  }

  /**
   * Resolves once `count` more connections were refused from now on (while severed): the process behind the proxy
   * has tried that many times to reach the database, with whatever it had in hand.
   */
  refusals(count: number): Promise<void> {
    const target = this.#refused + count;
    return new Promise<void>((resolve) => this.#refusalWaiters.push({ count: target, resolve }));
  }

  hold(): void {
    this.#held = true;
    for (const [a, b] of this.#pairs) {
      a.pause();
      b.pause();
    }
  }

  release(): void {
    this.#held = false;
    for (const [a, b] of this.#pairs) {
      a.resume();
      b.resume();
    }
  }

  async close(): Promise<void> {
    for (const [a, b] of this.#pairs) {
      a.destroy();
      b.destroy();
    }
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/**
 * The server's byte stream to a client with its NotificationResponse messages ('A') taken out. Every message the
 * server sends is a type byte and a 4-byte length (counting itself): a message split across chunks waits for its
 * rest, and whole messages go on in order.
 */
function notificationFilter(): (chunk: Buffer) => Buffer {
  let pending: Buffer = Buffer.alloc(0);
  return (chunk) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    const kept: Buffer[] = [];
    let at = 0;
    while (pending.length - at >= 5) {
      const end = at + 1 + pending.readUInt32BE(at + 1);
      if (end > pending.length) break;
      if (pending[at] !== 0x41) kept.push(pending.subarray(at, end));
      at = end;
    }
    pending = pending.subarray(at);
    return Buffer.concat(kept);
  };
}
