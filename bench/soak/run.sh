#!/usr/bin/env bash
# The soak benchmarks (not tests): each starts its own lapsed on 127.0.0.1:0
# and drives it, printing lapsed's resident set size.
#
#   bench/soak/run.sh soak  [lapse-soak flags]         # --duration=30m by default
#   bench/soak/run.sh burst [lapse-watch-burst flags]  # 3000 streams, one 1000-event batch each
#
# soak: writers put/get/remove members with TTLs, watchers connect, read and
# disconnect, some never read; RSS every --report_every and a verdict (flat or
# growing, exit status 0 or 1). burst: RSS before, with the streams open, once
# every stream has its batch, after they closed and --settle later.
# BUILD_DIR (default <repo>/build-bench, configured as a Release build if it
# does not exist) holds the binaries; LAPSED=path runs another lapsed (e.g. an older build to compare
# with); LAPSED_FLAGS adds flags to lapsed.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=../common/lapsed.sh
source "${repo}/bench/common/lapsed.sh"
build="${BUILD_DIR:-${repo}/build-bench}"
mode="${1:-}"
case "${mode}" in
  soak) tool=lapse-soak ;;
  burst) tool=lapse-watch-burst ;;
  *) echo "usage: $0 soak|burst [flags for the tool]" >&2; exit 2 ;;
esac
shift

if [[ ! -f "${build}/CMakeCache.txt" ]]; then
  cmake -S "${repo}" -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLAPSE_BUILD_BENCHMARKS=ON
fi
cmake --build "${build}" -j"${JOBS:-2}" --target lapsed "${tool}"
lapsed="${LAPSED:-${build}/server/lapsed}"

lapsed_work

# shellcheck disable=SC2086  # LAPSED_FLAGS is a list of flags.
start_lapsed "$work" "$lapsed" --log_level=warning ${LAPSED_FLAGS:-}
pid=$lapsed_pid
port=$lapsed_port

echo "== ${tool} against ${lapsed} (pid ${pid}, port ${port}), $(nproc) cores"
status=0
"${build}/bench/soak/${tool}" --addr="127.0.0.1:${port}" --pid="${pid}" "$@" || status=$?
if [[ -s "$work/lapsed.err" ]]; then
  echo "== lapsed's warnings (last 5 of $(wc -l <"$work/lapsed.err"))"
  tail -5 "$work/lapsed.err"
fi
exit "${status}"
