// Tests of src/runtime/tensor.cpp: scalar conversions (exhaustive for bf16/f16 decoding and
// round trips; against an independent brute-force nearest-value search for rounding) and the
// Tensor type (strides, views, conversion).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <tuple>
#include <random>
#include <vector>

#include "flashgen/tensor.h"

namespace flashgen {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

// Independent decoder: value of a code of a format with E exponent and M mantissa bits, written
// from the textbook definition with pow() (not the library's ldexp path).
double textbook_value(uint32_t code, int E, int M, int bias, bool ieee) {
  int sign = (code >> (E + M)) & 1;
  int e = (code >> M) & ((1 << E) - 1);
  int m = code & ((1 << M) - 1);
  double s = sign ? -1.0 : 1.0;
  if (ieee && e == (1 << E) - 1) return m ? std::nan("") : s * kInf;
  if (!ieee && e == (1 << E) - 1 && m == (1 << M) - 1) return std::nan("");
  if (e == 0) return s * (m / std::pow(2.0, M)) * std::pow(2.0, 1 - bias);
  return s * (1.0 + m / std::pow(2.0, M)) * std::pow(2.0, e - bias);
}

// Brute-force round to nearest, ties to the code with an even last bit, over all finite codes.
// Beyond the largest finite value: IEEE formats give inf from max + half an ulp on; saturating
// formats give max.
uint32_t brute_round(double x, int E, int M, int bias, bool ieee, bool saturate) {
  uint32_t sign_bit = 1u << (E + M);
  double best_d = kInf;
  uint32_t best = 0;
  double maxv = 0;
  uint32_t max_code = 0;
  double a = std::fabs(x);
  // The positive codes' values, computed once per format.
  static std::map<std::tuple<int, int, int, bool>, std::vector<double>> tables;
  auto& table = tables[{E, M, bias, ieee}];
  if (table.empty()) {
    for (uint32_t c = 0; c < sign_bit; ++c) table.push_back(textbook_value(c, E, M, bias, ieee));
  }
  for (uint32_t c = 0; c < sign_bit; ++c) {
    double v = table[c];
    if (!std::isfinite(v)) continue;
    if (v > maxv) { maxv = v; max_code = c; }
    double d = std::fabs(a - v);
    if (d < best_d || (d == best_d && (c & 1) == 0)) { best_d = d; best = c; }
  }
  uint32_t s = std::signbit(x) ? sign_bit : 0;
  if (a > maxv) {
    // Next power of two above max is where the inf code would sit.
    double next = std::pow(2.0, std::floor(std::log2(maxv)) + 1);
    if (saturate || !ieee) return s | max_code;
    if (a >= (maxv + next) / 2) return s | (((1u << E) - 1) << M);
    return s | max_code;
  }
  return s | best;
}

TEST(TensorConversions, Bf16AllPatternsRoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = bf16_bits_to_f32(static_cast<uint16_t>(b));
    double tv = textbook_value(b, 8, 7, 127, true);
    if (std::isnan(tv)) {
      ASSERT_TRUE(std::isnan(f)) << b;
      ASSERT_TRUE(std::isnan(bf16_bits_to_f32(f32_to_bf16_bits(f)))) << b;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), tv) << b;
    ASSERT_EQ(f32_to_bf16_bits(f), b) << b;
    ASSERT_EQ(round_to_dtype(tv, DType::bf16), tv) << b;
  }
}

TEST(TensorConversions, F16AllPatternsRoundTrip) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = f16_bits_to_f32(static_cast<uint16_t>(b));
    double tv = textbook_value(b, 5, 10, 15, true);
    if (std::isnan(tv)) {
      ASSERT_TRUE(std::isnan(f)) << b;
      ASSERT_TRUE(std::isnan(f16_bits_to_f32(f32_to_f16_bits(f)))) << b;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), tv) << b;
    ASSERT_EQ(f32_to_f16_bits(f), b) << b;
    ASSERT_EQ(round_to_dtype(tv, DType::f16), tv) << b;
  }
}

