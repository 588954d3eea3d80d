/**
 * The SQL names of one backend schema: the quoted schema, its notification channels, and the key space of its job
 * locks. Every SQL text is built from these, never from user input.
 */
export interface SchemaNames {
  /** The schema as given (a validated lowercase identifier). */
  readonly schema: string;
  /** The schema quoted for SQL text. */
  readonly S: string;
  /** The first key of its job locks (`pg_advisory_xact_lock(K, job)`): schemas sharing a database do not collide. */
  readonly K: number;
  /** The key of its migration lock (`pg_advisory_xact_lock(bigint)`, a key space apart from the two-key one). */
  readonly migrationLock: string;
  /** Notification channel names: something became ready; an outcome of an evaluation enqueued here; a commit. */
  readonly channels: { readonly ready: string; readonly outcome: string; readonly state: string };
  channel(name: string): string;
  /**
   * The channel of `name` that process `nodeId` alone listens on: the schema's channel and 48 bits of the process's
   * id (within PostgreSQL's 63 bytes for a 40-character schema name). What comes on it also names the process, which
   * checks it. Offers and outcomes (whose SQL function `outcome_channel` computes the same).
   */
  processChannel(name: 'offer' | 'outcome', nodeId: string): string;
}

/** FNV-1a, 32 bits, as a signed int4 (what `pg_advisory_xact_lock(int, int)` takes). */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash | 0;
}

export function schemaNames(schema: string): SchemaNames {
  const channel = (name: string): string => `${schema}_${name}`;
  return {
    schema,
    S: `"${schema}"`,
    K: fnv1a(`tickpool:jobs:${schema}`),
    migrationLock: `tickpool:migrate:${schema}`,
    channels: { ready: channel('ready'), outcome: channel('outcome'), state: channel('state') },
    channel,
    processChannel: (name, nodeId) => channel(`${name}_${nodeId.replaceAll('-', '').slice(0, 12)}`),
  };
}
