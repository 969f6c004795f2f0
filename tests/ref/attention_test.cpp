// The reference evaluator against independent hand-written loops (no evaluator code): vanilla,
// causal with logsumexp, ALiBi with grouped-query heads, document masking with gathers and
// soft-capping, on random inputs at odd sizes with m != n; plus a size the other suites use
// (b=1, h=2, m=n=256, d=64) to keep the evaluator fast enough. The loops compute in f64 while
// the reference rounds each f32 value (docs/language.md §5): they agree to f32 accuracy.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <vector>

#include "flashgen/builder.h"
#include "flashgen/ref.h"

namespace flashgen {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

struct Size {
  int64_t b, h, m, n, d, e;
};
const Size kSizes[] = {{1, 1, 1, 1, 1, 1}, {2, 3, 7, 77, 5, 3}, {1, 2, 77, 7, 16, 9},
                       {1, 1, 33, 41, 64, 32}};

std::vector<double> flat(const Tensor& t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.get(i);
  return v;
}

// Row-wise softmax-weighted sum: o[e] = sum_j p_j v[j][e], lse = log sum_j exp(s_j); rows of
// all -inf give o = 0 and lse = -inf. Written independently of the evaluator.
void attend_row(const std::vector<double>& s, const std::vector<const double*>& vrows, int64_t E,
                double* o, double* lse) {
  double mx = -kInf;
  for (double x : s) mx = std::max(mx, x);
  double z = 0;
  std::vector<double> w(s.size(), 0.0);
  if (mx != -kInf)
    for (size_t j = 0; j < s.size(); ++j) z += (w[j] = std::exp(s[j] - mx));
  for (int64_t e = 0; e < E; ++e) {
    double acc = 0;
    for (size_t j = 0; j < s.size(); ++j) acc += w[j] * vrows[j][e];
    o[e] = z == 0 ? 0.0 : acc / z;
  }
  if (lse) *lse = mx == -kInf ? -kInf : mx + std::log(z);
}

void expect_close(const Tensor& got, const std::vector<double>& want, double tol,
                  const char* what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    double g = got.get(static_cast<int64_t>(i));
    if (std::isinf(want[i])) {
      ASSERT_EQ(g, want[i]) << what << " element " << i;
    } else {
      ASSERT_NEAR(g, want[i], tol * std::max(1.0, std::fabs(want[i]))) << what << " element " << i;
    }
  }
}

// Rounded outputs are the f64 outputs rounded to their declared type, in the same layout.
void expect_rounded(const Program& p, const TensorMap& in, const TensorMap& f64) {
  TensorMap r = evaluate_reference(p, in);
  for (const Output& o : p.outputs) {
    const Tensor& a = r.at(o.name);
    ASSERT_EQ(a.dtype(), o.type);
    ASSERT_EQ(a.shape(), f64.at(o.name).shape());
    for (int64_t i = 0; i < a.numel(); ++i)
      ASSERT_EQ(a.get(i), round_to_dtype(f64.at(o.name).get(i), o.type)) << o.name << " " << i;
  }
}

Program causal_program(bool mask) {
  ProgramBuilder b(mask ? "causal" : "vanilla");
  auto q = b.param("q", DType::bf16, {"b", "h", "m", "d"});
  auto k = b.param("k", DType::bf16, {"b", "h", "n", "d"});
  auto v = b.param("v", DType::bf16, {"b", "h", "n", "e"});
  auto s = b.sum(q * k, {"d"}) / b.sqrt(b.size("d"));
  if (mask) s = b.where(b.index("n") <= b.index("m"), s, -b.inf());
  b.output("o", DType::bf16, {"b", "h", "m", "e"}, b.sum(b.softmax(s, "n") * v, {"n"}));
  b.output("lse", DType::f32, {"b", "h", "m"}, b.logsumexp(s, "n"));
  return b.build();
}

