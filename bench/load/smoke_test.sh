#!/usr/bin/env bash
# bench-smoke: starts lapsed on 127.0.0.1:0 and runs every lapse-bench
# scenario at a tiny size, so the load generator keeps working.
#
#   smoke_test.sh LAPSED LAPSE_BENCH
set -euo pipefail

lapsed=$1
bench=$2
work=$(mktemp -d)
pid=
cleanup() {
  if [[ -n "$pid" ]]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$lapsed" --listen=127.0.0.1:0 --log_level=error --shutdown_grace=500ms >"$work/out" &
pid=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's/.*(port \([0-9]*\)).*/\1/p' "$work/out" | head -1)
  [[ -n "$port" ]] && break
  sleep 0.1
done
[[ -n "$port" ]] || { echo "lapsed did not report its port" >&2; exit 1; }
addr="127.0.0.1:$port"

"$bench" put --addr="$addr" --members=20000 --batch=100 --concurrency=4
"$bench" put --addr="$addr" --duration=1s --batch=1 --concurrency=8
"$bench" expiry-latency --addr="$addr" --members=2000 --spread=1s --lead=2s --drain-timeout=3s
"$bench" expiry-latency --addr="$addr" --members=2000 --spread=2s --lead=2s \
  --reconnect-at=500ms --reconnect-pause=300ms --drain-timeout=3s
"$bench" drain --addr="$addr" --members=5000 --lead=2s --drain-timeout=3s
"$bench" mixed --addr="$addr" --rate=500 --duration=2s --ttl=500ms --batch=10 --watchers=2 \
  --drain-timeout=3s
echo "lapse-bench smoke: every scenario ran clean"
