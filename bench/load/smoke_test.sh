#!/usr/bin/env bash
# bench-smoke: starts lapsed on 127.0.0.1:0 and runs every lapse-bench
# scenario at a tiny size, so the load generator keeps working.
#
#   smoke_test.sh LAPSED LAPSE_BENCH
set -euo pipefail
# shellcheck source=../common/lapsed.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common/lapsed.sh"

lapsed=$1
bench=$2
lapsed_work

start_lapsed "$work" "$lapsed" --log_level=error --shutdown_grace=500ms
addr="127.0.0.1:$lapsed_port"

"$bench" put --addr="$addr" --members=20000 --batch=100 --concurrency=4
"$bench" put --addr="$addr" --members=2000 --batch=100 --concurrency=4 --per_member_ttl
"$bench" put --addr="$addr" --duration=1s --batch=1 --concurrency=8
"$bench" put --addr="$addr" --members=2000 --batch=1 --concurrency=8 --client_library
"$bench" expiry-latency --addr="$addr" --members=2000 --spread=1s --lead=2s --drain-timeout=3s
"$bench" expiry-latency --addr="$addr" --members=2000 --spread=2s --lead=2s \
  --reconnect-at=500ms --reconnect-pause=300ms --drain-timeout=3s
"$bench" drain --addr="$addr" --members=5000 --lead=2s --drain-timeout=3s
"$bench" mixed --addr="$addr" --rate=500 --duration=2s --ttl=500ms --batch=10 --watchers=2 \
  --drain-timeout=3s
echo "lapse-bench smoke: every scenario ran clean"
