#!/usr/bin/env bash
# bench-smoke: starts lapsed on 127.0.0.1:0 and runs every lapse-bench
# scenario at a tiny size, so the load generator keeps working; then two of
# them again against a lapsed that requires mTLS (certificates from openssl),
# and mixed once more against a lapsed with --auth_file, with --token_file.
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
"$bench" group --addr="$addr" --members=2000 --spread=0s --consumers=3 --lead=2s --drain-timeout=3s
"$bench" group --addr="$addr" --members=1000 --spread=0s --consumers=2 --kill-consumer \
  --visibility-timeout=300ms --lead=2s --drain-timeout=3s

# Over mTLS, with a self-signed certificate as server, client and CA.
kill "$lapsed_pid" && wait "$lapsed_pid" || true
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=localhost \
  -addext subjectAltName=DNS:localhost -keyout "$work/tls.key" -out "$work/tls.crt" 2>/dev/null
start_lapsed "$work" "$lapsed" --log_level=error --shutdown_grace=500ms \
  --tls_cert="$work/tls.crt" --tls_key="$work/tls.key" --tls_client_ca="$work/tls.crt"
tls=(--addr="127.0.0.1:$lapsed_port" --tls_ca="$work/tls.crt" --tls_cert="$work/tls.crt"
  --tls_key="$work/tls.key" --tls_server_name=localhost)
"$bench" put "${tls[@]}" --members=2000 --batch=100 --concurrency=4
"$bench" drain "${tls[@]}" --members=500 --lead=1s --drain-timeout=3s

# Against a lapsed with --auth_file: every call and watch carries the token.
kill "$lapsed_pid"
wait "$lapsed_pid" || true
printf %s bench-token >"$work/token"
printf 'token:sha256:%s read,write,watch lb\n' "$(printf %s bench-token | sha256sum | cut -d' ' -f1)" \
  >"$work/auth"
chmod 600 "$work/auth" "$work/token"
start_lapsed "$work" "$lapsed" --log_level=error --shutdown_grace=500ms --auth_file="$work/auth"
addr="127.0.0.1:$lapsed_port"
"$bench" mixed --addr="$addr" --token_file="$work/token" --rate=200 --duration=1s --ttl=300ms \
  --batch=10 --watchers=1 --drain-timeout=3s
echo "lapse-bench smoke: every scenario ran clean"
