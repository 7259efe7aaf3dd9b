# Sourced by the benchmark scripts (bench/load/smoke_test.sh, bench/compare/run.sh,
# bench/soak/run.sh):
#
#   start_lapsed WORK LAPSED [lapsed flags...]
#
# starts LAPSED on 127.0.0.1:0 in the background, its output in WORK/lapsed.out
# and WORK/lapsed.err, and sets lapsed_pid and lapsed_port (read from its start
# line, never a probed port); exits 1 with lapsed's errors if it exits first or
# reports no port within 30 s (killing it). LAPSED_PRELOAD, when set, is
# lapsed's LD_PRELOAD.
# Stopping it is the caller's (its EXIT trap).
start_lapsed() {
  local work=$1 lapsed=$2 i
  shift 2
  : >"$work/lapsed.out"
  LD_PRELOAD="${LAPSED_PRELOAD:-}" "$lapsed" --listen=127.0.0.1:0 "$@" \
    >"$work/lapsed.out" 2>"$work/lapsed.err" &
  lapsed_pid=$!
  lapsed_port=
  for i in $(seq 300); do
    lapsed_port="$(sed -n 's/.*(port \([0-9]*\)).*/\1/p' "$work/lapsed.out" | head -1)"
    [[ -n "$lapsed_port" ]] && return 0
    kill -0 "$lapsed_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "lapsed did not start: $(cat "$work/lapsed.err")" >&2
  kill "$lapsed_pid" 2>/dev/null || true
  exit 1
}
