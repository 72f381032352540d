#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests.
#
#   scripts/postgres.sh start [DIR]   start it (if not running) and print its SQLAlchemy URL
#   scripts/postgres.sh stop [DIR]    stop it and delete DIR
#
# DIR (default .pytest_cache/pg) holds the cluster, its log and its unix socket. The server
# listens on 127.0.0.1 on a free port with trust authentication, runs without fsync (test data
# is thrown away) and has an empty database kvchat_test. Only the URL goes to stdout, so
# `URL=$(scripts/postgres.sh start)` works; everything else goes to stderr. Installs PostgreSQL
# with apt-get when its server binaries are not found. As root, the server runs as the user
# postgres (PostgreSQL refuses to run as root).
set -euo pipefail

cmd=${1:-start}
dir=$(realpath -m "${2:-.pytest_cache/pg}")
db=kvchat_test

log() { echo "postgres.sh: $*" >&2; }

find_bindir() {
    local p
    if p=$(command -v pg_ctl) && command -v initdb >/dev/null; then
        dirname "$(readlink -f "$p")"
        return
    fi
    # Debian keeps the server binaries off PATH, one directory per major version.
    p=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    [[ -n $p && -x $p/pg_ctl && -x $p/initdb ]] && echo "$p"
}

install_postgres() {
    if [[ $(id -u) != 0 ]]; then
        log "PostgreSQL server binaries (pg_ctl, initdb) not found; install PostgreSQL"
        exit 1
    fi
    log "PostgreSQL not found: installing it with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >&2
    # No "main" cluster started as a service: this script runs its own.
    apt-get install -y -q --no-install-recommends postgresql-common >&2
    sed -ri 's/^#?\s*create_main_cluster\s*=.*/create_main_cluster = false/' \
        /etc/postgresql-common/createcluster.conf
    apt-get install -y -q --no-install-recommends postgresql >&2
}

if [[ $(id -u) == 0 ]]; then
    run_user=postgres
    as_pg() { (cd / && runuser -u postgres -- "$@"); }
else
    run_user=$(id -un)
    as_pg() { "$@"; }
fi

# As root the data directory must be reachable by the postgres user; if the work tree is not
# (e.g. under a 0700 home directory), use a directory in /tmp named after the requested one.
pick_dir() {
    mkdir -p "$(dirname "$dir")"
    if [[ $run_user == postgres ]] && id -u postgres >/dev/null 2>&1 \
        && ! runuser -u postgres -- test -x "$(dirname "$dir")" 2>/dev/null; then
        dir=/tmp/kvchat-pg-$(echo -n "$dir" | sha1sum | cut -c1-12)
    fi
}

port_of_running() { sed -n 4p "$dir/postmaster.pid"; }  # line 4 of postmaster.pid

# The pid in postmaster.pid is a live (not zombie) postgres process: after a reboot the pid may
# belong to something else, which must not be signalled.
pid_is_live_postgres() {
    local pid
    pid=$(head -n 1 "$dir/postmaster.pid")
    [[ $(ps -o stat=,comm= -p "$pid" 2>/dev/null || true) =~ ^[^Z][^[:space:]]*[[:space:]]+postgres$ ]]
}

url_of_running() { echo "postgresql+psycopg://postgres@127.0.0.1:$(port_of_running)/$db"; }

# Running means accepting connections: a killed server can linger as a zombie process, which
# pg_ctl status still counts as running.
is_running() {
    [[ -f $dir/postmaster.pid ]] && pid_is_live_postgres \
        && (exec 3<>"/dev/tcp/127.0.0.1/$(port_of_running)") 2>/dev/null
}

# A server that is not running properly: stop what is left of it and drop its lock file, which
# would otherwise keep a new server from starting while the old pid still exists.
clear_stale() {
    [[ -f $dir/postmaster.pid ]] || return 0
    if pid_is_live_postgres; then
        as_pg "$bindir/pg_ctl" stop -D "$dir" -m immediate -w -t 30 >&2 || true
    fi
    rm -f "$dir/postmaster.pid"
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

init_cluster() {
    log "initdb $dir"
    rm -rf "$dir"
    mkdir -p "$dir"
    chown "$run_user" "$dir"
    chmod 700 "$dir"
    as_pg "$bindir/initdb" -D "$dir" -U postgres -A trust -E UTF8 --locale=C --no-sync >/dev/null
    local sockets=$dir
    # A unix socket path is limited to ~107 bytes; a deep work tree gets TCP only.
    if (( ${#dir} > 80 )); then sockets=; fi
    cat >>"$dir/postgresql.conf" <<EOF

# scripts/postgres.sh: a throwaway test server
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sockets'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
include_if_exists = 'port.conf'
EOF
    as_pg touch "$dir/port.conf"
    # Create the database in single-user mode: needs no client programs and no running server.
    if ! echo "CREATE DATABASE $db" \
        | as_pg "$bindir/postgres" --single -D "$dir" postgres >/dev/null 2>"$dir/single.log"; then
        cat "$dir/single.log" >&2
        exit 1
    fi
}

start() {
    local tries port
    if [[ -z ${bindir:=$(find_bindir || true)} ]]; then
        install_postgres
        bindir=$(find_bindir) || { log "no pg_ctl/initdb after installing PostgreSQL"; exit 1; }
    fi
    if [[ $run_user == postgres ]] && ! id -u postgres >/dev/null 2>&1; then
        useradd --system --user-group --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin postgres
    fi
    pick_dir
    if is_running; then
        url_of_running
        return
    fi
    # Re-initialise anything half made (killed initdb) or made by another PostgreSQL version.
    if [[ ! -f $dir/PG_VERSION || ! -f $dir/postgresql.conf ]] \
        || [[ $(cat "$dir/PG_VERSION") != $("$bindir/postgres" -V | sed -E 's/^[^0-9]*([0-9]+).*/\1/') ]]; then
        init_cluster
    fi
    clear_stale
    for tries in 1 2 3 4 5; do
        port=$(free_port)
        echo "port = $port" >"$dir/port.conf"
        chown "$run_user" "$dir/port.conf"
        if as_pg "$bindir/pg_ctl" start -D "$dir" -l "$dir/server.log" -w -t 60 >&2; then
            url_of_running
            return
        fi
        log "start on port $port failed (try $tries):"
        tail -n 5 "$dir/server.log" >&2 || true
    done
    exit 1
}

stop() {
    bindir=$(find_bindir || true)
    pick_dir
    if [[ -n $bindir ]] && is_running; then
        as_pg "$bindir/pg_ctl" stop -D "$dir" -m fast -w >&2
    elif [[ -n $bindir ]]; then
        clear_stale
    fi
    rm -rf "$dir"
}

case $cmd in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop [DIR]" >&2; exit 2 ;;
esac
