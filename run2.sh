export FLASHGEN_COMMIT=wip-sm90-pipelined
scripts/gpu_check nobench > $OUT/check.txt 2>&1; echo "check rc $?"
grep -v "^\[  PASSED\|^$\|memcheck .*: clean" $OUT/check.txt | tail -30
grep -h -B2 -A10 "Failure" $OUT/gpu_tests.log | head -60
B=build-gpucheck
./$B/tests/flashgen_gpu_tests --gtest_filter='Sm90*' 2>&1 | grep -E "OK|FAILED|SKIPPED|Failure|want" | head -12
for v in vanilla causal alibi softcap; do for path in auto sm80; do
  echo "$path $(FLASHGEN_CUDA_PATH=$path timeout 60 ./$B/fg_bench bench examples/$v.attn b=8,h=16,m=n=4096,d=e=128 2>&1 | tail -1)"
done; done
echo "forced sm80 GPU tests:"
for i in $(seq 0 7); do
  FLASHGEN_CUDA_PATH=sm80 GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 200 ./$B/tests/flashgen_gpu_tests --gtest_brief=1 > $OUT/sm80.$i.log 2>&1 &
done; wait
cat $OUT/sm80.*.log > $OUT/sm80_tests.log; rm -f $OUT/sm80.*.log
grep -E "FAILED|Failure" $OUT/sm80_tests.log | head -20
echo "sm80 passed: $(grep -h '^\[  PASSED  \]' $OUT/sm80_tests.log | awk '{s += $4} END {print s + 0}')"
