#!/usr/bin/env bash
# Builds everything and runs every test (CTest over GoogleTest), three times over:
#   release  build/ (preset release): the suite.
#   asan     build-asan/ (preset asan): the same suite, library, CLI and tests built with
#            AddressSanitizer and UndefinedBehaviorSanitizer (-O1 -g); any report fails the test
#            that triggered it.
#   fuzz     scripts/fuzz.sh: the libFuzzer targets of fuzz/, a fixed seed, a bounded time.
#   python   scripts/python_env.sh (.venv with torch and transformers from PyPI, flashgen
#            installed by `pip install .`), then pytest over python/tests/ (GPU tests skip
#            without a GPU).
# `scripts/test.sh asan` (or any subset of the stage names) runs only those stages.
set -euo pipefail
cd "$(dirname "$0")/.."

stages=("$@")
((${#stages[@]})) || stages=(release python asan fuzz)
for s in "${stages[@]}"; do
  case "$s" in
    release|python|asan|fuzz) ;;
    *) echo "test.sh: unknown stage '$s' (release, python, asan, fuzz)" >&2; exit 2 ;;
  esac
done
wants() { [[ " ${stages[*]} " == *" $1 "* ]]; }

setup_args=()
if wants fuzz; then setup_args+=(--fuzz); fi
./scripts/setup.sh "${setup_args[@]}"

stage() { echo; echo "== test.sh: $1 ($(date +%T))"; }

if wants release; then
  stage release
  ninja -C build -j2
  (cd build && ctest --output-on-failure -j2)
fi

if wants python; then
  stage "python: the flashgen package and its tests"
  ./scripts/python_env.sh
  # A fixed seed for everything random (the tests seed their generators too).
  PYTHONHASHSEED=0 HF_HUB_OFFLINE=1 .venv/bin/python -m pytest python/tests -q -p no:cacheprovider
fi

if wants asan; then
  stage "asan: AddressSanitizer + UndefinedBehaviorSanitizer"
  if [ -f build-asan/CMakeCache.txt ] &&
     ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' build-asan/CMakeCache.txt; then
    rm -rf build-asan
  fi
  log="$(mktemp)"
  cmake --preset asan > "$log" 2>&1 || { cat "$log"; exit 1; }
  rm -f "$log"
  ninja -C build-asan -j2
  # The test preset sets ASAN_OPTIONS and UBSAN_OPTIONS: halt_on_error (with
  # -fno-sanitize-recover: the first report ends the process, so the test fails),
  # print_stacktrace (UBSan says where, not only what), check_initialization_order and
  # strict_init_order (static initialization order bugs). detect_leaks stays on: the CPU
  # backend's generated libraries are dlopened and never closed, so leak reports in or through
  # them can still be symbolized. allocator_may_return_null: an allocation larger than ASan
  # supports fails as it would without ASan (std::bad_alloc, which flashgen reports as "out of
  # memory" with the size; tests/ref/call_limits_test.cpp) instead of aborting the process.
  ctest --preset asan
fi

if wants fuzz; then
  stage "fuzz: libFuzzer"
  ./scripts/fuzz.sh
fi
stage done
