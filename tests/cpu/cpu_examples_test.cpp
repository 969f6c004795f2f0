// Every example (examples/*.attn) on the CPU backend against the reference evaluator at odd
// sizes (1, 7, 77, ~1000; m != n; fully masked rows; head dims 32..128), with f32 dtypes so the
// tolerance is f32's; plus bf16 as declared (within one output ulp), non-contiguous inputs, and
// out-of-range gathers reported with the parameter's name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "compiler/pipeline.h"
#include "flashgen/compile.h"
#include "flashgen/flashgen.h"
#include "flashgen/frontend.h"
#include "support/support.h"

namespace flashgen {
namespace {

Program load_example(const std::string& name, bool f32) {
  return testing::example_program(name, f32);
}

Extents extents_for(const Program& p, int64_t m, int64_t n, int64_t d, int64_t e) {
  return testing::example_extents(p, m, n, d, e);
}

void check_close(const Program& p, const TensorMap& in, const Extents& ext, double rel) {
  TensorMap want = evaluate_reference(p, in);
  TensorMap got = run_cpu(p, in);
  for (const Output& o : p.outputs) {
    ASSERT_TRUE(got.count(o.name)) << o.name;
    double scale = std::max(1.0, testing::max_abs(want.at(o.name)));
    std::string diff = testing::compare_tensors(got.at(o.name), want.at(o.name), rel * scale);
    std::string sizes;
    for (auto& [k, v] : ext) sizes += k + "=" + std::to_string(v) + " ";
    EXPECT_EQ(diff, "") << p.name << " output " << o.name << " at " << sizes;
  }
}

struct Shape {
  int64_t m, n, d, e;
};

class CpuExample : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuExample, MatchesReferenceAtOddSizesF32) {
  Program p = load_example(GetParam(), true);
  const Shape shapes[] = {{1, 1, 32, 32}, {7, 77, 64, 64}, {77, 7, 96, 32}, {300, 5, 32, 64},
                          {129, 1000, 128, 128}};
  uint64_t seed = 1;
  for (const Shape& s : shapes) {
    Extents ext = extents_for(p, s.m, s.n, s.d, s.e);
    if (p.name == "diff_attn") ext["e"] = 2 * s.d;
    TensorMap in = random_inputs(p, ext, seed++);
    check_close(p, in, ext, 2e-5);
  }
}

TEST_P(CpuExample, MatchesReferenceInBf16WithinOneUlp) {
  Program p = load_example(GetParam(), false);
  Extents ext = extents_for(p, 33, 65, 64, 64);
  TensorMap in = random_inputs(p, ext, 7);
  // bf16 outputs: one ulp of bf16 is 2^-8 relative.
  check_close(p, in, ext, 1.0 / 128);
}

TEST_P(CpuExample, FusesIntoOneKernel) {
  Program p = load_example(GetParam(), false);
  EXPECT_EQ(kernel_count(p, {}), 1) << explain(p, {});
}

INSTANTIATE_TEST_SUITE_P(Examples, CpuExample, ::testing::ValuesIn(testing::example_names()),
                         [](const auto& info) { return std::string(info.param); });

TEST(CpuBackend, AcceptsNonContiguousInputs) {
  Program p = load_example("causal", true);
  Extents ext = extents_for(p, 19, 23, 32, 32);
  TensorMap in = random_inputs(p, ext, 3);
  // q stored as [b, m, h, d] and viewed as [b, h, m, d].
  const Tensor& q = in.at("q");
  auto sh = q.shape();
  Tensor t(DType::f32, {sh[0], sh[2], sh[1], sh[3]});
  for (int64_t b = 0; b < sh[0]; ++b)
    for (int64_t h = 0; h < sh[1]; ++h)
      for (int64_t m = 0; m < sh[2]; ++m)
        for (int64_t d = 0; d < sh[3]; ++d) t.set_at({b, m, h, d}, q.at({b, h, m, d}));
  Tensor view = t.with_strides(sh, {sh[2] * sh[1] * sh[3], sh[3], sh[1] * sh[3], 1});
  TensorMap in2 = in;
  in2["q"] = view;
  TensorMap want = evaluate_reference(p, in);
  TensorMap got = run_cpu(p, in2);
  EXPECT_EQ(testing::compare_tensors(got.at("o"), want.at("o"), 2e-5), "");
}

// Parameters over the rows and keys (a bias[h, m, n], a mask keep[m, n]) beside the key loop:
// the row dim is m, tiled by rows; results as the reference's.
TEST(CpuBackend, ElementTilesOverRowsAndKeys) {
  Program p = parse_source(
      "program b(q: f32[h, m, d], k: f32[h, n, d], v: f32[h, n, e], bias: f32[h, m, n],\n"
      "          keep: bool[m, n]) {\n"
      "  s = where(keep or n == 0, sum(q * k, d) / sqrt(size(d)) + bias, -inf)\n"
      "  out o: f32[h, m, e] = sum(softmax(s, n) * v, n)\n}\n", "b.attn").at(0);
  for (auto [m, n] : {std::pair<int64_t, int64_t>{37, 45}, {77, 130}}) {
    Extents ext = {{"h", 2}, {"m", m}, {"n", n}, {"d", 32}, {"e", 16}};
    check_close(p, random_inputs(p, ext, 7), ext, 2e-5);
  }
}

// Data in the mask: the tile classifier bounds doc[m], doc[n] and w[n] by the values each tile
// reads, so sorted document ids skip or unmask whole tiles. Results must stay those of the
// reference (fixtures in tests/support: ragged documents, NaN weights, unsorted ids).
TEST(CpuBackend, DataMasksMatchTheReference) {
  Program p = testing::data_mask_program(DType::f32);
  const int64_t len = 333;
  Extents ext = {{"h", 2}, {"m", len}, {"n", len}, {"t", len}, {"d", 32}, {"e", 32}};
  for (int which = 0; which < 3; ++which) {
    TensorMap in = random_inputs(p, ext, 21 + which);
    testing::set_data_mask_inputs(in, len, which);
    SCOPED_TRACE("ids and weights, case " + std::to_string(which));
    check_close(p, in, ext, 2e-5);
  }
}

// The tile classifier's interval code must not decide a tile the reference would not: data at
// the edges of exactness (testing::hard_masks). Each mask runs on the CPU backend against the
// reference. (Float sums are not among them: the reference adds in f64, the kernels in f32, so
// a mask that hinges on one rounding differs between them with or without tile classes.)
TEST(CpuBackend, TileClassesHoldOnHardData) {
  const int64_t len = 200;
  for (const testing::HardMask& h : testing::hard_masks()) {
    Program p = testing::hard_mask_program(h, DType::f32);
    Extents ext = {{"m", len}, {"n", len}, {"t", len}, {"d", 16}, {"e", 16}};
    TensorMap in = random_inputs(p, ext, 5);
    in["doc"] = testing::hard_mask_data(h, len);
    SCOPED_TRACE(h.mask);
    check_close(p, in, ext, 2e-5);
  }
}

// Two factors of one running max (exp(s - M) * exp(s - M)): the online sum is rescaled once per
// factor when the max moves, so across many key tiles the result stays the reference's; with
// a mask the tiles are still classified (one max, carried twice).
TEST(CpuBackend, TwoFactorsOfOneMaxRescaleTwice) {
  Program p = parse_source(R"(
program sq(q: f32[m, d], k: f32[n, d], v: f32[n, e]) {
  s = where(n <= m + 40, sum(q * k, d), -inf)
  p = exp(s - max(s, n))
  out o: f32[m, e] = sum(p * p * v, n)
}
)", "sq.attn").at(0);
  Plan plan = compile_program(p, {}).plan;
  ASSERT_EQ(plan.kernel_count(), 1);
  for (const Accumulator& a : plan.kernels[0].accs)
    if (a.op == Op::Sum) {
      EXPECT_EQ(a.rescale_by.size(), 2u);
      EXPECT_EQ(a.rescale_by[0], a.rescale_by[1]);
      EXPECT_EQ(a.exp_factors.size(), 2u);
    }
  EXPECT_TRUE(plan.kernels[0].tiles.skip_empty);
  TensorMap in = random_inputs(p, {{"m", 37}, {"n", 300}, {"d", 8}, {"e", 3}}, 4);
  TensorMap want = evaluate_reference(p, in);
  const double scale = std::max(1.0, testing::max_abs(want.at("o")));
  EXPECT_EQ(testing::compare_tensors(run_cpu(p, in).at("o"), want.at("o"), 3e-5 * scale), "");
}

// The program kinds of tests/programs (reductions without a softmax, head-dim norms, mixed
// heads, query softmax, several groups, online forms with powers and two maxima, integer
// scores, nested gathers, permuted outputs...) on the CPU backend against the reference, over
// five key tiles, so that every running max moves.
TEST(CpuBackend, ProgramKindsMatchTheReference) {
  std::vector<Program> ps;
  for (const char* file : {"tests/programs/unseen_kinds.attn", "tests/programs/more_kinds.attn",
                           "tests/programs/norms.attn", "tests/programs/gates.attn",
                           "tests/programs/value_sums.attn", "tests/programs/key_values.attn",
                           "tests/programs/mixed_kinds.attn",
                           "tests/programs/masks_and_outputs.attn",
                           "tests/programs/partials.attn",
                           "tests/programs/after_attention.attn",
                           "tests/programs/groups.attn",
                           "tests/programs/scores_only.attn",
                           "tests/programs/score_dims.attn"})
    for (const Program& p : parse_file(testing::source_path(file))) ps.push_back(p);
  precompile_cpu(ps, {"-O1"});
  const Extents all = {{"b", 2},   {"h", 3},   {"g", 2}, {"r", 129}, {"r2", 2},
                       {"m", 37},  {"n", 300}, {"d", 5}, {"e", 7},   {"f", 3},
                       {"t", 11},  {"u", 300}};
  for (const Program& p : ps) {
    Extents ext;
    for (const std::string& d : p.dims) ext[d] = all.at(d);
    TensorMap in = random_inputs(p, ext, 8);
    EXPECT_EQ(testing::element_mismatch(p, run_cpu(p, in), evaluate_reference(p, in)), "")
        << p.name;
  }
}

TEST(CpuBackend, OutOfRangeGatherNamesTheParameter) {
  Program p = load_example("document", true);
  Extents ext = extents_for(p, 9, 9, 32, 32);
  TensorMap in = random_inputs(p, ext, 5);
  Tensor doc(DType::i32, {4});  // t = 4 < m = 9
  in["doc"] = doc;
  try {
    run_cpu(p, in, {});
    FAIL() << "expected a CallError";
  } catch (const CallError& e) {
    EXPECT_NE(std::string(e.what()).find("'doc'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flashgen
