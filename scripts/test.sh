#!/usr/bin/env bash
# Builds everything and runs every test (CTest over GoogleTest).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
ninja -C build -j2
cd build
ctest --output-on-failure -j2