TEST(TensorConversions, F8TablesMatchTextbook) {
  for (uint32_t b = 0; b < 256; ++b) {
    double e4 = textbook_value(b, 4, 3, 7, false), e5 = textbook_value(b, 5, 2, 15, true);
    double g4 = f8e4m3_bits_to_double(static_cast<uint8_t>(b));
    double g5 = f8e5m2_bits_to_double(static_cast<uint8_t>(b));
    if (std::isnan(e4)) EXPECT_TRUE(std::isnan(g4)) << b;
    else {
      EXPECT_EQ(g4, e4) << b;
      EXPECT_EQ(double_to_f8e4m3_bits(g4), b) << b;
    }
    if (std::isnan(e5)) EXPECT_TRUE(std::isnan(g5)) << b;
    else {
      EXPECT_EQ(g5, e5) << b;
      EXPECT_EQ(double_to_f8e5m2_bits(g5), b) << b;
    }
  }
  // The NaN codes of E4M3FN are exactly 0x7f and 0xff; max finite is 448.
  int nans = 0;
  for (uint32_t b = 0; b < 256; ++b) nans += std::isnan(f8e4m3_bits_to_double(b)) ? 1 : 0;
  EXPECT_EQ(nans, 2);
  EXPECT_EQ(f8e4m3_bits_to_double(0x7e), 448.0);
  EXPECT_EQ(f8e5m2_bits_to_double(0x7b), 57344.0);
  EXPECT_EQ(f8e5m2_bits_to_double(0x7c), kInf);
}

TEST(TensorConversions, RoundingMatchesBruteForceOnRandomValues) {
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> expo(-30, 20), mant(-1, 1);
  for (int i = 0; i < 4000; ++i) {
    double x = mant(rng) * std::pow(2.0, expo(rng));
    ASSERT_EQ(double_to_f8e4m3_bits(x), brute_round(x, 4, 3, 7, false, true)) << x;
    ASSERT_EQ(double_to_f8e5m2_bits(x), brute_round(x, 5, 2, 15, true, false)) << x;
    double xf = static_cast<float>(x);  // the f32 entry points take floats
    ASSERT_EQ(f32_to_f16_bits(static_cast<float>(xf)), brute_round(xf, 5, 10, 15, true, false))
        << xf;
  }
  // Exact ties (midpoints between neighbours) of every f8 code go to the even code.
  for (uint32_t c = 0; c + 1 < 0x7e; ++c) {
    double lo = f8e4m3_bits_to_double(c), hi = f8e4m3_bits_to_double(c + 1);
    double mid = (lo + hi) / 2;
    EXPECT_EQ(double_to_f8e4m3_bits(mid), (c & 1) ? c + 1 : c) << c;
    EXPECT_EQ(double_to_f8e4m3_bits(-mid), 0x80 | ((c & 1) ? c + 1 : c)) << c;
  }
  for (uint32_t c = 0; c + 1 < 0x7c; ++c) {
    double mid = (f8e5m2_bits_to_double(c) + f8e5m2_bits_to_double(c + 1)) / 2;
    EXPECT_EQ(double_to_f8e5m2_bits(mid), (c & 1) ? c + 1 : c) << c;
  }
}

