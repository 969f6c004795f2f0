// The check of a backend's outputs against the reference (include/flashgen/check.h): the
// dtype-based tolerance, a planted difference found at its index, non-finite mismatches, and
// integer outputs compared exactly above 2^53.
#include "flashgen/check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "flashgen/flashgen.h"
#include "flashgen/ref.h"
#include "support/support.h"

namespace flashgen {
namespace {

Program parse_one(const std::string& text) { return parse_source(text, "t.attn").at(0); }

TEST(Check, ToleranceFollowsTheLeastPreciseFloatType) {
  Program p = parse_one(
      "program p(q: bf16[m], x: f32[m], i: i32[m]) {\n"
      "  out a: f32[m] = q + x\n"
      "  out b: bf16[m] = x\n"
      "  out c: i32[m] = i + 1\n"
      "}\n");
  DType prec;
  EXPECT_EQ(check_tolerance(p, p.outputs[0], &prec), std::ldexp(1.0, -6));
  EXPECT_EQ(prec, DType::bf16);  // a bf16 parameter limits an f32 output
  EXPECT_EQ(check_tolerance(p, p.outputs[2], &prec), std::ldexp(1.0, -6));
  Program f = parse_one(
      "program f(x: f32[m], h: f16[m], i: i64[m]) {\n"
      "  out a: f32[m] = x * 2\n"
      "  out b: f16[m] = x\n"
      "}\n");
  EXPECT_EQ(check_tolerance(f, f.outputs[0], &prec), std::ldexp(1.0, -9));
  EXPECT_EQ(prec, DType::f16);
  Program g = parse_one(
      "program g(x: f32[m], i: i64[m]) {\n"
      "  out a: f32[m] = x * 2\n"
      "}\n");
  EXPECT_EQ(check_tolerance(g, g.outputs[0]), std::ldexp(1.0, -13));
  Program ints = parse_one("program h(i: i64[m]) {\n  out a: i64[m] = i * 3\n}\n");
  EXPECT_EQ(check_tolerance(ints, ints.outputs[0], &prec), 0.0);
  EXPECT_EQ(prec, DType::i64);
}

TEST(Check, FindsAPlantedDifferenceAtItsIndex) {
  Program p = parse_one(
      "program p(q: f32[m, d], k: f32[n, d], v: f32[n, e]) {\n"
      "  out o: f32[m, e] = sum(softmax(sum(q * k, d), n) * v, n)\n"
      "}\n");
  Extents ext = {{"m", 9}, {"n", 13}, {"d", 4}, {"e", 3}};
  TensorMap in = random_inputs(p, ext, 5);
  TensorMap ref = evaluate_reference_f64(p, in);
  TensorMap got = run(p, in, RunOptions{Backend::cpu});
  std::vector<OutputCheck> ok = check_outputs(p, got, ref);
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_TRUE(ok[0].ok()) << ok[0].max_rel;
  EXPECT_LT(ok[0].max_rel, ok[0].tolerance);
  // One element off by 1% of the scale: outside f32's tolerance, found where it was planted.
  Tensor& o = got.at("o");
  o.set(17, o.get(17) + 0.01 * ok[0].scale);
  std::vector<OutputCheck> bad = check_outputs(p, got, ref);
  EXPECT_FALSE(bad[0].ok());
  EXPECT_EQ(bad[0].worst, 17);
  EXPECT_NEAR(bad[0].max_rel, 0.01, 1e-4);
  // A NaN where the reference is finite is a mismatch whatever the tolerance.
  o.set(17, std::numeric_limits<double>::quiet_NaN());
  bad = check_outputs(p, got, ref);
  EXPECT_EQ(bad[0].nonfinite_mismatch, 1);
  EXPECT_FALSE(bad[0].ok());
}

TEST(Check, IntegerOutputsCompareExactlyAbove2To53) {
  Program p = parse_one("program h(i: i64[m]) {\n  out a: i64[m] = i * 3\n}\n");
  Tensor i(DType::i64, {2});
  const int64_t big[2] = {(int64_t{1} << 60) + 1, -(int64_t{1} << 61) - 3};
  std::memcpy(i.data(), big, sizeof big);
  TensorMap in = {{"i", i}};
  TensorMap ref = evaluate_reference_f64(p, in);
  ASSERT_EQ(ref.at("a").dtype(), DType::i64);
  TensorMap got = run(p, in, RunOptions{Backend::cpu});
  EXPECT_TRUE(check_outputs(p, got, ref)[0].ok());
  int64_t v;
  std::memcpy(&v, got.at("a").data(), 8);
  EXPECT_EQ(v, 3 * big[0]);
  v += 1;  // one unit off at 2^61.6: invisible in a double, visible here
  std::memcpy(got.at("a").data(), &v, 8);
  std::vector<OutputCheck> c = check_outputs(p, got, ref);
  EXPECT_FALSE(c[0].ok());
  EXPECT_EQ(c[0].worst, 0);
}

}  // namespace
}  // namespace flashgen
