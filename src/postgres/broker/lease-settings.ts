/**
 * The lease settings a PostgreSQL broker applies: the broker settings' nack timeout, delivery limit and nack delays,
 * with the in-memory broker's defaults, so that both backends time and count deliveries alike.
 */
import type { BrokerSettings } from '../../backend/backend.js';

/** The broker settings with their defaults (the in-memory broker's). */
export interface LeaseSettings {
  readonly nackTimeoutMs: number;
  readonly deliveryLimit: number;
  readonly initialNackDelayMs: number;
  readonly subsequentNackDelayMs: number;
}

export function leaseSettings(s: BrokerSettings): LeaseSettings {
  return {
    nackTimeoutMs: s.nackTimeoutMs ?? 60_000,
    deliveryLimit: s.deliveryLimit ?? 3,
    initialNackDelayMs: s.initialNackDelayMs ?? 1_000,
    subsequentNackDelayMs: s.subsequentNackDelayMs ?? 20_000,
  };
}