TEST(TensorConversions, RoundToNearestEvenTies) {
  // bf16: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> 1 (even); 1 + 3*2^-8 -> 1 + 2^-6.
  EXPECT_EQ(round_to_dtype(1.0 + std::ldexp(1, -8), DType::bf16), 1.0);
  EXPECT_EQ(round_to_dtype(1.0 + 3 * std::ldexp(1, -8), DType::bf16), 1.0 + std::ldexp(1, -6));
  // Just above the tie rounds up (no double rounding through f32: 1 + 2^-8 + 2^-40 is not a
  // float, and rounding it to f32 first would land on the tie and go down).
  EXPECT_EQ(round_to_dtype(1.0 + std::ldexp(1, -8) + std::ldexp(1, -40), DType::bf16),
            1.0 + std::ldexp(1, -7));
  EXPECT_EQ(f32_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(f32_to_bf16_bits(-(1.0f + 3 * std::ldexp(1.0f, -8))), 0xbf82);
  // f16: 2049 is halfway between 2048 and 2050 -> 2048; 2051 -> 2052.
  EXPECT_EQ(round_to_dtype(2049, DType::f16), 2048);
  EXPECT_EQ(round_to_dtype(2051, DType::f16), 2052);
  // f16 overflow: max 65504; 65520 (max + half ulp) is a tie and goes to inf (even).
  EXPECT_EQ(round_to_dtype(65519.99, DType::f16), 65504);
  EXPECT_EQ(round_to_dtype(65520, DType::f16), kInf);
  EXPECT_EQ(round_to_dtype(-1e6, DType::f16), -kInf);
  // f16 subnormals: the smallest is 2^-24; half of it is a tie to 0, a bit more gives 2^-24.
  EXPECT_EQ(round_to_dtype(std::ldexp(1, -25), DType::f16), 0.0);
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0001, -25), DType::f16), std::ldexp(1, -24));
  EXPECT_EQ(round_to_dtype(3 * std::ldexp(1, -25), DType::f16), std::ldexp(2, -24));
  EXPECT_TRUE(std::signbit(round_to_dtype(-1e-30, DType::f16)));
  // bf16 subnormals and overflow.
  EXPECT_EQ(round_to_dtype(std::ldexp(1, -133), DType::bf16), std::ldexp(1, -133));
  EXPECT_EQ(round_to_dtype(std::ldexp(1, -134), DType::bf16), 0.0);
  EXPECT_EQ(round_to_dtype(3.4e38, DType::bf16), kInf);
  EXPECT_EQ(f32_to_bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_TRUE(std::isnan(round_to_dtype(std::nan(""), DType::bf16)));
  // f8e4m3 saturates (also inf), NaN stays NaN; f8e5m2 overflows to inf.
  EXPECT_EQ(round_to_dtype(449, DType::f8e4m3), 448);
  EXPECT_EQ(round_to_dtype(1e9, DType::f8e4m3), 448);
  EXPECT_EQ(round_to_dtype(-kInf, DType::f8e4m3), -448);
  EXPECT_EQ(double_to_f8e4m3_bits(std::nan("")), 0x7f);
  EXPECT_EQ(round_to_dtype(61440, DType::f8e5m2), kInf);  // max 57344 + half ulp: tie to inf
  EXPECT_EQ(round_to_dtype(61439, DType::f8e5m2), 57344);
  EXPECT_EQ(round_to_dtype(-kInf, DType::f8e5m2), -kInf);
  EXPECT_EQ(round_to_dtype(0.1, DType::f32), static_cast<double>(0.1f));
}

TEST(TensorConversions, Integers) {
  EXPECT_EQ(round_to_dtype(7, DType::i32), 7);
  EXPECT_EQ(round_to_dtype(-3, DType::i64), -3);
  EXPECT_EQ(round_to_dtype(2147483648.0, DType::i32), -2147483648.0);  // wraps
  EXPECT_EQ(round_to_dtype(-2147483649.0, DType::i32), 2147483647.0);
  EXPECT_EQ(round_to_dtype(2.5, DType::boolean), 1);
  EXPECT_EQ(round_to_dtype(0, DType::boolean), 0);
  EXPECT_THROW(round_to_dtype(0.5, DType::i32), std::invalid_argument);
  EXPECT_THROW(round_to_dtype(std::nan(""), DType::i64), std::invalid_argument);
  EXPECT_THROW(round_to_dtype(1e19, DType::i64), std::invalid_argument);
}

