#!/usr/bin/env bash
# pg.sh starts and stops a throwaway PostgreSQL cluster for the tests
# (.ci/run; docs/cluster.md). It never touches a system-wide cluster: the
# cluster lives in DIR, listens on a free loopback port only, trusts local
# connections, and is gone after stop.
#
#   pg.sh start DIR   install postgresql if missing (apt-get), initdb in DIR,
#                     start it; prints the DSN (postgres://agentd@127.0.0.1:PORT/agentd)
#   pg.sh stop DIR    stop the cluster in DIR and remove DIR
set -euo pipefail

cmd=${1:-}; dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: pg.sh start|stop DIR" >&2; exit 2
fi

bindir() {
  local b
  b=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$b" ] && [ -x "$b/initdb" ] && echo "$b"
}

# as runs a server command as the cluster's owner: initdb and postgres
# refuse to run as root, so root hands them to the postgres user.
as() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
start)
  if ! bin=$(bindir); then
    export DEBIAN_FRONTEND=noninteractive
    (apt-get update -qq && apt-get install -y -qq postgresql >/dev/null) >&2
    bin=$(bindir) || { echo "pg.sh: postgresql is not installed and apt-get could not install it" >&2; exit 1; }
  fi
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  as "$bin/initdb" -D "$dir/data" -U agentd --auth=trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # Sockets go in DIR, not /var/run/postgresql, so nothing system-wide is used.
  as "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 120 \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c max_connections=200" start >&2 \
    || { cat "$dir/server.log" >&2; exit 1; }
  as "$bin/createdb" -h 127.0.0.1 -p "$port" -U agentd agentd >&2
  echo "postgres://agentd@127.0.0.1:$port/agentd?sslmode=disable"
  ;;
stop)
  if [ -d "$dir/data" ] && bin=$(bindir); then
    as "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2 || true
  fi
  rm -rf "$dir"
  ;;
*)
  echo "usage: pg.sh start|stop DIR" >&2; exit 2
  ;;
esac
