#!/usr/bin/env bash
# Builds the Java client, its tests and the Java example with Debian's
# grpc-java (no Maven): protoc with grpc_java_plugin generates the stubs of
# proto/lapse/v1/lapse.proto into OUT/gen, javac compiles them and
# client/java/src/main into OUT/classes, then the tests (src/test,
# testing/java) and examples/java into OUT/test-classes. Called by
# client/java/CMakeLists.txt; prints the classpath to run them with into
# OUT/classpath.
#
#   bash client/java/build.sh ROOT OUT
set -euo pipefail

root=$1
out=$2
jars=/usr/share/java
classpath=""
for jar in grpc-api grpc-core grpc-context grpc-netty grpc-stub grpc-protobuf grpc-protobuf-lite \
  protobuf guava netty-buffer netty-codec netty-codec-http netty-codec-http2 netty-codec-socks \
  netty-common netty-handler netty-handler-proxy netty-resolver netty-transport \
  netty-transport-native-unix-common perfmark-api gson jsr305 error_prone_annotations \
  geronimo-annotation-1.3-spec proto-google-common-protos junit4 hamcrest-core; do
  [ -f "$jars/$jar.jar" ] || {
    echo "client/java/build.sh: $jars/$jar.jar is missing:" \
      "run scripts/dev.sh test (it installs it)" >&2
    exit 1
  }
  classpath="$classpath:$jars/$jar.jar"
done
classpath=${classpath#:}

rm -rf "$out/gen" "$out/classes" "$out/test-classes"
mkdir -p "$out/gen" "$out/classes" "$out/test-classes"
protoc -I"$root/proto" --java_out="$out/gen" --grpc-java_out="$out/gen" \
  --plugin=protoc-gen-grpc-java=/usr/bin/grpc_java_plugin lapse/v1/lapse.proto
javac -nowarn -encoding UTF-8 --release 17 -cp "$classpath" -d "$out/classes" \
  $(find "$out/gen" -name '*.java' | sort)
javac -Xlint:all -Werror -encoding UTF-8 --release 17 -cp "$classpath:$out/classes" \
  -d "$out/classes" $(find "$root/client/java/src/main" -name '*.java' | sort)
javac -Xlint:all,-try -Werror -encoding UTF-8 --release 17 -cp "$classpath:$out/classes" \
  -d "$out/test-classes" \
  $(find "$root/client/java/src/test" "$root/testing/java" "$root/examples/java" -name '*.java' |
    sort)
echo "$out/classes:$out/test-classes:$classpath" >"$out/classpath"
