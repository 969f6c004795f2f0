// plan/cost.h: the FLOPs and bytes of a kernel from the plan and the extents, and the fraction
// of (row, key) pairs a mask keeps, against counts written out by hand.
#include <gtest/gtest.h>

#include "compiler/pipeline.h"
#include "flashgen/frontend.h"
#include "plan/cost.h"
#include "support/support.h"

namespace flashgen {
namespace {

Plan plan_of(const Program& p) { return compile_program(p, CompileOptions{}).plan; }

std::vector<int64_t> ext_vector(const Plan& plan, const Extents& e) {
  std::vector<int64_t> v;
  for (const std::string& d : plan.program.dims) v.push_back(e.at(d));
  return v;
}

TEST(KernelCost, VanillaCountsBothContractionsAndEachBufferOnce) {
  Program p = testing::example_program("vanilla");
  Plan plan = plan_of(p);
  ASSERT_EQ(plan.kernel_count(), 1);
  const Extents e = {{"b", 2}, {"h", 3}, {"m", 50}, {"n", 70}, {"d", 16}, {"e", 8}};
  KernelCost c = kernel_cost(plan, plan.kernels[0], e);
  ASSERT_TRUE(c.known);
  const double bh = 2 * 3, mn = 50 * 70;
  // q.k and p.v: a product and an add per (m, n, d) and per (m, n, e).
  EXPECT_GE(c.body_flops, bh * mn * (2 * 16 + 2 * 8));
  EXPECT_LE(c.body_flops, c.flops);
  EXPECT_LT(c.flops - bh * mn * (2 * 16 + 2 * 8), bh * mn * 16);  // the rest: element-wise work
  // bf16 q [b,h,m,d], k [b,h,n,d], v [b,h,n,e] read and o [b,h,m,e] written, once each.
  EXPECT_EQ(c.bytes, 2 * bh * (50 * 16 + 70 * 16 + 70 * 8 + 50 * 8));
  EXPECT_FALSE(kernel_cost(plan, plan.kernels[0], {{"b", 2}}).known);  // extents missing
}

TEST(KernelCost, TheMaskKeepsWhatTheHostCounts) {
  Program p = testing::example_program("sliding_window");
  Plan plan = plan_of(p);
  const PlanKernel& k = plan.kernels[0];
  const Extents e = {{"b", 1}, {"h", 1}, {"m", 400}, {"n", 380}, {"d", 8}, {"e", 8}};
  double kept = 0;
  for (int64_t m = 0; m < 400; ++m)
    for (int64_t n = 0; n < 380; ++n) kept += n <= m && m - n <= 256;
  const double f = mask_fraction(plan, k, {}, ext_vector(plan, e));
  EXPECT_DOUBLE_EQ(f, kept / (400.0 * 380.0));
  // The FLOPs to do: the key loop's over kept pairs only (a share f of the body), the rest whole.
  KernelCost c = kernel_cost(plan, k, e);
  EXPECT_GT(c.body_flops, 0);
  EXPECT_LT(must_flops(c, f), c.flops);
  EXPECT_GT(must_flops(c, f), f * c.flops);
  EXPECT_EQ(must_flops(c, 1), c.flops);
  // More rows than max_rows: evenly spaced rows, close to the whole count.
  const double sampled = mask_fraction(plan, k, {}, ext_vector(plan, e), 40);
  EXPECT_NEAR(sampled, f, 0.03);
  EXPECT_NE(sampled, f);
  // Long key extents: fewer rows, at most about 2^22 pairs, still close to the exact share.
  const Extents lng = {{"b", 1}, {"h", 1}, {"m", 100000}, {"n", 100000}, {"d", 8}, {"e", 8}};
  const double want_long = 1.0 - (100000.0 - 257) * (100000.0 - 256) / 2 / 1e10 -
                           100000.0 * 99999.0 / 2 / 1e10;  // pairs outside the window
  EXPECT_NEAR(mask_fraction(plan, k, {}, ext_vector(plan, lng)), want_long, 2e-4);
  // Data masks read their data: document ids, two documents of 100 and 200.
  Program d = testing::example_program("document");
  Plan dp = plan_of(d);
  Tensor doc(DType::i32, {300});
  for (int64_t i = 0; i < 300; ++i) doc.set(i, i < 100 ? 0 : 1);
  const Extents de = {{"b", 1}, {"h", 1}, {"m", 300}, {"n", 300}, {"t", 300}, {"d", 8}, {"e", 8}};
  const double want = (100.0 * 101 / 2 + 200.0 * 201 / 2) / (300.0 * 300.0);
  EXPECT_DOUBLE_EQ(mask_fraction(dp, dp.kernels[0], {{"doc", doc}}, ext_vector(dp, de)), want);
  // No mask: every pair.
  Program v = testing::example_program("vanilla");
  Plan vp = plan_of(v);
  EXPECT_EQ(mask_fraction(vp, vp.kernels[0], {}, ext_vector(vp, e)), 1);
}

// Masks through any element code count as the reference evaluates them (ir/scalar_semantics.h):
// floor modulo, abs, floor of a float quotient, maximum, where.
TEST(KernelCost, MasksThroughArithmeticKeepWhatTheEvaluatorKeeps) {
  Program p = parse_source(R"(
program m(q: bf16[m, d], k: bf16[n, d], v: bf16[n, e]) {
  keep = abs(n - m) <= 5 or (n % 7 == 3 and floor(f32(m) / 16.0) == floor(f32(n) / 16.0))
  s = where(keep and maximum(n, m) < 90, sum(q * k, d), -inf)
  out o: bf16[m, e] = sum(softmax(s, n) * v, n)
}
)", "t.attn").at(0);
  Plan plan = plan_of(p);
  const PlanKernel& k = plan.kernels.at(0);
  ASSERT_GE(k.tiles.mask, 0);
  const Extents e = {{"m", 100}, {"n", 120}, {"d", 8}, {"e", 8}};
  double kept = 0;
  for (int64_t m = 0; m < 100; ++m)
    for (int64_t n = 0; n < 120; ++n) {
      const bool near = (n > m ? n - m : m - n) <= 5;
      const bool block = n % 7 == 3 && m / 16 == n / 16;
      kept += (near || block) && std::max(n, m) < 90;
    }
  EXPECT_DOUBLE_EQ(mask_fraction(plan, k, {}, ext_vector(plan, e)), kept / (100.0 * 120.0));
}

}  // namespace
}  // namespace flashgen
