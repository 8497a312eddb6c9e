#!/usr/bin/env bash
# etcd.sh starts and stops a throwaway single-member etcd for the cluster
# tests (.ci/run; docs/cluster.md). It never touches a system-wide etcd: the
# member's data lives in DIR, it listens on free loopback ports only, and it
# is gone after stop.
#
#   etcd.sh start DIR   install Debian's etcd-server if missing (apt-get),
#                       start a member in DIR; prints its client endpoint
#                       (http://127.0.0.1:PORT)
#   etcd.sh stop DIR    stop the member in DIR and remove DIR
set -euo pipefail

cmd=${1:-}; dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: etcd.sh start|stop DIR" >&2; exit 2
fi

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

case "$cmd" in
start)
  if ! command -v etcd >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    (apt-get update -qq && apt-get install -y -qq etcd-server >/dev/null) >&2
    command -v etcd >/dev/null 2>&1 || { echo "etcd.sh: etcd-server is not installed and apt-get could not install it" >&2; exit 1; }
  fi
  mkdir -p "$dir"
  client=$(freeport); peer=$(freeport)
  url=http://127.0.0.1:$client
  # Debian's etcd 3.4 refuses to start on arm64 and others without this; it
  # is harmless on amd64.
  ETCD_UNSUPPORTED_ARCH=$(dpkg --print-architecture 2>/dev/null || echo amd64) \
  nohup etcd --name agentd-test --data-dir "$dir/data" \
    --listen-client-urls "$url" --advertise-client-urls "$url" \
    --listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "agentd-test=http://127.0.0.1:$peer" \
    >"$dir/etcd.log" 2>&1 &
  echo $! >"$dir/pid"
  for _ in $(seq 1 600); do
    if curl -fsS "$url/health" 2>/dev/null | grep -q '"health":"true"'; then
      echo "$url"; exit 0
    fi
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      cat "$dir/etcd.log" >&2; exit 1
    fi
    sleep 0.1
  done
  echo "etcd.sh: etcd did not become healthy within 60 s" >&2; cat "$dir/etcd.log" >&2; exit 1
  ;;
stop)
  if [ -f "$dir/pid" ]; then
    pid=$(cat "$dir/pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
  ;;
*)
  echo "usage: etcd.sh start|stop DIR" >&2; exit 2
  ;;
esac
