/**
 * Random version-4 UUIDs as flat strings, for the ids `enqueue` gives evaluations that come without one.
 *
 * `crypto.randomUUID()` assembles its answer from about twenty string pieces: V8 keeps that as a tree of string
 * pieces, and the first hash of it (the broker's map of evaluations) flattens it again, which together costs more
 * than the rest of an enqueue. Here the text is written into a byte buffer and read out once, as one flat string,
 * from the same kind of entropy: `randomFillSync`, taken in batches as `randomUUID` caches its own.
 */
import { randomFillSync } from 'node:crypto';

const BATCH = 256;
const entropy = Buffer.allocUnsafe(16 * BATCH);
let taken = entropy.length;
const text = Buffer.allocUnsafe(36);
const HEX = Buffer.from('0123456789abcdef', 'latin1');

/** A random UUID (RFC 9562 version 4), lower-case, `xxxxxxxx-xxxx-4xxx-Nxxx-xxxxxxxxxxxx` with N one of 8, 9, a, b. */
export function randomId(): string {
  if (taken === entropy.length) {
    randomFillSync(entropy);
    taken = 0;
  }
  let at = 0;
  for (let i = 0; i < 16; i++) {
    if (i === 4 || i === 6 || i === 8 || i === 10) text[at++] = 0x2d;
    let byte = entropy[taken + i]!;
    // The version (4) in the high nibble of byte 6, the variant (binary 10) in the top bits of byte 8.
    if (i === 6) byte = (byte & 0x0f) | 0x40;
    else if (i === 8) byte = (byte & 0x3f) | 0x80;
    text[at++] = HEX[byte >> 4]!;
    text[at++] = HEX[byte & 0x0f]!;
  }
  taken += 16;
  return text.toString('latin1', 0, 36);
}
