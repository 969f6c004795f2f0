#!/bin/sh
# Builds and runs the CPU benchmark against a flashgen build folder (default build/).
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build}
ninja -C "$build" flashgen_lib
c++ -std=c++20 -O2 -fopenmp -I "$root/include" -I "$root/src" "$here/bench_cpu.cpp" \
  "$build/libflashgen.a" -ldl -o "$build/bench_cpu"
"$build/bench_cpu"
