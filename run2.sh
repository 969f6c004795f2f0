export FLASHGEN_COMMIT=wip-sm90-pipelined2
B=build-gpucheck
{ cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release && ninja -C $B -j16 flashgen flashgen_gpu_tests; } > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
LIBS=$(grep -m1 "LINK_LIBRARIES = .*libflashgen.a" $B/build.ninja | sed 's/.*LINK_LIBRARIES = //')
(cd $B && g++ -std=c++20 -O2 -I ../include -I ../src ../bench/gpu/fg_bench.cpp -o fg_bench $LIBS -fopenmp) >> $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
for v in vanilla causal alibi softcap; do for path in auto sm80; do
  echo "$path $(FLASHGEN_CUDA_PATH=$path timeout 60 ./$B/fg_bench bench examples/$v.attn b=8,h=16,m=n=4096,d=e=128 2>&1 | tail -1)"
done; done
echo "auto $(timeout 60 ./$B/fg_bench bench examples/causal.attn b=4,h=16,m=n=4096,d=e=64 2>&1 | tail -1)"
for i in $(seq 0 7); do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 150 ./$B/tests/flashgen_gpu_tests --gtest_brief=1 > $OUT/t.$i.log 2>&1 &
done; wait
cat $OUT/t.*.log > $OUT/gpu_tests.log; rm -f $OUT/t.*.log
grep -E "FAILED|Failure" $OUT/gpu_tests.log | head -20
echo "passed: $(grep -h '^\[  PASSED  \]' $OUT/gpu_tests.log | awk '{s += $4} END {print s + 0}') shards done: $(grep -c 'PASSED\|FAILED  \] [0-9]' $OUT/gpu_tests.log)"
for f in causal document; do compute-sanitizer --tool memcheck --error-exitcode 9 ./$B/fg_bench run examples/$f.attn b=1,h=2,m=37,n=45,t=45,d=e=64 > /dev/null 2>&1 && echo "memcheck $f clean" || echo "memcheck $f FAILED"; done
