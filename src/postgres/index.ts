// tickpool/postgres: the PostgreSQL backend. Any number of engine processes sharing one schema share one broker and
// one state store. Users of the in-memory engine never load this entry point (nor `pg`).
export { postgresBackend, type PostgresBackend } from './backend.js';
export type { PostgresBackendOptions } from './options.js';
export { BackendUnavailableError, SchemaVersionError } from '../errors.js';
