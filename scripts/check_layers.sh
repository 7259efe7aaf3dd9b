#!/usr/bin/env bash
# Checks that folders keep to their layers: each rule names the includes one
# folder must not have, and every offending line is printed.
#
#   bash scripts/check_layers.sh    exit 0: clean; 1: violations (listed)
#
# server/base <- server/engine <- server/storage <- server/service <- server/
# (with server/metrics, the Prometheus metrics only the wiring uses, and
# server/auth, the auth file's policy: base only, no gRPC, for the service);
# the engine knows nothing of gRPC or the generated protos; client/ and bench/
# are products of their own and do not reach into the server or each other
# (bench/load/client_puts.cc measures the client library through lapse/client.h;
# client/ may use server/base/mutex.h, the header-only lock family that
# ThreadSanitizer can see, server/base/utf8.h, the header-only UTF-8
# decoder, and server/base/wire_format.h, protobuf's wire format by hand);
# test support (testing/, tests/) is included only by tests.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
failed=0

# rule DESCRIPTION FILES INCLUDES [ALLOWED [EXEMPT_FILES]]: every #include in
# a tracked or new C++ file whose path matches the regex FILES (and not
# EXEMPT_FILES), of a path matching INCLUDES and not ALLOWED, is a violation.
sources() {
  git ls-files --cached --others --exclude-standard -- '*.h' '*.cc' |
    grep -E "$1" | { if [[ -n "$2" ]]; then grep -vE "$2" || true; else cat; fi; }
}

rule() {
  local description=$1 files=$2 includes=$3 allowed=${4:-} exempt=${5:-} hits
  hits=$(sources "$files" "$exempt" |
    xargs -r grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<](${includes})" |
    { if [[ -n "$allowed" ]]; then grep -vE "[\"<](${allowed})[\">]" || true; else cat; fi; }) || true
  if [[ -n "$hits" ]]; then
    echo "check_layers: ${description}:"
    echo "$hits" | sed 's/^/  /'
    failed=1
  fi
}

rule "server/base must not include the layers above it" \
  '^server/base/' 'server/(engine|storage|service)/'
rule "server/engine must not include storage, service, gRPC or the protos" \
  '^server/engine/' 'server/(storage|service)/|grpcpp/|grpc/|lapse/v1/'
rule "server/auth must not include the engine, storage, service, gRPC or the protos" \
  '^server/auth/' 'server/(engine|storage|service|metrics)/|grpcpp/|grpc/|lapse/v1/'
rule "server/storage must not include the service or gRPC" \
  '^server/storage/' 'server/service/|grpcpp/|grpc/'
rule "only the wiring (server/metrics, server/) includes prometheus-cpp or server/metrics" \
  '^server/(base|engine|auth|storage|service)/' 'prometheus/|server/metrics/'
rule "only tests include test support (testing/, tests/)" \
  '^(server|client|bench|proto)/' 'testing/|tests/' '' '_test\.cc$'
rule "client/ must not include the server (but server/base/{mutex,utf8,wire_format}.h) or bench/" \
  '^client/' 'server/|bench/' 'server/base/(mutex|utf8|wire_format)\.h'
rule "bench/ must not include the client library (but bench/load/client_puts.cc, which measures it)" \
  '^bench/' 'client/|lapse/client\.h' '' '^bench/load/client_puts\.cc$'

if [[ $failed == 0 ]]; then echo "check_layers: every folder keeps to its layer"; fi
exit "$failed"
