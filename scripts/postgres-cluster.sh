#!/usr/bin/env bash
# A throw-away PostgreSQL cluster for the tests: initdb into a new temporary directory, start it on a
# free loopback port, and print the URL to export as LINKRELAY_TEST_POSTGRES_URL.
#
#   eval "$(scripts/postgres-cluster.sh start)"   # sets LINKRELAY_TEST_POSTGRES_URL and LINKRELAY_TEST_POSTGRES_DIR
#   swift test
#   scripts/postgres-cluster.sh stop "$LINKRELAY_TEST_POSTGRES_DIR"
#
# `down DIR` and `up DIR` stop and start the server again on the same port and data (a restart).
#
# Needs Debian's postgresql package (`apt-get install postgresql`). As root, the cluster runs as the
# `postgres` user, because PostgreSQL refuses to run as root.
set -euo pipefail

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bin" ] || { echo "PostgreSQL is not installed: apt-get install postgresql" >&2; exit 1; }

as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "${1:-}" in
start)
    dir=$(mktemp -d /tmp/linkrelay-pg.XXXXXX)
    chmod 755 "$dir"
    [ "$(id -u)" = 0 ] && chown postgres "$dir"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    as_owner "$bin/initdb" -D "$dir/data" -U linkrelay --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1
    echo "$port" >"$dir/port"
    "$0" up "$dir"
    echo "export LINKRELAY_TEST_POSTGRES_URL=postgres://linkrelay@127.0.0.1:$port/postgres?sslmode=disable"
    echo "export LINKRELAY_TEST_POSTGRES_DIR=$dir"
    ;;
up)
    dir=${2:?usage: postgres-cluster.sh up DIR}
    # Enough connections for several relays under test, each with its pool and its listener.
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
        -o "-k $dir -h 127.0.0.1 -p $(cat "$dir/port") -c max_connections=300 -c fsync=off" start >/dev/null
    ;;
down)
    dir=${2:?usage: postgres-cluster.sh down DIR}
    as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    ;;
stop)
    dir=${2:?usage: postgres-cluster.sh stop DIR}
    as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
*)
    echo "usage: postgres-cluster.sh start | up DIR | down DIR | stop DIR" >&2
    exit 2
    ;;
esac
