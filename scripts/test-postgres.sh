#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for the PostgreSQL backend's tests, on 127.0.0.1, in a temporary data directory.
#
#   eval "$(bash scripts/test-postgres.sh start)"   # prints `export TICKPOOL_TEST_DATABASE_URL=… TICKPOOL_TEST_PGDATA=…`
#   bash scripts/test-postgres.sh stop              # stops the cluster named by TICKPOOL_TEST_PGDATA and deletes it
#
# `start` installs Debian's postgresql-15 when its binaries are absent (apt-get, as root), then runs initdb and
# pg_ctl as the `postgres` user when run as root (the server refuses to run as root), on a free port from
# TICKPOOL_PG_PORT (default 55432) upwards, and creates the role and database `tickpool` (password `tickpool`). It
# exits non-zero when any step fails: a run without a database must not pass for one with it. Diagnostics go to
# stderr; stdout carries only the export lines.
set -euo pipefail

PG_VERSION=15
PG_BIN="/usr/lib/postgresql/${PG_VERSION}/bin"

log() { echo "test-postgres: $*" >&2; }

ensure_binaries() {
  if [ -x "${PG_BIN}/pg_ctl" ] && [ -x "${PG_BIN}/initdb" ] && [ -x "${PG_BIN}/postgres" ]; then return 0; fi
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "PostgreSQL ${PG_VERSION} is not installed in ${PG_BIN}, and installing it needs apt-get as root"
    return 1
  fi
  log "installing postgresql-${PG_VERSION} with apt-get"
  # The package's own cluster is not used (nor started: there is no init system here to start it).
  timeout 900 apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq "postgresql-${PG_VERSION}" >&2
  [ -x "${PG_BIN}/pg_ctl" ] || { log "postgresql-${PG_VERSION} installed, but ${PG_BIN}/pg_ctl is missing"; return 1; }
}

# The user the server runs as: root may not, so root hands it to `postgres` (created by the Debian package).
server_user() {
  if [ "$(id -u)" -ne 0 ]; then id -un; return 0; fi
  if ! id postgres >/dev/null 2>&1; then
    log "creating the system user postgres"
    useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres >&2
  fi
  echo postgres
}

as_server_user() {
  local user="$1"; shift
  if [ "$(id -u)" -eq 0 ]; then runuser -u "$user" -- "$@"; else "$@"; fi
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port() {
  local port="${TICKPOOL_PG_PORT:-55432}" last=$(( ${TICKPOOL_PG_PORT:-55432} + 100 ))
  while [ "$port" -le "$last" ]; do
    if ! port_in_use "$port"; then echo "$port"; return 0; fi
    port=$((port + 1))
  done
  log "no free port from ${TICKPOOL_PG_PORT:-55432} to ${last}"
  return 1
}

start() {
  ensure_binaries
  local user port data
  user="$(server_user)"
  port="$(free_port)"
  data="$(mktemp -d "${TMPDIR:-/tmp}/tickpool-pg.XXXXXX")"
  chmod 700 "$data"
  [ "$(id -u)" -eq 0 ] && chown "$user" "$data"
  printf '%s\n' tickpool-admin >"$data.pw"
  [ "$(id -u)" -eq 0 ] && chown "$user" "$data.pw"
  as_server_user "$user" "${PG_BIN}/initdb" -D "$data" -U tickpool_admin --pwfile="$data.pw" \
    --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >&2
  rm -f "$data.pw"
  # Loopback only; the socket lives in the data directory so that nothing else on the machine is touched.
  as_server_user "$user" "${PG_BIN}/pg_ctl" -D "$data" -l "$data/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -c port=${port} -c unix_socket_directories=${data} -c max_connections=200" start >&2 \
    || { log "the server did not start; its log:"; cat "$data/server.log" >&2 || true; return 1; }
  as_server_user "$user" "${PG_BIN}/psql" -h "$data" -p "$port" -U tickpool_admin -d postgres -v ON_ERROR_STOP=1 -q >&2 <<'SQL'
CREATE ROLE tickpool LOGIN PASSWORD 'tickpool';
CREATE DATABASE tickpool OWNER tickpool;
SQL
  local url="postgres://tickpool:tickpool@127.0.0.1:${port}/tickpool"
  # The proof that the role, the password and the database work over TCP, as the tests will connect.
  PGPASSWORD=tickpool "${PG_BIN}/psql" "$url" -v ON_ERROR_STOP=1 -qAtc 'select 1' >/dev/null
  log "PostgreSQL ${PG_VERSION} on 127.0.0.1:${port}, data in ${data}"
  echo "export TICKPOOL_TEST_DATABASE_URL='${url}'"
  echo "export TICKPOOL_TEST_PGDATA='${data}'"
}

stop() {
  local data="${TICKPOOL_TEST_PGDATA:-}"
  [ -n "$data" ] && [ -d "$data" ] || { log "TICKPOOL_TEST_PGDATA names no data directory; nothing to stop"; return 0; }
  local user
  user="$(stat -c %U "$data")"
  as_server_user "$user" "${PG_BIN}/pg_ctl" -D "$data" -m fast -w stop >&2 || true
  rm -rf "$data"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
