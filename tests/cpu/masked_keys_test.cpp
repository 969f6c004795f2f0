// The language's rule for masked keys (docs/language.md §8 "Masked keys"): multiplication has a
// strong zero (0 * NaN = 0 * inf = 0), so a key whose softmax weight is 0 — its score is -inf —
// contributes nothing to the row, whatever its values hold, whether the compiled kernel skips
// the key's tile, masks it inside a partial tile or runs a full tile. The reference and the CPU
// backend must both follow it: NaN and +-inf values are planted behind skipped, partial and
// full tiles of index masks and of data masks, and the expected pattern of non-finite outputs
// is computed here independently (a row sees a non-finite value only from a key it attends).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "compiler/pipeline.h"
#include "flashgen/compile.h"
#include "flashgen/flashgen.h"
#include "support/support.h"

namespace flashgen {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// What a row's output column holds when it attends the keys `keys` of v (per key, per column):
// NaN if one of them is NaN or both infinities appear, else the infinity that appears, else 0
// (a finite value).
double expected_kind(const Tensor& v, const std::vector<int64_t>& keys, int64_t col) {
  bool nan = false, pos = false, neg = false;
  for (int64_t n : keys) {
    double x = v.at({n, col});
    nan = nan || std::isnan(x);
    pos = pos || x == kInf;
    neg = neg || x == -kInf;
  }
  if (nan || (pos && neg)) return kNaN;
  if (pos) return kInf;
  if (neg) return -kInf;
  return 0;
}

bool same_kind(double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::isfinite(got);
}

// Runs `p` on ref and cpu and checks, for every row m and column e, the kind of o[m, e] against
// the keys `attends(m)` selects, and that finite values agree between the two backends.
template <class Attends>
void check_rows(const Program& p, const TensorMap& in, int64_t M, int64_t E, Attends attends) {
  const Tensor& v = in.at("v");
  const int64_t N = v.shape()[0];
  TensorMap ref = evaluate_reference(p, in);
  TensorMap cpu = run_cpu(p, in);
  int nonfinite_rows = 0, finite_rows = 0;
  for (int64_t m = 0; m < M; ++m) {
    std::vector<int64_t> keys;
    for (int64_t n = 0; n < N; ++n)
      if (attends(m, n)) keys.push_back(n);
    bool any = false;
    for (int64_t e = 0; e < E; ++e) {
      const double want = expected_kind(v, keys, e);
      any = any || !std::isfinite(want);
      const double r = ref.at("o").at({m, e}), c = cpu.at("o").at({m, e});
      EXPECT_TRUE(same_kind(r, want)) << "ref o[" << m << ", " << e << "] = " << r;
      EXPECT_TRUE(same_kind(c, want)) << "cpu o[" << m << ", " << e << "] = " << c;
      if (std::isfinite(r) && std::isfinite(c)) EXPECT_NEAR(c, r, 1e-4) << m << ", " << e;
    }
    (any ? nonfinite_rows : finite_rows)++;
  }
  // The planted values must matter for some rows and be masked away for others.
  EXPECT_GT(nonfinite_rows, 0);
  EXPECT_GT(finite_rows, 0);
}

TensorMap inputs(int64_t M, int64_t N, int64_t D, int64_t E, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g;
  TensorMap in;
  for (auto [name, rows, cols] : {std::tuple{"q", M, D}, {"k", N, D}, {"v", N, E}}) {
    Tensor t(DType::f32, {rows, cols});
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, g(rng));
    in[name] = t;
  }
  // Non-finite values spread over the keys: behind tiles that are skipped for some row blocks,
  // partial on the diagonal and full for late rows.
  Tensor& v = in["v"];
  for (int64_t n : {33L, 40L, 75L, 131L, 200L, N - 1}) v.set_at({n % N, n % E}, kNaN);
  for (int64_t n : {17L, 90L, 160L}) v.set_at({n % N, (n + 1) % E}, kInf);
  for (int64_t n : {18L, 91L, 240L}) v.set_at({n % N, (n + 1) % E}, -kInf);
  return in;
}

TEST(MaskedKeys, NonFiniteValuesBehindAnIndexMask) {
  const int64_t M = 150, N = 257, D = 8, E = 5;
  Program p = parse_source(
      "program p(q: f32[m, d], k: f32[n, d], v: f32[n, e]) {\n"
      "  s = where(n <= m + 10, sum(q * k, d), -inf)\n"
      "  out o: f32[m, e] = sum(softmax(s, n) * v, n)\n"
      "}\n", "t.attn").at(0);
  check_rows(p, inputs(M, N, D, E, 1), M, E, [](int64_t m, int64_t n) { return n <= m + 10; });
}

TEST(MaskedKeys, NonFiniteValuesBehindASlidingWindow) {
  const int64_t M = 200, N = 256, D = 4, E = 3;
  Program p = parse_source(
      "program p(q: f32[m, d], k: f32[n, d], v: f32[n, e]) {\n"
      "  s = where(n <= m and n > m - 48, sum(q * k, d), -inf)\n"
      "  out o: f32[m, e] = sum(softmax(s, n) * v, n)\n"
      "}\n", "t.attn").at(0);
  check_rows(p, inputs(M, N, D, E, 2), M, E,
             [](int64_t m, int64_t n) { return n <= m && n > m - 48; });
}