TEST(RefAttention, VanillaAndCausalMatchLoops) {
  for (bool mask : {false, true}) {
    Program p = causal_program(mask);
    for (const Size& z : kSizes) {
      Extents ext = {{"b", z.b}, {"h", z.h}, {"m", z.m}, {"n", z.n}, {"d", z.d}, {"e", z.e}};
      TensorMap in = random_inputs(p, ext, 1000 + z.m);
      auto q = flat(in.at("q")), k = flat(in.at("k")), v = flat(in.at("v"));
      std::vector<double> o(z.b * z.h * z.m * z.e), lse(z.b * z.h * z.m);
      for (int64_t bb = 0; bb < z.b; ++bb)
        for (int64_t hh = 0; hh < z.h; ++hh)
          for (int64_t i = 0; i < z.m; ++i) {
            std::vector<double> s(z.n);
            std::vector<const double*> vrows(z.n);
            for (int64_t j = 0; j < z.n; ++j) {
              double acc = 0;
              for (int64_t dd = 0; dd < z.d; ++dd)
                acc += q[((bb * z.h + hh) * z.m + i) * z.d + dd] *
                       k[((bb * z.h + hh) * z.n + j) * z.d + dd];
              s[j] = (mask && j > i) ? -kInf : acc / std::sqrt(static_cast<double>(z.d));
              vrows[j] = &v[((bb * z.h + hh) * z.n + j) * z.e];
            }
            int64_t row = (bb * z.h + hh) * z.m + i;
            attend_row(s, vrows, z.e, &o[row * z.e], &lse[row]);
          }
      TensorMap out = evaluate_reference_f64(p, in);
      expect_close(out.at("o"), o, 1e-5, "o");
      expect_close(out.at("lse"), lse, 1e-5, "lse");
      expect_rounded(p, in, out);
    }
  }
}

TEST(RefAttention, AlibiGqaMatchesLoops) {
  // docs/language.md's first program: g groups of r query heads, slope per head.
  ProgramBuilder b("alibi_gqa");
  auto q = b.param("q", DType::bf16, {"b", "g", "r", "m", "d"});
  auto k = b.param("k", DType::bf16, {"b", "g", "n", "d"});
  auto v = b.param("v", DType::bf16, {"b", "g", "n", "e"});
  auto slope = b.param("slope", DType::f32, {"g", "r"});
  auto s = b.sum(q * k, {"d"}) / b.sqrt(b.size("d"));
  s = b.where(b.index("n") <= b.index("m"), s + slope * (b.index("n") - b.index("m")), -b.inf());
  b.output("o", DType::bf16, {"b", "g", "r", "m", "e"}, b.sum(b.softmax(s, "n") * v, {"n"}));
  Program p = b.build();
  for (const Size& z : kSizes) {
    const int64_t G = z.h, R = 3;
    Extents ext = {{"b", z.b}, {"g", G}, {"r", R}, {"m", z.m}, {"n", z.n}, {"d", z.d},
                   {"e", z.e}};
    TensorMap in = random_inputs(p, ext, 7 + z.n);
    auto qv = flat(in.at("q")), kv = flat(in.at("k")), vv = flat(in.at("v")),
         sl = flat(in.at("slope"));
    std::vector<double> o(z.b * G * R * z.m * z.e);
    for (int64_t bb = 0; bb < z.b; ++bb)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t r = 0; r < R; ++r)
          for (int64_t i = 0; i < z.m; ++i) {
            std::vector<double> s(z.n);
            std::vector<const double*> vrows(z.n);
            for (int64_t j = 0; j < z.n; ++j) {
              double acc = 0;
              for (int64_t dd = 0; dd < z.d; ++dd)
                acc += qv[(((bb * G + g) * R + r) * z.m + i) * z.d + dd] *
                       kv[((bb * G + g) * z.n + j) * z.d + dd];
              s[j] = j > i ? -kInf
                           : acc / std::sqrt(static_cast<double>(z.d)) +
                                 sl[g * R + r] * static_cast<double>(j - i);
              vrows[j] = &vv[((bb * G + g) * z.n + j) * z.e];
            }
            attend_row(s, vrows, z.e, &o[(((bb * G + g) * R + r) * z.m + i) * z.e], nullptr);
          }
    TensorMap out = evaluate_reference_f64(p, in);
    // Scores with biases of hundreds carry f32 roundings of ~1e-5 each.
    expect_close(out.at("o"), o, 1e-4, "o");
    expect_rounded(p, in, out);
  }
}

