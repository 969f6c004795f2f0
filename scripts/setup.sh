#!/usr/bin/env bash
# Installs what the build needs (Debian packages, only those missing) and configures build/
# (Release, Ninja: the CMake preset `release`). Safe to run again: an existing build/ is kept as
# the build cache. With --fuzz, also installs clang and its libFuzzer runtime for
# scripts/fuzz.sh (libclang-rt-14-dev is only a recommendation of clang-14 on Debian 12, so it
# is named). The sanitizer build (preset `asan`) needs nothing more: g++ brings libasan and
# libubsan.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ libgtest-dev libcli11-dev nlohmann-json3-dev)
for arg in "$@"; do
  case "$arg" in
    --fuzz) packages+=(clang libclang-rt-14-dev) ;;
    *) echo "setup.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi

# A build/ made by another generator cannot be reused by Ninja.
if [ -f build/CMakeCache.txt ] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' build/CMakeCache.txt
then
  rm -rf build
fi
log="$(mktemp)"
cmake --preset release > "$log" 2>&1 || { cat "$log"; exit 1; }
rm -f "$log"
