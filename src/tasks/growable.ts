/**
 * Growth of the typed arrays behind the per-task tables. Per-task state lives in typed arrays indexed by a small
 * integer instead of one object per task, because an idle claimed task must cost well under 300 bytes: an object
 * with a boxed epoch-ms double costs ~80 bytes before it holds anything useful, a Float64Array entry costs 8.
 */

/** Capacity for at least `needed` entries: doubling, so appends stay amortized O(1). */
export function nextCapacity(current: number, needed: number): number {
  let capacity = Math.max(current, 16);
  while (capacity < needed) capacity *= 2;
  return capacity;
}

export function growFloat64(array: Float64Array<ArrayBuffer>, needed: number, fill = 0): Float64Array<ArrayBuffer> {
  if (array.length >= needed) return array;
  const next = new Float64Array(nextCapacity(array.length, needed));
  next.set(array);
  if (fill !== 0) next.fill(fill, array.length);
  return next;
}

export function growInt32(array: Int32Array<ArrayBuffer>, needed: number, fill = 0): Int32Array<ArrayBuffer> {
  if (array.length >= needed) return array;
  const next = new Int32Array(nextCapacity(array.length, needed));
  next.set(array);
  if (fill !== 0) next.fill(fill, array.length);
  return next;
}

export function growUint8(array: Uint8Array<ArrayBuffer>, needed: number): Uint8Array<ArrayBuffer> {
  if (array.length >= needed) return array;
  const next = new Uint8Array(nextCapacity(array.length, needed));
  next.set(array);
  return next;
}

