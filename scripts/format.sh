#!/usr/bin/env bash
# Formats lapse's C++ with clang-format (.clang-format: Google style, 100
# columns) and its Go with gofmt.
#
#   scripts/format.sh           rewrite every tracked C++ and Go file in place
#   scripts/format.sh --check   list the files that differ; exit 1 if any
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

clang_format=${CLANG_FORMAT:-clang-format-14}
command -v "$clang_format" >/dev/null || clang_format=clang-format
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.h' '*.cc' |
  while read -r f; do [ -f "$f" ] && echo "$f"; done)
mapfile -t go_files < <(git ls-files --cached --others --exclude-standard -- '*.go' |
  while read -r f; do [ -f "$f" ] && echo "$f"; done)

if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    "$clang_format" --style=file "$f" | cmp -s - "$f" || bad+=("$f")
  done
  [ "${#go_files[@]}" -eq 0 ] || mapfile -t -O "${#bad[@]}" bad < <(gofmt -l "${go_files[@]}")
  if [ "${#bad[@]}" -gt 0 ]; then
    echo "format.sh: not clang-formatted or gofmt-ed (run scripts/format.sh):" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
  fi
  echo "format.sh: ${#files[@]} files clang-formatted, ${#go_files[@]} gofmt-ed"
else
  "$clang_format" --style=file -i "${files[@]}"
  [ "${#go_files[@]}" -eq 0 ] || gofmt -w "${go_files[@]}"
fi
