/**
 * A TCP proxy on loopback between one engine process and PostgreSQL, to cut that process off: `hold()` stops every
 * byte both ways on the connections it has (a network partition: nothing is closed, nothing arrives), `release()`
 * lets them flow again, in order.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export class Partition {
  readonly #server: Server;
  readonly #pairs = new Set<[Socket, Socket]>();
  #held = false;
  readonly port: Promise<number>;

  constructor(targetPort: number) {
    this.#server = createServer((client) => {
      const upstream = connect(targetPort, '127.0.0.1');
      const pair: [Socket, Socket] = [client, upstream];
      this.#pairs.add(pair);
      // Forwarding by hand (not pipe()), so that a hold stops it where it is.
      const forward = (from: Socket, to: Socket): void => {
        from.on('data', (chunk: Buffer) => to.write(chunk));
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