TEST(Tensor, ShapeStridesAndAccess) {
  Tensor t(DType::f32, {2, 3, 5});
  EXPECT_EQ(t.numel(), 30);
  EXPECT_EQ(t.strides(), (std::vector<int64_t>{15, 5, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.nbytes(), 120u);
  for (int64_t i = 0; i < 30; ++i) EXPECT_EQ(t.get(i), 0.0);
  for (int64_t i = 0; i < 30; ++i) t.set(i, i * 0.5);
  EXPECT_EQ(t.at({1, 2, 3}), (15 + 10 + 3) * 0.5);
  t.set_at({0, 1, 4}, -1);
  EXPECT_EQ(t.get(9), -1);
  EXPECT_THROW(t.at({2, 0, 0}), std::out_of_range);
  EXPECT_THROW(t.at({0, 0}), std::out_of_range);
  Tensor s(DType::f32, {});
  EXPECT_EQ(s.numel(), 1);
  s.set(0, 4);
  EXPECT_EQ(s.at({}), 4);
  Tensor z(DType::bf16, {3, 0, 2});
  EXPECT_EQ(z.numel(), 0);
  EXPECT_EQ(z.to(DType::f32).numel(), 0);
}

TEST(Tensor, StridedViewAndContiguousCopy) {
  // A 3x4 tensor, viewed as its 4x3 transpose.
  Tensor t(DType::i32, {3, 4});
  for (int64_t i = 0; i < 12; ++i) t.set(i, i);
  Tensor tr = t.with_strides({4, 3}, {1, 4});
  EXPECT_FALSE(tr.is_contiguous());
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(tr.at({r, c}), c * 4 + r);
  Tensor c = tr.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(c.get(i), (i % 3) * 4 + i / 3);
  // Views share storage; the copy does not.
  t.set(1, 100);
  EXPECT_EQ(tr.at({1, 0}), 100);
  EXPECT_EQ(c.at({1, 0}), 1);
  EXPECT_THROW(t.with_strides({4, 4}, {1, 4}), std::invalid_argument);
  // Broadcast view (stride 0).
  Tensor b = t.with_strides({5, 4}, {0, 1});
  EXPECT_EQ(b.at({4, 3}), 3);
}

TEST(Tensor, ConversionsBetweenDtypes) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> nd;
  Tensor f(DType::f64, {7, 13});
  for (int64_t i = 0; i < f.numel(); ++i) f.set(i, nd(rng) * 100);
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::f8e4m3, DType::f8e5m2}) {
    Tensor g = f.to(t);
    EXPECT_EQ(g.dtype(), t);
    EXPECT_EQ(g.nbytes(), static_cast<size_t>(91 * dtype_bytes(t)));
    for (int64_t i = 0; i < f.numel(); ++i) EXPECT_EQ(g.get(i), round_to_dtype(f.get(i), t));
  }
  // i64 -> i32 -> i64 exact; big i64 values survive a copy exactly (no trip through double).
  Tensor a(DType::i64, {2});
  int64_t big = (int64_t{1} << 60) + 1;
  std::memcpy(a.data(), &big, 8);
  Tensor a2 = a.to(DType::i64);
  int64_t back;
  std::memcpy(&back, a2.data(), 8);
  EXPECT_EQ(back, big);
  Tensor bl = a.to(DType::boolean);
  EXPECT_EQ(bl.get(0), 1);
  EXPECT_EQ(bl.get(1), 0);
  Tensor ff(DType::f32, {1});
  ff.set(0, 2.5);
  EXPECT_THROW(ff.to(DType::i32), std::invalid_argument);
}

// A tensor with a zero extent holds nothing, whatever its other extents: even extents whose
// product passes int64 (an .npy header found by the fuzzer) make an empty, contiguous tensor,
// with no signed overflow on the way (the sanitizer build checks that).
TEST(Tensor, ZeroExtentBesideHugeOnesIsEmpty) {
  Tensor t(DType::f32, {0, 2, 1, 5555555555552, 1, 55555555552});
  EXPECT_EQ(t.numel(), 0);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.strides().back(), 1);
}

}  // namespace
}  // namespace flashgen
