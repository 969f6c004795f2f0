// The CPU backend against the reference evaluator, exactly, on the integer and conversion
// semantics of docs/language.md / src/ref/evaluator.cpp: i32 ops wrap modulo 2^32 after every op
// (also through reductions), float->int casts truncate and saturate with NaN -> 0, `%` is the
// floor modulo with x % -1 == 0 (also INT64_MIN % -1) and x % 0 a CallError, and constants the
// compiler folds carry the same semantics (i32 wrap, bf16 rounding, exact int64 products).
// Inputs are random at odd sizes, plus the edge values (NaN, +-inf, INT_MIN, ...).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "flashgen/compile.h"
#include "flashgen/error.h"
#include "flashgen/flashgen.h"
#include "support/support.h"

namespace flashgen {
namespace {

Program parse_one(const std::string& text) { return parse_source(text, "semantics.attn").at(0); }

// The exact integer values of an i32/i64 tensor.
std::vector<int64_t> ints(const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  const uint8_t* p = static_cast<const uint8_t*>(t.data());
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.dtype() == DType::i32) {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      out[i] = v;
    } else {
      EXPECT_EQ(t.dtype(), DType::i64);
      std::memcpy(&out[i], p + 8 * i, 8);
    }
  }
  return out;
}

// Every output of `p` on the CPU equals the reference exactly (integers bit for bit).
void expect_exact(const Program& p, const TensorMap& in) {
  TensorMap want = evaluate_reference(p, in);
  TensorMap got = run_cpu(p, in);
  for (const Output& o : p.outputs) {
    const Tensor& g = got.at(o.name);
    const Tensor& w = want.at(o.name);
    ASSERT_EQ(g.dtype(), w.dtype()) << o.name;
    ASSERT_EQ(g.numel(), w.numel()) << o.name;
    if (is_integer(w.dtype())) {
      std::vector<int64_t> gi = ints(g), wi = ints(w);
      for (size_t i = 0; i < wi.size(); ++i) ASSERT_EQ(gi[i], wi[i]) << o.name << "[" << i << "]";
    } else {
      EXPECT_EQ(testing::compare_tensors(g, w, 0.0), "") << o.name;
    }
  }
}

Tensor i64_tensor(const std::vector<int64_t>& v) {
  Tensor t(DType::i64, {static_cast<int64_t>(v.size())});
  std::memcpy(t.data(), v.data(), 8 * v.size());
  return t;
}

TEST(Semantics, I32ArithmeticWraps) {
  Program p = parse_one(
      "program i32chain(a: i32[m], b: i32[n]) {\n"
      "  c = a * i32(100000) * i32(100000) + b\n"
      "  out o: i64[m, n] = i64(c)\n"
      "  out o2: i32[m, n] = -a - b + abs(a)\n"
      "}\n");
  std::mt19937_64 rng(11);
  for (auto [m, n] : {std::pair<int64_t, int64_t>{7, 13}, {1, 77}, {33, 5}}) {
    TensorMap in = {{"a", testing::random_int_tensor(DType::i32, {m}, INT32_MIN, INT32_MAX, rng)},
                    {"b", testing::random_int_tensor(DType::i32, {n}, INT32_MIN, INT32_MAX, rng)}};
    expect_exact(p, in);
  }
}

// i32 sums accumulate modulo 2^64 and wrap to 32 bits; i32 products inside a sum wrap first.
// i64 outputs keep all 64 bits (the CPU backend's output buffers are int64 for integer
// outputs, not double): values near 2^62 differ from their neighbours only in the low bits.
TEST(Semantics, I64OutputsAreExact) {
  Program p = parse_one(
      "program big(x: i64[m], y: i64[n]) {\n"
      "  out o: i64[m, n] = x * 4096 + y\n"
      "  out s: i64[m] = sum(x + y, n)\n"
      "}\n");
  std::mt19937_64 rng(13);
  for (auto [m, n] : {std::pair<int64_t, int64_t>{7, 13}, {1, 1}, {33, 5}}) {
    std::vector<int64_t> x(m), y(n);
    for (auto& v : x) v = (int64_t(1) << 50) + static_cast<int64_t>(rng() % 1000);
    for (auto& v : y) v = static_cast<int64_t>(rng() % 4095) + 1;  // odd low bits
    TensorMap in = {{"x", i64_tensor(x)}, {"y", i64_tensor(y)}};
    expect_exact(p, in);
    std::vector<int64_t> o = ints(run_cpu(p, in).at("o"));
    EXPECT_EQ(o[0], x[0] * 4096 + y[0]);
  }
}

TEST(Semantics, I32ReductionsWrap) {
  Program p = parse_one(
      "program i32sum(a: i32[m, n], b: i32[n]) {\n"
      "  out o: i32[m] = sum(a * b, n)\n"
      "  out o2: i64[m] = i64(sum(a * i32(65537), n)) + i64(max(a + b, n))\n"
      "}\n");
  std::mt19937_64 rng(12);
  for (auto [m, n] : {std::pair<int64_t, int64_t>{7, 131}, {3, 1}, {65, 9}}) {
    TensorMap in = {
        {"a", testing::random_int_tensor(DType::i32, {m, n}, INT32_MIN, INT32_MAX, rng)},
        {"b", testing::random_int_tensor(DType::i32, {n}, INT32_MIN, INT32_MAX, rng)}};
    expect_exact(p, in);
  }
}

