#!/usr/bin/env bash
# The container image, end to end: scripts/image.sh builds it from the given
# lapsed and lapsectl, umoci unpacks it into a runtime bundle and runc runs it
# the way the Helm chart's pod does (the image's user, read-only root
# filesystem, no capabilities, the data directory a writable mount), on the
# host's network with --listen=127.0.0.1:0. The port comes from lapsed's start
# line; lapsectl, outside the container, must get SERVING from the health
# service and be able to write; SIGTERM must stop lapsed with exit status 0
# within its --shutdown_grace.
#
#   bash tests/packaging/image_test.sh IMAGE_SH LAPSED LAPSECTL
#
# Needs root (runc, and the image's files owned by UID 65532): exits 77, which
# ctest counts as skipped, when not root.
set -euo pipefail

image_sh=$1 lapsed=$2 lapsectl=$3
readonly grace_seconds=5 patience_seconds=60

if [ "$(id -u)" != 0 ]; then
  echo "image_test: skipped: runc and image.sh need root"
  exit 77
fi

work=$(mktemp -d)
id="lapse-image-test-$$"
runc_pid=""
cleanup() {
  if [ -n "$runc_pid" ]; then
    runc kill "$id" KILL 2>/dev/null || true
    wait "$runc_pid" 2>/dev/null || true
  fi
  runc delete --force "$id" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "image_test: FAILED: $*" >&2
  echo "--- lapsed's output:" >&2
  cat "$work/out" "$work/err" >&2 2>/dev/null || true
  exit 1
}

bash "$image_sh" --lapsed="$lapsed" --lapsectl="$lapsectl" --out="$work/image" --tag=test
umoci unpack --image "$work/image/oci:test" "$work/bundle" >/dev/null

uid=$(jq -r '.process.user.uid' "$work/bundle/config.json")
[ "$uid" != 0 ] || fail "the image runs as root"
install -d -m 0700 -o "$uid" -g "$uid" "$work/data"
jq --arg data "$work/data" --arg grace "--shutdown_grace=${grace_seconds}s" '
  .process.terminal = false
  | .process.args += ["--listen=127.0.0.1:0", $grace]
  | .process.capabilities = {bounding: [], effective: [], inheritable: [], permitted: [], ambient: []}
  | .root.readonly = true
  | .linux.namespaces |= map(select(.type != "network"))
  | .mounts |= map(if .destination == "/var/lib/lapse"
                   then {destination: .destination, type: "bind", source: $data, options: ["rbind", "rw"]}
                   else . end)' "$work/bundle/config.json" >"$work/config.json"
mv "$work/config.json" "$work/bundle/config.json"

mkfifo "$work/stdout"
timeout --signal=KILL "$((patience_seconds * 2))" \
  runc run --bundle "$work/bundle" "$id" >"$work/stdout" 2>"$work/err" </dev/null &
runc_pid=$!
exec 3<"$work/stdout"
start_line=""
while IFS= read -r -t "$patience_seconds" -u 3 line; do
  echo "$line" >>"$work/out"
  case "$line" in *"listening on"*) start_line=$line && break ;; esac
done
[ -n "$start_line" ] || fail "no start line: lapsed exited, or ${patience_seconds}s passed"
cat <&3 >>"$work/out" &
echo "image_test: $start_line"
port=$(sed -n 's/.*(port \([0-9]*\)).*/\1/p' <<<"$start_line")
[ -n "$port" ] && [ "$port" != 0 ] || fail "no port in the start line"

ctl() { "$lapsectl" --addr="127.0.0.1:$port" --timeout=10s "$@"; }
health=$(ctl health --json) || fail "lapsectl health: $health"
[[ "$health" == *'"status":"SERVING"'* ]] || fail "lapsectl health: $health"
ctl put image-test member value >/dev/null || fail "a put through the image's lapsed failed"
owner=$(stat -c %u "$work/data/LOCK") || fail "lapsed made no LOCK in its data directory"
[ "$owner" = "$uid" ] || fail "the data directory's files belong to UID $owner, not $uid"

started=$(date +%s%N)
runc kill "$id" TERM
status=0
wait "$runc_pid" || status=$?
runc_pid=""
elapsed_ms=$((($(date +%s%N) - started) / 1000000))
[ "$status" = 0 ] || fail "lapsed exited with status $status after SIGTERM"
[ "$elapsed_ms" -lt "$((grace_seconds * 1000))" ] ||
  fail "lapsed took ${elapsed_ms} ms to stop, more than its ${grace_seconds}s grace"
grep -q "stopped" "$work/err" || fail "lapsed did not log that it stopped"
echo "image_test: health SERVING on port $port as UID $uid; SIGTERM: exit 0 in ${elapsed_ms} ms"
echo "1 passed, 0 failed"
