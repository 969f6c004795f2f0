#!/usr/bin/env bash
# Installs the build in BUILD into a temporary prefix and builds and runs the project in
# CONSUMER against it (find_package(flashgen)), with the build's cmake and C++ compiler.
# Usage: consumer_test.sh BUILD CONSUMER CMAKE CXX LIBDIR
set -euo pipefail
build=$1 consumer=$2 cmake=$3 cxx=$4 libdir=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$cmake" --install "$build" --prefix "$work/prefix" > "$work/install.log"
for f in "$libdir"/cmake/flashgen/flashgenConfig.cmake \
         "$libdir"/cmake/flashgen/flashgenConfigVersion.cmake "$libdir"/libflashgen.a \
         include/flashgen/flashgen.h include/flashgen/verify.h bin/flashgen; do
  [ -e "$work/prefix/$f" ] || { echo "not installed: $f"; cat "$work/install.log"; exit 1; }
done
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
"$cmake" -S "$consumer" -B "$work/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; exit 1; }
"$cmake" --build "$work/build" > "$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
"$work/build/consumer"
"$work/prefix/bin/flashgen" --version
