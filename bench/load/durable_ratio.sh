#!/usr/bin/env bash
# Durable single puts against memory-only (issue 13: --fsync=everysec at 0.8x
# memory-only or better), in alternated rounds, so that a machine whose speed
# swings between runs weighs on every build alike. Each round, for each build
# in turn: a fresh memory-only lapsed, then a fresh lapsed on an empty data
# directory with --fsync=POLICY, each sent MEMBERS single puts through the C++
# client library, 16 in flight (lapse-bench put --client_library --batch=1
# --concurrency=16). Prints a line per run (puts/s and lapsed's CPU seconds),
# then per build each round's durable / memory-only and their median.
#
#   durable_ratio.sh [--rounds=N] [--members=M] [--fsync=everysec|always|never] BUILD_DIR...
#
# BUILD_DIR: a build tree holding server/lapsed and bench/load/lapse-bench
# (build-bench, for a Release build); name two to compare builds.
set -euo pipefail
# shellcheck source=../common/lapsed.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common/lapsed.sh"

rounds=8
members=200000
fsync=everysec
builds=()
for arg in "$@"; do
  case "$arg" in
    --rounds=*) rounds=${arg#*=} ;;
    --members=*) members=${arg#*=} ;;
    --fsync=*) fsync=${arg#*=} ;;
    -*)
      echo "durable_ratio.sh: unknown flag $arg" >&2
      exit 2
      ;;
    *) builds+=("$arg") ;;
  esac
done
if [[ ${#builds[@]} -eq 0 ]]; then
  echo "usage: durable_ratio.sh [--rounds=N] [--members=M] [--fsync=POLICY] BUILD_DIR..." >&2
  exit 2
fi
for b in "${builds[@]}"; do
  for f in server/lapsed bench/load/lapse-bench; do
    [[ -x "$b/$f" ]] || { echo "durable_ratio.sh: no $b/$f" >&2; exit 2; }
  done
done

lapsed_work

# run BUILD [lapsed flags...]: one fresh lapsed, one lapse-bench run; sets
# run_rate (puts/s) and run_cpu (lapsed's CPU seconds). In this shell, so that
# the EXIT trap stops the lapsed of a run that fails.
run() {
  local build=$1 out before after
  shift
  start_lapsed "$work" "$build/server/lapsed" --log_level=error --shutdown_grace=1s "$@"
  before=$(awk '{print $14 + $15}' "/proc/$lapsed_pid/stat")
  if ! out=$("$build/bench/load/lapse-bench" put --addr="127.0.0.1:$lapsed_port" --client_library \
    --batch=1 --concurrency=16 --members="$members" 2>&1); then
    echo "$out" >&2
    exit 1
  fi
  after=$(awk '{print $14 + $15}' "/proc/$lapsed_pid/stat")
  kill "$lapsed_pid"
  wait "$lapsed_pid" || true
  lapsed_pid=
  run_rate=$(grep -o 'members_per_s=[0-9]*' <<<"$out" | head -1 | cut -d= -f2)
  if [[ -z "$run_rate" ]]; then
    echo "durable_ratio.sh: no rate in: $out" >&2
    exit 1
  fi
  run_cpu=$(awk -v a="$before" -v b="$after" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.2f", (b - a) / hz }')
}

declare -A ratios
for r in $(seq "$rounds"); do
  for i in "${!builds[@]}"; do
    b=${builds[$i]}
    run "$b"
    mem=$run_rate mem_cpu=$run_cpu
    rm -rf "$work/data"
    mkdir -p "$work/data"
    run "$b" --data_dir="$work/data" --fsync="$fsync"
    dur=$run_rate dur_cpu=$run_cpu
    ratio=$(awk -v d="$dur" -v m="$mem" 'BEGIN { printf "%.2f", d / m }')
    ratios[$i]="${ratios[$i]:-} $ratio"
    echo "round $r build $b: memory-only $mem puts/s (lapsed ${mem_cpu} s)," \
      "$fsync $dur puts/s (lapsed ${dur_cpu} s), ratio $ratio"
  done
done

for i in "${!builds[@]}"; do
  # shellcheck disable=SC2086
  printf '%s\n' ${ratios[$i]} | sort -n | awk -v b="${builds[$i]}" -v f="$fsync" '
    { v[NR] = $1; if ($1 >= 0.8) ok++ }
    END {
      median = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      printf "build %s: %s / memory-only over %d rounds: median %.2f, %.2f-%.2f, %d at 0.8 or more\n",
        b, f, NR, median, v[1], v[NR], ok
    }'
done
