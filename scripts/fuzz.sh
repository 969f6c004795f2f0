#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang in build-fuzz/ (CMake preset `fuzz`) and runs
# each for a bounded time with a fixed seed, over the corpus kept in fuzz/corpus/ (the parser
# and the compiler also start from examples/ and the .attn files of tests/golden/; the compiler
# from bench/programs/ too), with the dictionaries of
# fuzz/. Fails when a target crashes, hangs, leaks, or a sanitizer reports; the input is left in
# build-fuzz/artifacts/ and the command to reproduce it is printed.
#
#   scripts/fuzz.sh [--seconds N] [--seed N] [--merge] [TARGET...]
#
# TARGET: parser, npy, compile (default: all three). --seconds: per target (default 60 for the
# parser, 30 for npy, 90 for the compiler; FUZZ_SECONDS overrides them). --seed: libFuzzer's
# -seed (default 1; FUZZ_SEED).
# --merge: afterwards, merge what the run found into fuzz/corpus/TARGET (libFuzzer -merge=1
# keeps only inputs that add coverage), to be committed.
# Needs clang and the libFuzzer runtime: scripts/setup.sh --fuzz installs them.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-}"
seed="${FUZZ_SEED:-1}"
merge=0
targets=()
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --merge) merge=1; shift ;;
    parser|npy|compile) targets+=("$1"); shift ;;
    *) echo "fuzz.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
((${#targets[@]})) || targets=(parser npy compile)

if ! command -v clang++ > /dev/null; then
  echo "fuzz.sh: clang++ not found; run scripts/setup.sh --fuzz" >&2
  exit 1
fi
# clang prints the bare name when it has no such file.
if [ ! -f "$(clang++ -print-file-name=libclang_rt.fuzzer-x86_64.a)" ]; then
  echo "fuzz.sh: the libFuzzer runtime is missing (Debian: libclang-rt-14-dev);" \
       "run scripts/setup.sh --fuzz" >&2
  exit 1
fi

log="$(mktemp)"
if [ -f build-fuzz/CMakeCache.txt ] &&
   ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' build-fuzz/CMakeCache.txt; then
  rm -rf build-fuzz
fi
cmake --preset fuzz > "$log" 2>&1 || { cat "$log"; exit 1; }
rm -f "$log"
build_targets=()
for t in "${targets[@]}"; do build_targets+=("${t}_fuzzer"); done
ninja -C build-fuzz -j2 "${build_targets[@]}"

mkdir -p build-fuzz/artifacts
status=0
for t in "${targets[@]}"; do
  case "$t" in
    parser) secs="${seconds:-60}"; dict=fuzz/attn.dict; max_len=4096
            seeds=(fuzz/corpus/parser examples)
            seed_files=(tests/golden/*.attn) ;;
    npy)    secs="${seconds:-30}"; dict=fuzz/npy.dict; max_len=1024
            seeds=(fuzz/corpus/npy)
            seed_files=() ;;
    compile) secs="${seconds:-90}"; dict=fuzz/attn.dict; max_len=2048
            seeds=(fuzz/corpus/compile examples bench/programs)
            seed_files=(tests/golden/*.attn) ;;
  esac
  # libFuzzer writes new inputs into the first corpus folder: a scratch copy, so that the
  # repository's corpus changes only through --merge.
  work="build-fuzz/corpus-$t"
  rm -rf "$work"
  mkdir -p "$work"
  for s in "${seeds[@]}"; do cp "$s"/* "$work"/; done
  ((${#seed_files[@]})) && cp "${seed_files[@]}" "$work"/
  bin="build-fuzz/fuzz/${t}_fuzzer"
  echo "fuzz.sh: $t: $secs s, -seed=$seed, dictionary $dict, $(ls "$work" | wc -l) seed inputs"
  if ! "$bin" -seed="$seed" -max_total_time="$secs" -dict="$dict" -max_len="$max_len" \
       -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="build-fuzz/artifacts/$t-" "$work" 2> "build-fuzz/$t.log"; then
    tail -n 60 "build-fuzz/$t.log"
    echo "fuzz.sh: $t FAILED (seed $seed); the input is in build-fuzz/artifacts/$t-*;" \
         "reproduce with: $bin build-fuzz/artifacts/$t-<name>" >&2
    status=1
    continue
  fi
  grep -E '^Done |^stat::new_units_added|^stat::peak_rss_mb' \
    "build-fuzz/$t.log" || true
  if ((merge)); then
    "$bin" -merge=1 -dict="$dict" -max_len="$max_len" "fuzz/corpus/$t" "$work" \
      2>> "build-fuzz/$t.log"
    echo "fuzz.sh: fuzz/corpus/$t now holds $(ls "fuzz/corpus/$t" | wc -l) inputs"
  fi
done
exit "$status"
