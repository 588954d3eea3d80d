/**
 * One live line at the bottom of a terminal, rewritten in place, that log lines scroll above. When the stream is
 * not a terminal nothing is drawn: log lines pass through unchanged.
 */
export class StatusLine {
  readonly #out: NodeJS.WritableStream;
  readonly #live: boolean;
  #text = '';

  constructor(out: NodeJS.WritableStream, live: boolean) {
    this.#out = out;
    this.#live = live;
  }

  get live(): boolean {
    return this.#live;
  }

  /** Replaces the live line. */
  set(text: string): void {
    if (!this.#live) return;
    this.#text = text;
    this.#out.write(`\r\x1b[2K${text}`);
  }

  /** Writes `chunk` (whole lines) above the live line. The logger writes through this. */
  write(chunk: string): boolean {
    if (!this.#live || this.#text === '') return this.#out.write(chunk);
    this.#out.write('\r\x1b[2K');
    this.#out.write(chunk);
    return this.#out.write(this.#text);
  }

  /** Leaves the last text as a finished line. */
  end(): void {
    if (this.#live && this.#text !== '') this.#out.write('\n');
    this.#text = '';
  }
}
