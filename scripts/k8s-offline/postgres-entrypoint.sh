#!/bin/sh
# The offline PostgreSQL stand-in's entrypoint (cluster.sh image): the subset of the official image's
# contract the local overlay uses. On an empty PGDATA: initdb with POSTGRES_USER as superuser and the
# password from POSTGRES_PASSWORD_FILE (or POSTGRES_PASSWORD), create POSTGRES_DB, allow
# scram-sha-256 logins from any address; then run postgres in the foreground. Needs a writable PGDATA,
# /var/run/postgresql and /tmp only.
set -eu
PGDATA="${PGDATA:-/var/lib/postgresql/data}"
USER_NAME="${POSTGRES_USER:-postgres}"
DB_NAME="${POSTGRES_DB:-$USER_NAME}"
export PGDATA

if [ "${1:-postgres}" != postgres ]; then
  exec "$@"
fi
shift || true

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
    password="$(cat "$POSTGRES_PASSWORD_FILE")"
  else
    password="${POSTGRES_PASSWORD:-}"
  fi
  [ -n "$password" ] || { echo "postgres-entrypoint: POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE is required" >&2; exit 1; }
  mkdir -p "$PGDATA"
  chmod 700 "$PGDATA"
  pwfile="$(mktemp)"
  printf '%s\n' "$password" >"$pwfile"
  initdb -D "$PGDATA" -U "$USER_NAME" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --no-locale >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  if [ "$DB_NAME" != postgres ]; then
    psql -v ON_ERROR_STOP=1 -U "$USER_NAME" -d postgres -q -c "CREATE DATABASE \"$DB_NAME\" OWNER \"$USER_NAME\";"
  fi
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  echo "postgres-entrypoint: initialised $PGDATA (database $DB_NAME, user $USER_NAME)"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