// Float -> int saturates (also +-inf), NaN -> 0. The inputs are powers of two (the products
// are exact in f32 and f64, so only the conversion rule decides) or saturate, plus NaN/inf/0.
TEST(Semantics, FloatToIntSaturates) {
  Program p = parse_one(
      "program f2idyn(x: f32[m]) {\n"
      "  out o: i32[m] = i32(x * 1e10)\n"
      "  out o2: i64[m] = i64(x * 1e30) % 7\n"
      "  out o3: i64[m] = i64(x * 1e10) % 1000003 + i64(-x * 1e30) % 1000003\n"
      "}\n");
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> xs = {std::nanf(""), inf, -inf, 0.f, -0.f, 0.5f, -0.5f, 0x1p-4f, -0x1p-4f,
                           0x1p-10f, -0x1p-10f, 0x1p-20f, -0x1p-20f, 0x1p-30f, -0x1p-30f, 1e20f,
                           -1e20f, 1e38f, -1e38f};
  std::mt19937_64 rng(13);
  std::uniform_int_distribution<int> e(-3, 30);
  while (xs.size() < 77) xs.push_back(std::ldexp(rng() % 2 ? 1.f : -1.f, e(rng)));
  Tensor x(DType::f32, {static_cast<int64_t>(xs.size())});
  std::memcpy(x.data(), xs.data(), 4 * xs.size());
  expect_exact(p, {{"x", x}});
}

// Floor modulo on random signs, x % -1 == 0 for INT64_MIN too.
TEST(Semantics, FloorModulo) {
  Program p = parse_one(
      "program fmod(a: i64[m], b: i64[m], c: i32[m]) {\n"
      "  out o: i64[m] = a % b\n"
      "  out o2: i32[m] = c % i32(b)\n"
      "}\n");
  std::mt19937_64 rng(14);
  std::vector<int64_t> a = {INT64_MIN, INT64_MIN, INT64_MAX, -7, 7, -7, 7, 0};
  std::vector<int64_t> b = {-1, 3, -1, 3, -3, -3, 3, -5};
  std::uniform_int_distribution<int64_t> ua(INT64_MIN, INT64_MAX), ub(-1000, 1000);
  while (a.size() < 37) {
    a.push_back(rng() % 3 ? ua(rng) : ub(rng));
    int64_t d = ub(rng);
    b.push_back(d == 0 ? 1 : d);
  }
  TensorMap in = {{"a", i64_tensor(a)}, {"b", i64_tensor(b)},
                  {"c", testing::random_int_tensor(DType::i32, {37}, INT32_MIN, INT32_MAX, rng)}};
  expect_exact(p, in);
}

// x % 0 is a CallError on the CPU as in the reference (not a silent 0).
TEST(Semantics, ModuloByZeroIsCallError) {
  Program p = parse_one("program modz(a: i64[m], b: i64[m]) {\n  out o: i64[m] = a % b\n}\n");
  std::vector<int64_t> a = {5, 6, 7, 8, 9, 10, 11}, b = {1, 2, 3, 0, 5, 6, 7};
  TensorMap in = {{"a", i64_tensor(a)}, {"b", i64_tensor(b)}};
  EXPECT_THROW(evaluate_reference(p, in), CallError);
  EXPECT_THROW(run_cpu(p, in), CallError);
  b[3] = 4;  // and the same compiled program runs fine without a zero
  in["b"] = i64_tensor(b);
  expect_exact(p, in);
}

// Constants the compiler folds keep the reference's semantics on the CPU: i32 casts wrap,
// bf16 casts round, float->int casts saturate, int64 products stay exact.
TEST(Semantics, FoldedConstantsMatchReference) {
  Program p = parse_one(
      "program fcpu(x: i64[m], y: f32[m]) {\n"
      "  big = i64(3037000499) * i64(3037000499)\n"
      "  out o: i64[m] = x + i64(i32(3000000000)) + i64(i32(100000) * i32(100000))\n"
      "  out o2: i64[m] = (x + big) % 1000003 + i64(1e30) % 1000 + i64(-inf) % 999\n"
      "  out o3: f32[m] = y * f32(bf16(1.1)) + f32(f16(1.1))\n"
      "}\n");
  std::mt19937_64 rng(15);
  TensorMap in = {{"x", testing::random_int_tensor(DType::i64, {19}, -1000, 1000, rng)},
                  {"y", testing::random_float_tensor(DType::f32, {19}, rng)}};
  TensorMap want = evaluate_reference(p, in);
  TensorMap got = run_cpu(p, in);
  for (const char* o : {"o", "o2"}) {
    std::vector<int64_t> gi = ints(got.at(o)), wi = ints(want.at(o));
    for (size_t i = 0; i < wi.size(); ++i) ASSERT_EQ(gi[i], wi[i]) << o << "[" << i << "]";
  }
  // y * 1.1015625 + 1.0996094: f32 arithmetic on the CPU, so within f32 rounding.
  const Tensor& yt = in.at("y");
  for (int64_t i = 0; i < 19; ++i)
    EXPECT_NEAR(got.at("o3").get(i), yt.get(i) * 1.1015625 + 1.099609375, 1e-5) << i;
}

}  // namespace
}  // namespace flashgen
