/**
 * A persistent (immutable) map from string keys to values: a hash array mapped trie, 32-way, 5 hash bits per level.
 *
 * Why not copy-on-write of a `Map`: the store hands out a snapshot for every evaluation and the applier writes after
 * almost every snapshot, so "clone the table on the first write after a snapshot" costs O(table size) per plan.
 * Here a snapshot is just a reference to a root (O(1)) and a write copies one path of at most 7 small nodes
 * (O(log32 n)); `bench/state.bench.ts` measures the difference.
 *
 * Transients: a write may pass an `EditToken`. Nodes created under a token are owned by it and later writes under
 * the same token change them in place instead of copying again, so a transaction of k writes does not copy the
 * same path k times. A token must be dropped once its version is published: from then on nodes carrying it are
 * shared by readers and are never changed again, because no later write uses that token.
 */

/** Identity token of one batch of writes (a transaction). Compare by reference only. */
export type EditToken = { readonly __edit: true };

export function newEditToken(): EditToken {
  return { __edit: true };
}

const BITS = 5;
const MASK = (1 << BITS) - 1;

/** FNV-1a over UTF-16 code units. Keys are short ids, so hashing costs a few ns per character. */
export function hashKey(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

function popcount(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  x = (x + (x >>> 4)) & 0x0f0f0f0f;
  return Math.imul(x, 0x01010101) >>> 24;
}

class Leaf<V> {
  constructor(
    readonly hash: number,
    readonly key: string,
    readonly value: V,
  ) {}
}

/** Keys whose full 32-bit hashes are equal. Holds at least two leaves. */
class Collision<V> {
  constructor(
    readonly hash: number,
    public leaves: Leaf<V>[],
    readonly edit: EditToken | undefined,
  ) {}
}

/** `children[i]` belongs to the i-th set bit of `bitmap`. A branch holds at least one child. */
class Branch<V> {
  constructor(
    public bitmap: number,
    public children: TrieNode<V>[],
    readonly edit: EditToken | undefined,
  ) {}
}

type TrieNode<V> = Leaf<V> | Collision<V> | Branch<V>;

/**
 * Out-parameter of the recursive writers: did the size change? Writers are synchronous and never re-entered, so a
 * module-level cell is safe and spares an allocation per write.
 */
let sizeDelta = 0;

function lookup<V>(node: TrieNode<V> | undefined, hash: number, key: string): V | undefined {
  let shift = 0;
  while (node !== undefined) {
    if (node instanceof Branch) {
      const bit = 1 << ((hash >>> shift) & MASK);
      if ((node.bitmap & bit) === 0) return undefined;
      node = node.children[popcount(node.bitmap & (bit - 1))];
      shift += BITS;
    } else if (node instanceof Leaf) {
      return node.key === key ? node.value : undefined;
    } else {
      if (node.hash !== hash) return undefined;
      for (const leaf of node.leaves) if (leaf.key === key) return leaf.value;
      return undefined;
    }
  }
  return undefined;
}

/** A branch (at `shift`) holding two nodes with different hashes. */
function join<V>(shift: number, a: TrieNode<V>, aHash: number, b: TrieNode<V>, bHash: number, edit: EditToken | undefined): Branch<V> {
  const aSlot = (aHash >>> shift) & MASK;
  const bSlot = (bHash >>> shift) & MASK;
  if (aSlot === bSlot) return new Branch(1 << aSlot, [join(shift + BITS, a, aHash, b, bHash, edit)], edit);
  // Compare slots, not bits: 1 << 31 is negative.
  return new Branch((1 << aSlot) | (1 << bSlot), aSlot < bSlot ? [a, b] : [b, a], edit);
}

function insert<V>(node: TrieNode<V> | undefined, shift: number, leaf: Leaf<V>, edit: EditToken | undefined): TrieNode<V> {
  if (node === undefined) {
    sizeDelta = 1;
    return leaf;
  }
  if (node instanceof Branch) {
    const bit = 1 << ((leaf.hash >>> shift) & MASK);
    const at = popcount(node.bitmap & (bit - 1));
    if ((node.bitmap & bit) === 0) {
      sizeDelta = 1;
      if (edit !== undefined && node.edit === edit) {
        node.children.splice(at, 0, leaf);
        node.bitmap |= bit;
        return node;
      }
      const children = node.children.slice();
      children.splice(at, 0, leaf);
      return new Branch(node.bitmap | bit, children, edit);
    }
    const child = node.children[at]!;
    const next = insert(child, shift + BITS, leaf, edit);
    if (next === child) return node;
    if (edit !== undefined && node.edit === edit) {
      node.children[at] = next;
      return node;
    }
    const children = node.children.slice();
    children[at] = next;
    return new Branch(node.bitmap, children, edit);
  }
  if (node instanceof Leaf) {
    if (node.key === leaf.key) {
      sizeDelta = 0;
      return leaf;
    }
    sizeDelta = 1;
    if (node.hash === leaf.hash) return new Collision(leaf.hash, [node, leaf], edit);
    return join(shift, node, node.hash, leaf, leaf.hash, edit);
  }
  // Collision
  if (node.hash !== leaf.hash) {
    sizeDelta = 1;
    return join(shift, node, node.hash, leaf, leaf.hash, edit);
  }
  const at = node.leaves.findIndex((l) => l.key === leaf.key);
  sizeDelta = at < 0 ? 1 : 0;
  const owned = edit !== undefined && node.edit === edit;
  const leaves = owned ? node.leaves : node.leaves.slice();
  if (at < 0) leaves.push(leaf);
  else leaves[at] = leaf;
  return owned ? node : new Collision(node.hash, leaves, edit);
}

/** Returns the node without `key`: the same node when absent, `undefined` when nothing is left. */
function remove<V>(node: TrieNode<V> | undefined, shift: number, hash: number, key: string, edit: EditToken | undefined): TrieNode<V> | undefined {
  if (node === undefined) return undefined;
  if (node instanceof Leaf) {
    if (node.key !== key) return node;
    sizeDelta = -1;
    return undefined;
  }
  if (node instanceof Collision) {
    if (node.hash !== hash) return node;
    const at = node.leaves.findIndex((l) => l.key === key);
    if (at < 0) return node;
    sizeDelta = -1;
    if (node.leaves.length === 2) return node.leaves[1 - at];
    const owned = edit !== undefined && node.edit === edit;
    const leaves = owned ? node.leaves : node.leaves.slice();
    leaves.splice(at, 1);
    return owned ? node : new Collision(node.hash, leaves, edit);
  }
  const bit = 1 << ((hash >>> shift) & MASK);
  if ((node.bitmap & bit) === 0) return node;
  const at = popcount(node.bitmap & (bit - 1));
  const child = node.children[at]!;
  const next = remove(child, shift + BITS, hash, key, edit);
  if (next === child) return node;
  const owned = edit !== undefined && node.edit === edit;
  if (next === undefined) {
    if (node.children.length === 1) return undefined;
    // A branch left with one leaf or collision collapses into it: such nodes may sit at any depth of their hash path.
    if (node.children.length === 2) {
      const other = node.children[1 - at]!;
      if (!(other instanceof Branch)) return other;
    }
    const children = owned ? node.children : node.children.slice();
    children.splice(at, 1);
    if (owned) {
      node.bitmap &= ~bit;
      return node;
    }
    return new Branch(node.bitmap & ~bit, children, edit);
  }
  if (node.children.length === 1 && !(next instanceof Branch)) return next;
  if (owned) {
    node.children[at] = next;
    return node;
  }
  const children = node.children.slice();
  children[at] = next;
  return new Branch(node.bitmap, children, edit);
}

function* walk<V>(root: TrieNode<V> | undefined): Generator<V, void, undefined> {
  if (root === undefined) return;
  // An explicit stack instead of nested generators: one generator frame per iteration, not one per level.
  const stack: TrieNode<V>[] = [root];
  for (;;) {
    const node = stack.pop();
    if (node === undefined) return;
    if (node instanceof Leaf) yield node.value;
    else if (node instanceof Collision) for (const leaf of node.leaves) yield leaf.value;
    else for (let i = node.children.length - 1; i >= 0; i--) stack.push(node.children[i]!);
  }
}

/** An immutable map. `set` and `delete` return a new map and leave this one unchanged (see EditToken for the exception). */
export class HashTrie<V> {
  static readonly #empty = new HashTrie<never>(undefined, 0);

  readonly #root: TrieNode<V> | undefined;
  readonly size: number;

  private constructor(root: TrieNode<V> | undefined, size: number) {
    this.#root = root;
    this.size = size;
  }

  static empty<V>(): HashTrie<V> {
    return HashTrie.#empty as HashTrie<V>;
  }

  get(key: string): V | undefined {
    return lookup(this.#root, hashKey(key), key);
  }

  has(key: string): boolean {
    return this.get(key) !== undefined;
  }

  /** `value` must not be `undefined` (absence and an undefined value would be indistinguishable). */
  set(key: string, value: V, edit?: EditToken): HashTrie<V> {
    sizeDelta = 0;
    const root = insert(this.#root, 0, new Leaf(hashKey(key), key, value), edit);
    return new HashTrie(root, this.size + sizeDelta);
  }

  delete(key: string, edit?: EditToken): HashTrie<V> {
    sizeDelta = 0;
    const root = remove(this.#root, 0, hashKey(key), key, edit);
    if (root === this.#root && sizeDelta === 0) return this;
    return new HashTrie(root, this.size + sizeDelta);
  }

  values(): IterableIterator<V> {
    return walk(this.#root);
  }
}