TEST(RefAttention, DocumentMaskSoftcapAndGateMatchLoops) {
  // Gathers in the mask (doc[m] == doc[n]), soft-capping, a sigmoid gate, and an output laid
  // out in a different order than the dimensions were declared ([m, h, e]).
  ProgramBuilder b("doc_softcap");
  auto q = b.param("q", DType::f16, {"h", "m", "d"});
  auto k = b.param("k", DType::f16, {"h", "n", "d"});
  auto v = b.param("v", DType::f32, {"h", "n", "e"});
  auto g = b.param("g", DType::bf16, {"h", "m", "e"});
  b.param("doc", DType::i32, {"t"});
  auto s = b.sum(q * k, {"d"}) / b.sqrt(b.size("d"));
  s = 30 * b.tanh(s / 30);
  s = b.where(b.gather("doc", {b.index("m")}) == b.gather("doc", {b.index("n")}) &&
                  b.index("n") <= b.index("m"),
              s, -b.inf());
  b.output("o", DType::f32, {"m", "h", "e"}, b.sum(b.softmax(s, "n") * v, {"n"}) * b.sigmoid(g));
  Program p = b.build();
  for (const Size& z : kSizes) {
    if (z.n < z.m) continue;  // doc is indexed by m and n: t = n >= m
    Extents ext = {{"h", z.h}, {"m", z.m}, {"n", z.n}, {"d", z.d}, {"e", z.e}, {"t", z.n}};
    TensorMap in = random_inputs(p, ext, 99);
    auto qv = flat(in.at("q")), kv = flat(in.at("k")), vv = flat(in.at("v")),
         gv = flat(in.at("g")), doc = flat(in.at("doc"));
    for (int64_t i = 0; i < z.n; ++i) {
      EXPECT_GE(doc[i], 0);
      EXPECT_LT(doc[i], 4);  // compared, not used as an index
    }
    std::vector<double> o(z.m * z.h * z.e);
    for (int64_t hh = 0; hh < z.h; ++hh)
      for (int64_t i = 0; i < z.m; ++i) {
        std::vector<double> s(z.n);
        std::vector<const double*> vrows(z.n);
        for (int64_t j = 0; j < z.n; ++j) {
          double acc = 0;
          for (int64_t dd = 0; dd < z.d; ++dd)
            acc += qv[(hh * z.m + i) * z.d + dd] * kv[(hh * z.n + j) * z.d + dd];
          double x = 30 * std::tanh(acc / std::sqrt(static_cast<double>(z.d)) / 30);
          s[j] = (doc[i] == doc[j] && j <= i) ? x : -kInf;
          vrows[j] = &vv[(hh * z.n + j) * z.e];
        }
        std::vector<double> row(z.e);
        attend_row(s, vrows, z.e, row.data(), nullptr);
        for (int64_t e = 0; e < z.e; ++e)
          o[(i * z.h + hh) * z.e + e] =
              row[e] / (1 + std::exp(-gv[(hh * z.m + i) * z.e + e]));
      }
    TensorMap out = evaluate_reference_f64(p, in);
    ASSERT_EQ(out.at("o").shape(), (std::vector<int64_t>{z.m, z.h, z.e}));
    expect_close(out.at("o"), o, 1e-5, "o");
    expect_rounded(p, in, out);
  }
}

TEST(RefAttention, TestSizedProblemIsFast) {
  Program p = causal_program(true);
  Extents ext = {{"b", 1}, {"h", 2}, {"m", 256}, {"n", 256}, {"d", 64}, {"e", 64}};
  TensorMap in = random_inputs(p, ext, 5);
  auto t0 = std::chrono::steady_clock::now();
  TensorMap out = evaluate_reference(p, in);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Spot-check one row against a loop.
  auto q = flat(in.at("q")), k = flat(in.at("k")), v = flat(in.at("v"));
  const int64_t i = 200, hh = 1;
  std::vector<double> s(256);
  std::vector<const double*> vrows(256);
  for (int64_t j = 0; j < 256; ++j) {
    double acc = 0;
    for (int64_t dd = 0; dd < 64; ++dd)
      acc += q[((hh * 256) + i) * 64 + dd] * k[((hh * 256) + j) * 64 + dd];
    s[j] = j > i ? -kInf : acc / 8;
    vrows[j] = &v[(hh * 256 + j) * 64];
  }
  std::vector<double> o(64);
  double lse;
  attend_row(s, vrows, 64, o.data(), &lse);
  for (int64_t e = 0; e < 64; ++e)
    EXPECT_EQ(out.at("o").at({0, hh, i, e}), round_to_dtype(o[e], DType::bf16)) << e;
  EXPECT_EQ(out.at("lse").at({0, hh, i}), round_to_dtype(lse, DType::f32));
  EXPECT_LT(secs, 20.0);  // about 0.1 s on one core; generous for slow CI machines
  std::printf("[ reference b=1 h=2 m=n=256 d=e=64: %.3f s ]\n", secs);
}

}  // namespace
}  // namespace flashgen
