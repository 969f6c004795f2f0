// fold_constants (through canonicalize) folds with the reference evaluator's typed semantics:
// i32 results and int -> i32 casts wrap, float -> int casts saturate (NaN -> 0), bf16/f16 casts
// round to nearest even, int64 products stay exact (a result a Const cannot hold exactly stays
// unfolded), and x % 0 is left for the call to report. Every case also checks that the folded
// program evaluates exactly like the original.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>

#include "flashgen/error.h"
#include "flashgen/flashgen.h"
#include "passes/passes.h"
#include "support/support.h"

namespace flashgen {
namespace {

const char* kSource =
    "program folds(x: f32[m]) {\n"
    "  out a: f32[m] = x * 0 + f32(bf16(1.1))\n"
    "  out a16: f32[] = f32(f16(1.1))\n"
    "  out b: i64[] = i64(i32(100000) * i32(100000))\n"
    "  out c: i64[] = i64(i32(3000000000))\n"
    "  out d: i32[] = i32(1e10)\n"
    "  out e: i32[] = i32(-inf)\n"
    "  out f: i32[] = i32(inf - inf)\n"
    "  out g: i64[] = i64(3037000499) * i64(3037000499)\n"
    "  out h: i64[] = i64(-7) % 3 + (7 % -3) * 10\n"
    "  out k: i64[] = i64(1e30) % 1000 + i64(-1e30) % 999\n"
    "  out l: i32[] = -i32(-2147483648) + abs(i32(-2147483648))\n"
    "}\n";

Program source_program() { return parse_source(kSource, "folds.attn").at(0); }

const Output& output(const Program& p, const std::string& name) {
  for (const Output& o : p.outputs)
    if (o.name == name) return o;
  throw std::runtime_error("no output " + name);
}

// The constant an output folded to, if it is one.
std::optional<double> folded(const Program& p, const std::string& name) {
  const Node& n = p.nodes[output(p, name).node];
  if (n.op != Op::Const) return std::nullopt;
  return n.value;
}

int64_t int_at(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::i32) {
    int32_t v;
    std::memcpy(&v, static_cast<const uint8_t*>(t.data()) + 4 * i, 4);
    return v;
  }
  int64_t v;
  std::memcpy(&v, static_cast<const uint8_t*>(t.data()) + 8 * i, 8);
  return v;
}

TensorMap inputs() {
  std::mt19937_64 rng(3);
  return {{"x", testing::random_float_tensor(DType::f32, {7}, rng)}};
}

TEST(Fold, TypedConstants) {
  Program c = canonicalize(source_program());
  EXPECT_EQ(folded(c, "a16"), 1.099609375);
  EXPECT_EQ(folded(c, "b"), 1410065408.0);   // 10^10 mod 2^32
  EXPECT_EQ(folded(c, "c"), -1294967296.0);  // 3e9 - 2^32
  EXPECT_EQ(folded(c, "d"), 2147483647.0);   // saturated
  EXPECT_EQ(folded(c, "e"), -2147483648.0);
  EXPECT_EQ(folded(c, "f"), 0.0);            // NaN -> 0
  EXPECT_EQ(folded(c, "h"), 2.0 + (-2.0) * 10);  // floor modulo
  EXPECT_EQ(folded(c, "l"), 0.0);  // -INT32_MIN and abs(INT32_MIN) wrap: -2^32 wraps to 0
  // bf16(1.1) is 1.1015625 wherever it ends up.
  bool found = false;
  for (const Node& n : c.nodes) found = found || (n.op == Op::Const && n.value == 1.1015625);
  EXPECT_TRUE(found) << c.str();
}

TEST(Fold, EvaluatesLikeTheOriginal) {
  Program p = source_program();
  Program c = canonicalize(p);
  TensorMap in = inputs();
  TensorMap want = evaluate_reference(p, in), got = evaluate_reference(c, in);
  for (const Output& o : p.outputs) {
    const Tensor& w = want.at(o.name);
    const Tensor& g = got.at(o.name);
    ASSERT_EQ(w.numel(), g.numel()) << o.name;
    for (int64_t i = 0; i < w.numel(); ++i) {
      if (is_integer(o.type)) ASSERT_EQ(int_at(g, i), int_at(w, i)) << o.name;
      else ASSERT_EQ(g.get(i), w.get(i)) << o.name;
    }
  }
  // Exact int64 results beyond 2^53 and saturated casts, bit for bit.
  EXPECT_EQ(int_at(got.at("g"), 0), int64_t{3037000499} * int64_t{3037000499});
  EXPECT_EQ(int_at(got.at("k"), 0), 807 + 919);  // (2^63 - 1) % 1000 + (-2^63) floor-mod 999
}

TEST(Fold, ModuloByZeroIsLeftToTheCall) {
  Program p = parse_source(
      "program modz(x: i64[m]) {\n  out o: i64[m] = x + i64(7) % (i64(3) - 3)\n}\n",
      "modz.attn").at(0);
  Program c = canonicalize(p);  // does not throw
  std::mt19937_64 rng(4);
  TensorMap in = {{"x", testing::random_int_tensor(DType::i64, {5}, -9, 9, rng)}};
  EXPECT_THROW(evaluate_reference(c, in), CallError);
  EXPECT_THROW(evaluate_reference(p, in), CallError);
}

}  // namespace
}  // namespace flashgen
