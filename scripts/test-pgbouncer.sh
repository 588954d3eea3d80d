#!/usr/bin/env bash
# A throwaway PgBouncer in transaction pooling in front of the test PostgreSQL, on 127.0.0.1: the PostgreSQL backend's
# tests check against it what the README says works behind a transaction pooler (everything but LISTEN).
#
#   eval "$(bash scripts/test-pgbouncer.sh start)"   # needs TICKPOOL_TEST_DATABASE_URL; prints
#                                                    # `export TICKPOOL_TEST_PGBOUNCER_URL=… TICKPOOL_TEST_PGBOUNCER_DIR=…`
#   bash scripts/test-pgbouncer.sh stop              # stops the one named by TICKPOOL_TEST_PGBOUNCER_DIR, deletes it
#
# `start` installs Debian's pgbouncer when it is absent (apt-get, as root), and runs it as the `postgres` user when run
# as root (PgBouncer refuses to run as root), on a free port from TICKPOOL_PGBOUNCER_PORT (default 56432) upwards,
# with the test database's role and password. It exits non-zero when any step fails. Diagnostics go to stderr;
# stdout carries only the export lines.
set -euo pipefail

PGBOUNCER=/usr/sbin/pgbouncer

log() { echo "test-pgbouncer: $*" >&2; }

ensure_binary() {
  if [ -x "$PGBOUNCER" ]; then return 0; fi
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    log "pgbouncer is not installed at ${PGBOUNCER}, and installing it needs apt-get as root"
    return 1
  fi
  log "installing pgbouncer with apt-get"
  timeout 900 apt-get update -qq >&2
  # The package's own service is not used (nor started: there is no init system here to start it).
  DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y -qq pgbouncer >&2
  [ -x "$PGBOUNCER" ] || { log "pgbouncer installed, but ${PGBOUNCER} is missing"; return 1; }
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port() {
  local port="${TICKPOOL_PGBOUNCER_PORT:-56432}" last=$(( ${TICKPOOL_PGBOUNCER_PORT:-56432} + 100 ))
  while [ "$port" -le "$last" ]; do
    if ! port_in_use "$port"; then echo "$port"; return 0; fi
    port=$((port + 1))
  done
  log "no free port from ${TICKPOOL_PGBOUNCER_PORT:-56432} to ${last}"
  return 1
}

start() {
  local url="${TICKPOOL_TEST_DATABASE_URL:-}"
  [ -n "$url" ] || { log "TICKPOOL_TEST_DATABASE_URL is not set: start the test PostgreSQL first (scripts/test-postgres.sh)"; return 1; }
  ensure_binary
  local user host port db password dir listen
  # The parts of the database's URL, one a line (user, password, host, port, database).
  mapfile -t parts < <(node -e 'const u = new URL(process.argv[1]); for (const p of [u.username, u.password, u.hostname, u.port || "5432", u.pathname.slice(1)]) console.log(decodeURIComponent(p))' "$url")
  user="${parts[0]}"; password="${parts[1]}"; host="${parts[2]}"; port="${parts[3]}"; db="${parts[4]}"
  listen="$(free_port)"
  dir="$(mktemp -d "${TMPDIR:-/tmp}/tickpool-pgbouncer.XXXXXX")"
  cat >"$dir/pgbouncer.ini" <<INI
[databases]
${db} = host=${host} port=${port} dbname=${db}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${listen}
unix_socket_dir =
auth_type = scram-sha-256
auth_file = ${dir}/userlist.txt
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 40
logfile = ${dir}/pgbouncer.log
pidfile = ${dir}/pgbouncer.pid
ignore_startup_parameters = extra_float_digits,application_name
INI
  printf '"%s" "%s"\n' "$user" "$password" >"$dir/userlist.txt"
  chmod 700 "$dir"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres >&2
    chown -R postgres "$dir"
    runuser -u postgres -- "$PGBOUNCER" -d "$dir/pgbouncer.ini" >&2
  else
    "$PGBOUNCER" -d "$dir/pgbouncer.ini" >&2
  fi
  local pooled="postgres://${user}:${password}@127.0.0.1:${listen}/${db}"
  # The proof that a login and a statement go through, as the tests will send them.
  local tries=0
  until node -e 'const pg = require(process.argv[2]); const c = new pg.Client(process.argv[1]); c.connect().then(() => c.query("select 1")).then(() => c.end()).then(() => process.exit(0), () => process.exit(1))' "$pooled" "$(pwd)/node_modules/pg" 2>/dev/null; do
    tries=$((tries + 1))
    if [ "$tries" -ge 50 ]; then log "PgBouncer does not answer; its log:"; cat "$dir/pgbouncer.log" >&2 || true; return 1; fi
    sleep 0.2
  done
  log "PgBouncer (transaction pooling) on 127.0.0.1:${listen} in front of ${host}:${port}, files in ${dir}"
  echo "export TICKPOOL_TEST_PGBOUNCER_URL='${pooled}'"
  echo "export TICKPOOL_TEST_PGBOUNCER_DIR='${dir}'"
}

stop() {
  local dir="${TICKPOOL_TEST_PGBOUNCER_DIR:-}"
  [ -n "$dir" ] && [ -d "$dir" ] || { log "TICKPOOL_TEST_PGBOUNCER_DIR names no directory; nothing to stop"; return 0; }
  if [ -f "$dir/pgbouncer.pid" ]; then kill "$(cat "$dir/pgbouncer.pid")" 2>/dev/null || true; fi
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
