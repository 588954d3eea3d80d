// The public API of tickpool: named re-exports only.
export { ManualClock, systemClock, sleep, type Clock, type TimerHandle } from './clock.js';
export { Backoff, backoffDefaults, type BackoffOptions, type BackoffJitter } from './backoff.js';
export * from './errors.js';
export { TypedEmitter } from './events.js';
export { createDefaultLogger, type Logger } from './observability/logger.js';
export { Registry } from './observability/metrics.js';
