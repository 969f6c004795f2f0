#!/usr/bin/env bash
# Installs the build in BUILD into a temporary prefix and builds and runs the project in
# CONSUMER against it (find_package(flashgen)). Usage: consumer_test.sh BUILD CONSUMER
set -euo pipefail
build=$1 consumer=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
for f in lib/cmake/flashgen/flashgenConfig.cmake lib/cmake/flashgen/flashgenConfigVersion.cmake \
         lib/libflashgen.a include/flashgen/flashgen.h include/flashgen/verify.h bin/flashgen; do
  [ -e "$work/prefix/$f" ] || { echo "not installed: $f"; cat "$work/install.log"; exit 1; }
done
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
cmake -S "$consumer" -B "$work/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
"$work/build/consumer"
"$work/prefix/bin/flashgen" --version