// A data mask: documents of sorted ids; the CPU classifier bounds tiles by the ids they read.
TEST(MaskedKeys, NonFiniteValuesBehindADocumentMask) {
  const int64_t M = 180, N = 180, D = 4, E = 4;
  Program p = parse_source(
      "program p(q: f32[m, d], k: f32[n, d], v: f32[n, e], doc: i32[t]) {\n"
      "  s = where(doc[m] == doc[n], sum(q * k, d), -inf)\n"
      "  out o: f32[m, e] = sum(softmax(s, n) * v, n)\n"
      "}\n", "t.attn").at(0);
  TensorMap in = inputs(M, N, D, E, 3);
  Tensor doc(DType::i32, {N});
  std::vector<int64_t> id(N);
  for (int64_t i = 0; i < N; ++i) id[i] = i < 37 ? 0 : i < 100 ? 1 : i < 101 ? 2 : 3;
  for (int64_t i = 0; i < N; ++i) doc.set(i, static_cast<double>(id[i]));
  in["doc"] = doc;
  check_rows(p, in, M, E, [&](int64_t m, int64_t n) { return id[m] == id[n]; });
}

// A weight that underflows to 0 also removes its term (0 * inf = 0 * NaN = 0), whether the
// kernel's running max already excludes the key or a later rescale underflows to 0.
TEST(MaskedKeys, AnUnderflowedWeightRemovesItsTermAfterARescale) {
  Program p = parse_source(
      "program p(s: f32[m, n], v: f32[n, e]) {\n"
      "  out o: f32[m, e] = sum(softmax(s, n) * v, n)\n"
      "}\n", "t.attn").at(0);
  const int64_t M = 3, N = 300, E = 2;
  TensorMap in;
  Tensor s(DType::f32, {M, N}), v(DType::f32, {N, E});
  for (int64_t i = 0; i < s.numel(); ++i) s.set(i, 0.01 * static_cast<double>(i % 7));
  for (int64_t i = 0; i < v.numel(); ++i) v.set(i, 1.0);
  // Key 0 has a score 1e30 below the others: its weight is exactly 0 after rounding.
  for (int64_t m = 0; m < M; ++m) s.set_at({m, 0}, -1e30);
  v.set_at({0, 0}, kInf);
  v.set_at({0, 1}, kNaN);
  in["s"] = s;
  in["v"] = v;
  TensorMap ref = evaluate_reference(p, in), cpu = run_cpu(p, in);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t e = 0; e < E; ++e) {
      EXPECT_NEAR(ref.at("o").at({m, e}), 1.0, 1e-6) << m << ", " << e;
      EXPECT_NEAR(cpu.at("o").at({m, e}), 1.0, 1e-6) << m << ", " << e;
    }
}

// docs/language.md §8, the choice on call-time errors: an out-of-range gather that only masked
// elements would read is reported by the reference (it computes every element) and not by the
// CPU backend, which never reads a key tile the mask removes entirely; its result is then the
// same as the reference's on the keys the mask keeps.
TEST(MaskedKeys, AGatherOutOfRangeOnlyBehindSkippedTilesIsNotRead) {
  Program p = parse_source(
      "program p(q: f32[m, d], k: f32[n, d], v: f32[n, e], bias: f32[r]) {\n"
      "  s = where(n < size(r), sum(q * k, d) + bias[n], -inf)\n"
      "  out o: f32[m, e] = sum(softmax(s, n) * v, n)\n"
      "}\n", "t.attn").at(0);
  // R: one key tile of the CPU kernel, so keys >= R fill whole masked tiles.
  const int64_t R = compile_program(p, CompileOptions{}).plan.kernels[0].red_tile;
  const int64_t M = 40, N = 3 * R + 8, D = 8, E = 5;
  TensorMap in = inputs(M, N, D, E, 17);
  for (int64_t n = 0; n < N; ++n)  // finite values: only the reads differ
    for (int64_t e = 0; e < E; ++e)
      if (!std::isfinite(in["v"].at({n, e}))) in["v"].set_at({n, e}, 0.5);
  std::mt19937_64 rng(3);
  in["bias"] = testing::random_float_tensor(DType::f32, {R}, rng);
  Extents ext = {{"r", R}};
  EXPECT_THROW(evaluate_reference(p, in, ext), CallError);  // bias[R..N) is out of range
  TensorMap cpu = run_cpu(p, in, ext);
  // The reference on the keys the mask keeps (n < R) gives the same output.
  TensorMap kept = in;
  for (const char* name : {"k", "v"}) {
    const Tensor& t = in.at(name);
    Tensor c(DType::f32, {R, t.shape()[1]});
    for (int64_t n = 0; n < R; ++n)
      for (int64_t j = 0; j < t.shape()[1]; ++j) c.set_at({n, j}, t.at({n, j}));
    kept[name] = c;
  }
  TensorMap want = evaluate_reference(p, kept, ext);
  EXPECT_EQ(testing::compare_tensors(cpu.at("o"), want.at("o"), 1e-5), "");
}

}  // namespace
}  // namespace flashgen
