#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on loopback for the store's tests (used by tests/conftest.py and .ci/run).
#
#   scripts/pg-test-cluster.sh start DIR   initdb into DIR (new or empty), start the server on a free
#                                          127.0.0.1 port, print the SQLAlchemy URL of its `postgres`
#                                          database (superuser, random password) on stdout
#   scripts/pg-test-cluster.sh stop DIR    stop that server and delete DIR
#
# initdb refuses to run as root, so as root the cluster runs as the `postgres` user (the Debian
# `postgresql` package creates it) and DIR is handed to that user. Durability is off (fsync, full page
# writes): the data is thrown away. Exit status 3: no PostgreSQL server binaries are installed.
set -euo pipefail

[ $# -eq 2 ] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
action=$1
dir=$2

bindir=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  echo "no PostgreSQL server under /usr/lib/postgresql/*/bin: scripts/setup.sh installs the postgresql package" >&2
  exit 3
fi

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
  mkdir -p "$dir"
  chmod 700 "$dir"
  if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
  local password port
  password=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
  printf '%s\n' "$password" | as_owner sh -c 'umask 077 && cat > "$1"' _ "$dir/pwfile"
  if ! as_owner "$bindir/initdb" -D "$dir/data" -U postgres --pwfile="$dir/pwfile" --auth=scram-sha-256 \
    -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log" >&2
    exit 1
  fi
  # A random port can be taken between choosing and binding it: try a few.
  for _ in 1 2 3 4 5; do
    port=$(shuf -i 20000-59999 -n 1)
    if as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -s start -o \
      "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c full_page_writes=off -c synchronous_commit=off" \
      >/dev/null; then
      echo "postgresql+psycopg://postgres:${password}@127.0.0.1:${port}/postgres"
      return 0
    fi
  done
  cat "$dir/server.log" >&2
  exit 1
}

stop() {
  if [ -f "$dir/data/postmaster.pid" ]; then
    as_owner "$bindir/pg_ctl" -D "$dir/data" -w -s -m immediate stop || true
  fi
  rm -rf "$dir"
}

case $action in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
