/** Waits, without blocking the event loop, until `cells[cell]` holds `value` (written by another thread). */
export async function waitCell(cells: Int32Array, cell: number, value: number): Promise<void> {
  for (;;) {
    const seen = Atomics.load(cells, cell);
    if (seen === value) return;
    const wait = Atomics.waitAsync(cells, cell, seen);
    if (wait.async) await wait.value;
  }
}
