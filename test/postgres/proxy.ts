/**
 * A TCP proxy on loopback between one engine process and PostgreSQL, to cut that process off: `hold()` stops every
 * byte both ways on the connections it has (a network partition: nothing is closed, nothing arrives), `release()`
 * lets them flow again, in order; `sever()` drops them and refuses new ones until `heal()`; `cutAfterCommit()` lets
 * one COMMIT through and loses its answer.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export class Partition {
  readonly #server: Server;
  readonly #pairs = new Set<[Socket, Socket]>();
  #held = false;
  #severed = false;
  /** Armed by `cutAfterCommit()`: the next COMMIT reaches the server, its answer never reaches the client. */
  #cutAfterCommit: (() => void) | undefined;
  readonly port: Promise<number>;

  constructor(targetPort: number) {
    this.#server = createServer((client) => {
      if (this.#severed) {
        client.destroy();
        return;
      }
      const upstream = connect(targetPort, '127.0.0.1');
      const pair: [Socket, Socket] = [client, upstream];
      this.#pairs.add(pair);
      // Forwarding by hand (not pipe()), so that a hold stops it where it is.
      const forward = (from: Socket, to: Socket): void => {
        from.on('data', (chunk: Buffer) => {
          to.write(chunk);
          // A simple-protocol Query message ('Q', length, text) whose text is COMMIT, on its way to the server.
          if (from === client && this.#cutAfterCommit !== undefined && chunk[0] === 0x51 && chunk.subarray(5).toString('utf8').startsWith('COMMIT')) {
            const done = this.#cutAfterCommit;
            this.#cutAfterCommit = undefined;
            // The server gets the COMMIT and answers into a socket that no longer reaches the client.
            upstream.removeAllListeners('data');
            upstream.on('data', () => undefined);
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

  /** Resolves once a COMMIT went through and its connection was cut before the answer came back. */
  cutAfterCommit(): Promise<void> {
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
