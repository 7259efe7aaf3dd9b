#!/usr/bin/env bash
# Runs lapse's benchmarks at full size and prints the figures README.md cites.
#
#   bench/run.sh [BUILD_DIR]        # default: <repo>/build-bench
#
# Configures BUILD_DIR as a Release build if it is not one already, builds the
# two benchmark binaries, then runs engine_bench (full-size variants only; the
# tiny ones are for the bench-smoke ctest) and memory_probe (10M members in 1M
# collections). REPETITIONS (default 3) sets how often each benchmark is repeated
# (mean, median and spread are printed); MEMORY_PROBE_ARGS="--members=..." picks
# another memory_probe shape.
# Everything is single-threaded; run it on an otherwise idle machine.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-${repo}/build-bench}"
jobs="${JOBS:-2}"

build_type="$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "${build}/CMakeCache.txt" 2>/dev/null || true)"
if [[ "${build_type}" != "Release" ]]; then
  cmake -S "${repo}" -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DLAPSE_BUILD_BENCHMARKS=ON
fi
cmake --build "${build}" -j"${jobs}" --target engine_bench memory_probe

echo "== lapse benchmarks: $(git -C "${repo}" describe --always --dirty 2>/dev/null || echo unknown)," \
  "$(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
echo
echo "== engine_bench (single thread; items/s is members, expirations or events per second)"
"${build}/bench/engine/engine_bench" \
  --benchmark_filter='-(members|events):1000/' \
  --benchmark_counters_tabular=true \
  --benchmark_repetitions="${REPETITIONS:-3}" --benchmark_report_aggregates_only=true \
  --benchmark_out="${build}/engine_bench.json" --benchmark_out_format=json
echo "(JSON: ${build}/engine_bench.json. Debian builds libbenchmark without NDEBUG, hence its"
echo " DEBUG warning; that concerns the harness's own checks, not the code measured.)"
echo
echo "== memory_probe"
# shellcheck disable=SC2086  # MEMORY_PROBE_ARGS is a list of flags.
"${build}/bench/engine/memory_probe" ${MEMORY_PROBE_ARGS:-}
