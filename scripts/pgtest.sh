#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for ralph's tests (and benchmarks).
#
#   eval "$(scripts/pgtest.sh start)"   # prints export RALPH_TEST_PG=… RALPH_TEST_PG_DIR=…
#   go test ./dag/postgres/ ./cmd/ralph/
#   scripts/pgtest.sh stop              # stops it and removes its directory
#   scripts/pgtest.sh restart           # restarts it (the tests' server-restart fault)
#
# The cluster lives in a temporary directory, listens on 127.0.0.1 at a free
# port and on a unix socket in that directory, and trusts local connections
# but for the role ralph_pw, which needs the password "secret" (the tests'
# refused-password case). Where PgBouncer is installed (Debian's pgbouncer
# package), one runs in front of it in transaction pooling, as managed
# PostgreSQL is often reached, on another free port:
# RALPH_TEST_PGBOUNCER is its URL (any database name of the cluster);
# RALPH_TEST_PGBOUNCER_LAX is a second one, which drops the startup
# parameters it does not know instead of refusing them. PostgreSQL refuses to run as root: as root, the
# server runs as the user postgres (made if missing). Binaries are found on
# PATH or in /usr/lib/postgresql/*/bin (Debian's postgresql package).
set -euo pipefail

bindir() {
  if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1 && [ "$(command -v initdb)" != /usr/local/bin/initdb ]; then
    dirname "$(command -v pg_ctl)"; return
  fi
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  if [ -n "$d" ] && [ -x "$d/pg_ctl" ]; then echo "$d"; return; fi
  echo "pgtest: no PostgreSQL binaries (apt-get install postgresql)" >&2
  exit 1
}

as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

free_port() {
  local p
  for _ in $(seq 1 200); do
    # Below Linux's ephemeral range (32768–60999), where a client's
    # outgoing connection could take the port between this look and the
    # server's bind.
    p=$(( 15000 + RANDOM % 17000 ))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"; return
    fi
  done
  echo "pgtest: no free port" >&2
  exit 1
}

start() {
  local bin dir port
  bin=$(bindir)
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin postgres
  fi
  dir=$(mktemp -d "${TMPDIR:-/tmp}/ralph-pg.XXXXXX")
  chmod 755 "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  cat >"$dir/data/pg_hba.conf" <<HBA
local all ralph_pw               scram-sha-256
host  all ralph_pw 127.0.0.1/32  scram-sha-256
local all all                    trust
host  all all      127.0.0.1/32  trust
HBA
  # The port is free when looked at; another process may still take it
  # before the server binds it (two clusters starting at once): then the
  # server is started again on another.
  cp "$dir/data/postgresql.conf" "$dir/postgresql.conf.orig"
  local tries=0
  while :; do
    port=$(free_port)
    cp "$dir/postgresql.conf.orig" "$dir/data/postgresql.conf"
    cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 200
shared_buffers = 128MB
CONF
    if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start >/dev/null; then
      break
    fi
    tries=$((tries + 1))
    if [ "$tries" -ge 5 ] || ! grep -q "Address already in use" "$dir/server.log"; then
      cat "$dir/server.log" >&2
      exit 1
    fi
  done
  as_owner "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qAt \
    -c "CREATE ROLE ralph_pw LOGIN PASSWORD 'secret' SUPERUSER" >/dev/null
  echo "$bin" >"$dir/bindir"
  echo "export RALPH_TEST_PG='postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable'"
  echo "export RALPH_TEST_PG_DIR='$dir'"
  start_pgbouncer "$dir" "$port" RALPH_TEST_PGBOUNCER ""
  start_pgbouncer "$dir" "$port" RALPH_TEST_PGBOUNCER_LAX \
    "ignore_startup_parameters = search_path, idle_in_transaction_session_timeout"
}

pgbouncer_bin() {
  command -v pgbouncer 2>/dev/null || { [ -x /usr/sbin/pgbouncer ] && echo /usr/sbin/pgbouncer; } || true
}

# start_pgbouncer DIR PORT VAR EXTRA: PgBouncer in transaction pooling in
# front of the cluster, every database name passed through (the tests
# make one each), trusting its users as the cluster does; EXTRA is a line
# more of its settings. It prints VAR's export. RALPH_TEST_PGBOUNCER
# refuses startup parameters it does not know, as PgBouncer does by
# default; RALPH_TEST_PGBOUNCER_LAX drops ralph's.
start_pgbouncer() {
  local dir=$1 port=$2 var=$3 extra=$4 pgb bport tries=0 name
  pgb=$(pgbouncer_bin)
  [ -n "$pgb" ] || return 0
  name=$(echo "$var" | tr 'A-Z' 'a-z')
  printf '"postgres" ""\n"ralph_pw" "secret"\n' >"$dir/userlist.txt"
  while :; do
    bport=$(free_port)
    cat >"$dir/$name.ini" <<INI
[databases]
* = host=127.0.0.1 port=$port
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bport
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
max_client_conn = 2000
default_pool_size = 20
max_db_connections = 60
server_idle_timeout = 10
logfile = $dir/$name.log
pidfile = $dir/$name.pid
$extra
INI
    [ "$(id -u)" = 0 ] && chown postgres "$dir/$name.ini" "$dir/userlist.txt"
    if as_owner "$pgb" -d -q "$dir/$name.ini" 2>>"$dir/$name.err"; then
      # -d returns once it forked; wait until it answers.
      for _ in $(seq 1 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$bport") 2>/dev/null && break
        sleep 0.05
      done
      if (exec 3<>"/dev/tcp/127.0.0.1/$bport") 2>/dev/null; then
        break
      fi
    fi
    tries=$((tries + 1))
    if [ "$tries" -ge 5 ]; then
      cat "$dir/$name.err" "$dir/$name.log" >&2 2>/dev/null
      exit 1
    fi
  done
  echo "export $var='postgres://postgres@127.0.0.1:$bport/postgres?sslmode=disable'"
}

need_dir() {
  if [ -z "${RALPH_TEST_PG_DIR:-}" ] || [ ! -d "$RALPH_TEST_PG_DIR/data" ]; then
    echo "pgtest: RALPH_TEST_PG_DIR names no cluster" >&2
    exit 1
  fi
}

stop() {
  need_dir
  local pid
  for pid in "$RALPH_TEST_PG_DIR"/ralph_test_pgbouncer*.pid; do
    [ -s "$pid" ] && kill "$(cat "$pid")" 2>/dev/null || true
  done
  as_owner "$(cat "$RALPH_TEST_PG_DIR/bindir")/pg_ctl" -D "$RALPH_TEST_PG_DIR/data" -m immediate -w stop >/dev/null || true
  rm -rf "$RALPH_TEST_PG_DIR"
}

restart() {
  need_dir
  as_owner "$(cat "$RALPH_TEST_PG_DIR/bindir")/pg_ctl" -D "$RALPH_TEST_PG_DIR/data" -l "$RALPH_TEST_PG_DIR/server.log" \
    -m "${1:-fast}" -w -t 60 restart >/dev/null
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  restart) shift; restart "$@" ;;
  *) echo "usage: $0 start|stop|restart [fast|immediate]" >&2; exit 2 ;;
esac
