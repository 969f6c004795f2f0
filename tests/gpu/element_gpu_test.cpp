// Every program on the GPU: kinds the tensor-core template does not take run on the element path
// (lower/lower.h) with the reference's answers (some, once lowered, on the tensor cores:
// row_norm's attention beside its norms' kernels, the sinks). Programs nobody here wrote
// before (reductions over keys without a softmax, per-row and per-key normalizations over head
// dims, scores mixed across heads, a softmax over the query dim, several groups, f32 / f16
// inputs, odd head dims, no key loop at all, plans of several kernels, attention sinks), and
// the random programs of the CPU property test (the same generator, seed and tolerance), run
// by run_cuda against the f64 reference. Outputs are poisoned (NaN) before the launch, so an
// unwritten element fails. SKIPs without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <tuple>

#include "compiler/pipeline.h"
#include "flashgen/compile.h"
#include "flashgen/error.h"
#include "flashgen/flashgen.h"
#include "runtime/cuda_driver.h"
#include "support/random_program.h"
#include "support/support.h"

namespace flashgen {
namespace {

bool have_gpu() {
  std::string why;
  return cuda_available(&why);
}

void expect_matches(const Program& p, const TensorMap& in, const std::string& what) {
  EXPECT_EQ(testing::element_mismatch(p, run_cuda(p, in), evaluate_reference(p, in)), "") << what;
}

TEST(ElementPath, UnseenProgramKindsMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  std::vector<Program> ps = parse_file(testing::source_path("tests/programs/unseen_kinds.attn"));
  for (const Program& p : ps) {
    for (auto [m, n, d] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {7, 77, 5},
                           {77, 7, 64}, {130, 200, 33}}) {
      Extents all = {{"b", 2}, {"h", 3}, {"g", 2}, {"m", m}, {"n", n}, {"d", d}, {"e", d + 3},
                     {"r", 129}}, ext;
      for (const std::string& dim : p.dims) ext[dim] = all.at(dim);
      TensorMap in = random_inputs(p, ext, 17);
      if (in.count("len")) {
        Tensor len(DType::i32, {2});
        len.set(0, 0.0);  // a batch with every row masked
        len.set(1, static_cast<double>(std::min(m, n) / 2 + 1));
        in["len"] = len;
      }
      expect_matches(p, in, p.name + " at m=" + std::to_string(m) + " n=" + std::to_string(n) +
                                " d=" + std::to_string(d));
    }
  }
}

// The kernels whose points take lanes (ElementLaunch::lane_dims) at extents that give 32 lanes
// a point, and a block per point over a long innermost dim, against the reference.
TEST(ElementPath, LanesOfAPointMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  for (const Program& p : parse_file(testing::source_path("tests/programs/unseen_kinds.attn"))) {
    if (p.name != "norm_r" && p.name != "center_m" && p.name != "norm_e" &&
        p.name != "col_softmax" && p.name != "col_stats" && p.name != "two_whole")
      continue;
    for (const int64_t m : {int64_t{1000}, int64_t{4096}}) {
      Extents all = {{"b", 3}, {"r", 5}, {"m", m}, {"e", 130}}, ext;
      for (const std::string& d : p.dims) ext[d] = all.at(d);
      expect_matches(p, random_inputs(p, ext, 23), p.name + " at m=" + std::to_string(m));
    }
  }
}

// A program that needs an intermediate in device memory (two kernels), on the element path.
TEST(ElementPath, PlansOfSeveralKernels) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  Program p = parse_source(R"(
program two_pass(q: f32[b, m, d], k: f32[b, n, d], v: f32[b, n, e]) {
  s = sum(q * k, d)
  c = sum(softmax(s, n), m)
  out o: f32[b, m, e] = sum(softmax(s, n) * v / (1.0 + c), n)
}
)", "two.attn").at(0);
  ASSERT_GT(kernel_count(p, {}), 1);
  for (int64_t m : {1, 9, 70})
    expect_matches(p, random_inputs(p, {{"b", 2}, {"m", m}, {"n", 45}, {"d", 7}, {"e", 3}}, 3),
                   "two_pass m=" + std::to_string(m));
}

TEST(ElementPath, OutOfRangeGatherNamesTheParameter) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  Program p = parse_source(R"(
program g(x: f32[m, d], idx: i32[m], t: f32[r]) {
  out o: f32[m] = sum(x, d) + t[idx[m]]
}
)", "g.attn").at(0);
  TensorMap in = random_inputs(p, {{"m", 5}, {"d", 3}, {"r", 4}}, 1);
  Tensor idx(DType::i32, {5});
  idx.set(3, 9.0);
  in["idx"] = idx;
  try {
    run_cuda(p, in);
    FAIL() << "expected a CallError";
  } catch (const CallError& e) {
    EXPECT_NE(std::string(e.what()).find("'t'"), std::string::npos) << e.what();
  }
}

// The CPU property test's programs (150 unless FLASHGEN_PROPERTY_COUNT says otherwise) in
// four chunks, so that scripts/gpu_check's shards run them in parallel.
class ElementPathRandom : public ::testing::TestWithParam<int> {};

TEST_P(ElementPathRandom, ProgramsMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  testing::for_each_random_program(
      "element property on the GPU", 150,
      [](const Program& p, const TensorMap& in, int) { expect_matches(p, in, p.name); },
      GetParam(), 4);
}
INSTANTIATE_TEST_SUITE_P(Chunks, ElementPathRandom, ::testing::Range(0, 4));

}  // namespace
}  // namespace flashgen
