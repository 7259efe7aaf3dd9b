# Sourced by the benchmark scripts (bench/load/smoke_test.sh, bench/compare/run.sh,
# bench/soak/run.sh):
#
#   lapsed_work
#   start_lapsed "$work" LAPSED [lapsed flags...]
#
# lapsed_work makes a temporary directory, $work, and an EXIT trap that stops
# the lapsed start_lapsed started and removes $work (INT and TERM exit 130
# through it); a script with servers of its own (compare/run.sh) keeps its
# own trap instead. start_lapsed starts LAPSED on 127.0.0.1:0 in the background, its output in WORK/lapsed.out
# and WORK/lapsed.err, and sets lapsed_pid and lapsed_port (read from its start
# line, never a probed port); exits 1 with lapsed's errors if it exits first or
# reports no port within 30 s (killing it). LAPSED_PRELOAD, when set, is
# lapsed's LD_PRELOAD.
# Without lapsed_work, stopping it is the caller's (its EXIT trap).
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

lapsed_work() {
  work=$(mktemp -d)
  lapsed_pid=
  trap lapsed_cleanup EXIT
  trap 'exit 130' INT TERM
}

lapsed_cleanup() {
  if [[ -n "${lapsed_pid:-}" ]]; then
    kill "$lapsed_pid" 2>/dev/null || true
    wait "$lapsed_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
