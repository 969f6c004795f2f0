// Every program in examples/ against an independent, hand-written C++ loop (not the reference
// evaluator), on random inputs at odd sizes (extents 1, 7, 77, m != n), with fully masked rows
// where the mask allows them. The loops compute in f64 from the same (already rounded) inputs;
// the reference rounds every f32 value to f32 (docs/language.md §5), so they must agree with
// evaluate_reference_f64 to 1e-5 of the output's scale (a few f32 roundings), and with
// evaluate_reference (outputs rounded to their dtype) to one unit in the last place beyond that.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <random>
#include <set>

#include "flashgen/flashgen.h"
#include "support/support.h"

namespace flashgen {
namespace {

using testing::random_bool_tensor;
using testing::random_float_tensor;
using testing::random_int_tensor;
using Shape = std::vector<int64_t>;

double at(const Tensor& t, std::initializer_list<int64_t> idx) {
  return t.at(std::vector<int64_t>(idx));
}

// Row-wise softmax probabilities P[m][n] of scores given by `score` (-inf is masked). A row
// with every score -inf gets all-zero probabilities and an lse of -inf.
struct Probs {
  int64_t M, N;
  std::vector<double> p, lse;
  double operator()(int64_t m, int64_t n) const { return p[m * N + n]; }
};
Probs softmax_rows(int64_t M, int64_t N, const std::function<double(int64_t, int64_t)>& score) {
  Probs r{M, N, std::vector<double>(M * N, 0.0), std::vector<double>(M, -INFINITY)};
  std::vector<double> s(N);
  for (int64_t m = 0; m < M; ++m) {
    double mx = -INFINITY;
    for (int64_t n = 0; n < N; ++n) mx = std::max(mx, s[n] = score(m, n));
    if (mx == -INFINITY) continue;
    double z = 0;
    for (int64_t n = 0; n < N; ++n) z += std::exp(s[n] - mx);
    for (int64_t n = 0; n < N; ++n) r.p[m * N + n] = std::exp(s[n] - mx) / z;
    r.lse[m] = mx + std::log(z);
  }
  return r;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// The smallest gap between values of `t` near |x| (its unit in the last place).
double ulp(double x, DType t) {
  int mant = t == DType::bf16 ? 7 : t == DType::f16 ? 10 : 23;
  int min_exp = t == DType::f16 ? -14 : -126;
  int e = x == 0 ? min_exp : std::max(min_exp, std::ilogb(x));
  return std::ldexp(1.0, e - mant);
}

// Checks example `name` (examples/<name>.attn, one program of that name) on `inputs` against
// `want`: f64 outputs of the hand-written loop, in the outputs' declared shapes.
void check_example(const std::string& name, const TensorMap& inputs, const TensorMap& want) {
  std::vector<Program> programs = parse_file(testing::source_path("examples/" + name + ".attn"));
  ASSERT_EQ(programs.size(), 1u);
  const Program& p = programs[0];
  ASSERT_EQ(p.name, name);
  ASSERT_EQ(p.outputs.size(), want.size());
  TensorMap exact = evaluate_reference_f64(p, inputs);
  TensorMap rounded = evaluate_reference(p, inputs);
  for (const Output& out : p.outputs) {
    SCOPED_TRACE("output " + out.name);
    ASSERT_TRUE(want.count(out.name));
    const Tensor& w = want.at(out.name);
    const Tensor& e = exact.at(out.name);
    const Tensor& r = rounded.at(out.name);
    ASSERT_EQ(e.shape(), w.shape());
    ASSERT_EQ(r.shape(), w.shape());
    EXPECT_EQ(r.dtype(), out.type);
    double tol = 1e-5 * std::max(1.0, testing::max_abs(w));
    std::string diff = testing::compare_tensors(e, w, tol);
    EXPECT_EQ(diff, "");
    int64_t bad = 0;
    for (int64_t i = 0; i < w.numel(); ++i) {
      double wi = round_to_dtype(w.get(i), out.type), ri = r.get(i);
      bool ok = std::isfinite(wi) ? std::abs(ri - wi) <= ulp(wi, out.type) + tol : ri == wi;
      if (!ok && bad++ < 3) ADD_FAILURE() << "rounded output at " << i << ": " << ri
                                          << ", loop " << w.get(i) << " rounds to " << wi;
    }
    EXPECT_EQ(bad, 0);
  }
}

struct Sizes {
  int64_t b, h, m, n, d, e;
};
const std::vector<Sizes> kSizes = {{1, 1, 1, 1, 1, 1}, {2, 3, 7, 77, 5, 3}, {1, 2, 77, 7, 7, 1},
                                   {1, 1, 33, 20, 64, 9}};

// The [b, h, m, e] output of softmax(score) · v for standard [b, h, n, e] values v.
Tensor attend_bhme(const Sizes& z, const Tensor& v,
                   const std::function<double(int64_t, int64_t, int64_t, int64_t)>& score) {
  Tensor o(DType::f64, {z.b, z.h, z.m, z.e});
  for (int64_t b = 0; b < z.b; ++b)
    for (int64_t h = 0; h < z.h; ++h) {
      Probs P = softmax_rows(z.m, z.n, [&](int64_t m, int64_t n) { return score(b, h, m, n); });
      for (int64_t m = 0; m < z.m; ++m)
        for (int64_t e = 0; e < z.e; ++e) {
          double acc = 0;
          for (int64_t n = 0; n < z.n; ++n) acc += P(m, n) * at(v, {b, h, n, e});
          o.set_at({b, h, m, e}, acc);
        }
    }
  return o;
}

// q·k / sqrt(d) for standard [b, h, m|n, d] tensors.
double qk(const Tensor& q, const Tensor& k, int64_t b, int64_t h, int64_t m, int64_t n) {
  const int64_t D = q.shape()[3];
  double acc = 0;
  for (int64_t d = 0; d < D; ++d) acc += at(q, {b, h, m, d}) * at(k, {b, h, n, d});
  return acc / std::sqrt(static_cast<double>(D));
}

struct Qkv {
  Tensor q, k, v;
};
Qkv random_qkv(const Sizes& z, std::mt19937_64& rng, double q_scale = 1.0) {
  return {random_float_tensor(DType::bf16, {z.b, z.h, z.m, z.d}, rng, q_scale),
          random_float_tensor(DType::bf16, {z.b, z.h, z.n, z.d}, rng),
          random_float_tensor(DType::bf16, {z.b, z.h, z.n, z.e}, rng)};
}

// A test for a [b, h, m|n, d|e] example whose score is given by `score` (mask included).
void check_bhmn_example(
    const std::string& name, const std::vector<Sizes>& sizes, double q_scale,
    const std::function<double(const Qkv&, int64_t, int64_t, int64_t, int64_t)>& score) {
  std::mt19937_64 rng(12345);
  for (const Sizes& z : sizes) {
    SCOPED_TRACE(name + " b=" + std::to_string(z.b) + " h=" + std::to_string(z.h) +
                 " m=" + std::to_string(z.m) + " n=" + std::to_string(z.n) +
                 " d=" + std::to_string(z.d) + " e=" + std::to_string(z.e));
    Qkv t = random_qkv(z, rng, q_scale);
    Tensor o = attend_bhme(z, t.v, [&](int64_t b, int64_t h, int64_t m, int64_t n) {
      return score(t, b, h, m, n);
    });
    check_example(name, {{"q", t.q}, {"k", t.k}, {"v", t.v}}, {{"o", o}});
  }
}

// The backends' example tests run over testing::example_names(): it must list every file in
// examples/, so a new example is tested everywhere without editing the test lists.
TEST(Examples, TheExampleListHasEveryExampleFile) {
  std::set<std::string> files, listed(testing::example_names().begin(),
                                      testing::example_names().end());
  for (const auto& f : std::filesystem::directory_iterator(testing::source_path("examples")))
    if (f.path().extension() == ".attn") files.insert(f.path().stem().string());
  EXPECT_EQ(files, listed);
}

TEST(Examples, Vanilla) {
  check_bhmn_example("vanilla", kSizes, 1.0, [](const Qkv& t, auto b, auto h, auto m, auto n) {
    return qk(t.q, t.k, b, h, m, n);
  });
}

TEST(Examples, Causal) {
  check_bhmn_example("causal", kSizes, 1.0, [](const Qkv& t, auto b, auto h, auto m, auto n) {
    return n <= m ? qk(t.q, t.k, b, h, m, n) : -INFINITY;
  });
}

TEST(Examples, Softcap) {
  // Large queries push the scores well past the cap of 30.
  check_bhmn_example("softcap", kSizes, 40.0, [](const Qkv& t, auto b, auto h, auto m, auto n) {
    return 30.0 * std::tanh(qk(t.q, t.k, b, h, m, n) / 30.0);
  });
}

TEST(Examples, SlidingWindow) {
  // m = 300 > n + 256: the last rows see no key at all (fully masked, output 0).
  std::vector<Sizes> sizes = kSizes;
  sizes.push_back({1, 2, 300, 7, 3, 2});
  sizes.push_back({1, 1, 300, 290, 2, 2});
  check_bhmn_example("sliding_window", sizes, 1.0,
                     [](const Qkv& t, auto b, auto h, auto m, auto n) {
                       return n <= m && m - n <= 256 ? qk(t.q, t.k, b, h, m, n) : -INFINITY;
                     });
}

TEST(Examples, PrefixLm) {
  std::vector<Sizes> sizes = kSizes;
  sizes.push_back({1, 2, 7, 300, 3, 2});
  sizes.push_back({1, 1, 290, 280, 2, 1});
  check_bhmn_example("prefix_lm", sizes, 1.0, [](const Qkv& t, auto b, auto h, auto m, auto n) {
    return n <= m || n < 256 ? qk(t.q, t.k, b, h, m, n) : -INFINITY;
  });
}

TEST(Examples, Alibi) {
  std::mt19937_64 rng(7);
  for (const Sizes& z : kSizes) {
    Qkv t = random_qkv(z, rng);
    Tensor slope(DType::f32, {z.h});
    for (int64_t h = 0; h < z.h; ++h) slope.set(h, std::exp2(-8.0 * (h + 1) / z.h));
    Tensor o = attend_bhme(z, t.v, [&](int64_t b, int64_t h, int64_t m, int64_t n) {
      return n <= m ? qk(t.q, t.k, b, h, m, n) + at(slope, {h}) * double(n - m) : -INFINITY;
    });
    check_example("alibi", {{"q", t.q}, {"k", t.k}, {"v", t.v}, {"slope", slope}}, {{"o", o}});
  }
}

TEST(Examples, Lse) {
  std::mt19937_64 rng(8);
  for (const Sizes& z : kSizes) {
    Qkv t = random_qkv(z, rng);
    Tensor o(DType::f64, {z.b, z.h, z.m, z.e}), lse(DType::f64, {z.b, z.h, z.m});
    for (int64_t b = 0; b < z.b; ++b)
      for (int64_t h = 0; h < z.h; ++h) {
        Probs P = softmax_rows(z.m, z.n, [&](int64_t m, int64_t n) {
          return n <= m ? qk(t.q, t.k, b, h, m, n) : -INFINITY;
        });
        for (int64_t m = 0; m < z.m; ++m) {
          lse.set_at({b, h, m}, P.lse[m]);
          for (int64_t e = 0; e < z.e; ++e) {
            double acc = 0;
            for (int64_t n = 0; n < z.n; ++n) acc += P(m, n) * at(t.v, {b, h, n, e});
            o.set_at({b, h, m, e}, acc);
          }
        }
      }
    check_example("lse", {{"q", t.q}, {"k", t.k}, {"v", t.v}}, {{"o", o}, {"lse", lse}});
  }
}

TEST(Examples, Document) {
  std::mt19937_64 rng(9);
  std::vector<Sizes> sizes = kSizes;
  sizes.push_back({2, 2, 77, 7, 3, 2});
  for (const Sizes& z : sizes) {
    Qkv t = random_qkv(z, rng);
    const int64_t T = std::max(z.m, z.n) + 3;
    // Keys 0..n-1 hold documents 0..2; later positions also take ids 3..5 that no key has, so
    // with m > n some queries see no key at all (fully masked rows).
    Tensor doc(DType::i32, {T});
    std::uniform_int_distribution<int> id(0, 5);
    for (int64_t i = 0; i < T; ++i) doc.set(i, i < z.n ? double(3 * i / z.n) : double(id(rng)));
    Tensor o = attend_bhme(z, t.v, [&](int64_t b, int64_t h, int64_t m, int64_t n) {
      return at(doc, {m}) == at(doc, {n}) && n <= m ? qk(t.q, t.k, b, h, m, n) : -INFINITY;
    });
    check_example("document", {{"q", t.q}, {"k", t.k}, {"v", t.v}, {"doc", doc}}, {{"o", o}});
  }
}

TEST(Examples, DiffAttn) {
  std::mt19937_64 rng(10);
  for (const Sizes& z : kSizes) {
    Qkv t1 = random_qkv(z, rng), t2 = random_qkv(z, rng);
    Tensor lam(DType::f32, {});
    lam.set(0, 0.2);
    const double l = lam.get(0);
    Tensor o(DType::f64, {z.b, z.h, z.m, z.e});
    for (int64_t b = 0; b < z.b; ++b)
      for (int64_t h = 0; h < z.h; ++h) {
        auto s1 = [&](int64_t m, int64_t n) { return qk(t1.q, t1.k, b, h, m, n); };
        auto s2 = [&](int64_t m, int64_t n) { return qk(t2.q, t2.k, b, h, m, n); };
        Probs P1 = softmax_rows(z.m, z.n, s1), P2 = softmax_rows(z.m, z.n, s2);
        for (int64_t m = 0; m < z.m; ++m)
          for (int64_t e = 0; e < z.e; ++e) {
            double acc = 0;
            for (int64_t n = 0; n < z.n; ++n)
              acc += (P1(m, n) - l * P2(m, n)) * at(t1.v, {b, h, n, e});
            o.set_at({b, h, m, e}, acc);
          }
      }
    check_example("diff_attn",
                  {{"q1", t1.q}, {"k1", t1.k}, {"q2", t2.q}, {"k2", t2.k}, {"v", t1.v},
                   {"lam", lam}},
                  {{"o", o}});
  }
}

TEST(Examples, Gqa) {
  struct G {
    int64_t b, g, r, m, n, d, e;
  };
  std::mt19937_64 rng(11);
  for (const G& z : std::vector<G>{{1, 1, 1, 1, 1, 1, 1}, {2, 3, 2, 7, 11, 5, 3},
                                   {1, 2, 3, 77, 7, 4, 2}}) {
    Tensor q = random_float_tensor(DType::bf16, {z.b, z.g, z.r, z.m, z.d}, rng);
    Tensor k = random_float_tensor(DType::bf16, {z.b, z.g, z.n, z.d}, rng);
    Tensor v = random_float_tensor(DType::bf16, {z.b, z.g, z.n, z.e}, rng);
    Tensor o(DType::f64, {z.b, z.g, z.r, z.m, z.e});
    for (int64_t b = 0; b < z.b; ++b)
      for (int64_t g = 0; g < z.g; ++g)
        for (int64_t r = 0; r < z.r; ++r) {
          Probs P = softmax_rows(z.m, z.n, [&](int64_t m, int64_t n) -> double {
            if (n > m) return -INFINITY;
            double acc = 0;
            for (int64_t d = 0; d < z.d; ++d) acc += at(q, {b, g, r, m, d}) * at(k, {b, g, n, d});
            return acc / std::sqrt(double(z.d));
          });
          for (int64_t m = 0; m < z.m; ++m)
            for (int64_t e = 0; e < z.e; ++e) {
              double acc = 0;
              for (int64_t n = 0; n < z.n; ++n) acc += P(m, n) * at(v, {b, g, n, e});
              o.set_at({b, g, r, m, e}, acc);
            }
        }
    check_example("gqa", {{"q", q}, {"k", k}, {"v", v}}, {{"o", o}});
  }
}

TEST(Examples, Cross) {
  // [batch, sequence, head, dim] memory order; m = 1 is a decoding step.
  std::mt19937_64 rng(12);
  for (const Sizes& z : std::vector<Sizes>{{1, 3, 1, 77, 5, 4}, {2, 2, 7, 1, 3, 3},
                                           {1, 1, 33, 20, 8, 8}}) {
    Tensor q = random_float_tensor(DType::bf16, {z.b, z.m, z.h, z.d}, rng);
    Tensor k = random_float_tensor(DType::bf16, {z.b, z.n, z.h, z.d}, rng);
    Tensor v = random_float_tensor(DType::bf16, {z.b, z.n, z.h, z.e}, rng);
    Tensor o(DType::f64, {z.b, z.m, z.h, z.e});
    for (int64_t b = 0; b < z.b; ++b)
      for (int64_t h = 0; h < z.h; ++h) {
        Probs P = softmax_rows(z.m, z.n, [&](int64_t m, int64_t n) {
          double acc = 0;
          for (int64_t d = 0; d < z.d; ++d) acc += at(q, {b, m, h, d}) * at(k, {b, n, h, d});
          return acc / std::sqrt(double(z.d));
        });
        for (int64_t m = 0; m < z.m; ++m)
          for (int64_t e = 0; e < z.e; ++e) {
            double acc = 0;
            for (int64_t n = 0; n < z.n; ++n) acc += P(m, n) * at(v, {b, n, h, e});
            o.set_at({b, m, h, e}, acc);
          }
      }
    check_example("cross", {{"q", q}, {"k", k}, {"v", v}}, {{"o", o}});
  }
}

TEST(Examples, EvoformerRow) {
  struct E {
    int64_t b, s, h, m, n, d, i, j;
  };
  std::mt19937_64 rng(13);
  for (const E& z : std::vector<E>{{1, 3, 2, 7, 11, 5, 9, 13}, {2, 1, 1, 1, 1, 1, 1, 1},
                                   {1, 2, 1, 20, 20, 8, 20, 20}}) {
    Tensor q = random_float_tensor(DType::bf16, {z.b, z.s, z.h, z.m, z.d}, rng);
    Tensor k = random_float_tensor(DType::bf16, {z.b, z.s, z.h, z.n, z.d}, rng);
    Tensor v = random_float_tensor(DType::bf16, {z.b, z.s, z.h, z.n, z.d}, rng);
    Tensor g = random_float_tensor(DType::bf16, {z.b, z.s, z.h, z.m, z.d}, rng);
    Tensor pair = random_float_tensor(DType::bf16, {z.b, z.h, z.i, z.j}, rng);
    Tensor keep = random_bool_tensor({z.b, z.s, z.j}, 0.7, rng);
    for (int64_t j = 0; j < z.j; ++j) keep.set_at({0, 0, j}, 0.0);  // a row with every key off
    Tensor o(DType::f64, {z.b, z.s, z.h, z.m, z.d});
    for (int64_t b = 0; b < z.b; ++b)
      for (int64_t s = 0; s < z.s; ++s)
        for (int64_t h = 0; h < z.h; ++h) {
          Probs P = softmax_rows(z.m, z.n, [&](int64_t m, int64_t n) {
            double acc = 0;
            for (int64_t d = 0; d < z.d; ++d)
              acc += at(q, {b, s, h, m, d}) * at(k, {b, s, h, n, d});
            // The biased score is an f32 value (docs/language.md §5): -1e9 absorbs the
            // score's digits below its f32 ulp (64), as in every backend.
            double x = acc / std::sqrt(double(z.d)) + at(pair, {b, h, m, n});
            return static_cast<double>(static_cast<float>(
                static_cast<float>(x) + (at(keep, {b, s, n}) != 0 ? 0.0f : -1e9f)));
          });
          for (int64_t m = 0; m < z.m; ++m)
            for (int64_t d = 0; d < z.d; ++d) {
              double acc = 0;
              for (int64_t n = 0; n < z.n; ++n) acc += P(m, n) * at(v, {b, s, h, n, d});
              o.set_at({b, s, h, m, d}, acc * sigmoid(at(g, {b, s, h, m, d})));
            }
        }
    check_example("evoformer_row",
                  {{"q", q}, {"k", k}, {"v", v}, {"g", g}, {"pair", pair}, {"keep", keep}},
                  {{"o", o}});
  }
}

TEST(Examples, EvoformerCol) {
  struct E {
    int64_t b, i, h, m, n, d;
  };
  std::mt19937_64 rng(14);
  for (const E& z : std::vector<E>{{1, 3, 2, 7, 11, 5}, {1, 1, 1, 1, 1, 1}, {2, 2, 1, 20, 13, 8}}) {
    Tensor q = random_float_tensor(DType::bf16, {z.b, z.i, z.h, z.m, z.d}, rng);
    Tensor k = random_float_tensor(DType::bf16, {z.b, z.i, z.h, z.n, z.d}, rng);
    Tensor v = random_float_tensor(DType::bf16, {z.b, z.i, z.h, z.n, z.d}, rng);
    Tensor g = random_float_tensor(DType::bf16, {z.b, z.i, z.h, z.m, z.d}, rng);
    Tensor o(DType::f64, {z.b, z.i, z.h, z.m, z.d});
    for (int64_t b = 0; b < z.b; ++b)
      for (int64_t i = 0; i < z.i; ++i)
        for (int64_t h = 0; h < z.h; ++h) {
          Probs P = softmax_rows(z.m, z.n, [&](int64_t m, int64_t n) {
            double acc = 0;
            for (int64_t d = 0; d < z.d; ++d)
              acc += at(q, {b, i, h, m, d}) * at(k, {b, i, h, n, d});
            return acc / std::sqrt(double(z.d));
          });
          for (int64_t m = 0; m < z.m; ++m)
            for (int64_t d = 0; d < z.d; ++d) {
              double acc = 0;
              for (int64_t n = 0; n < z.n; ++n) acc += P(m, n) * at(v, {b, i, h, n, d});
              o.set_at({b, i, h, m, d}, acc * sigmoid(at(g, {b, i, h, m, d})));
            }
        }
    check_example("evoformer_col", {{"q", q}, {"k", k}, {"v", v}, {"g", g}}, {{"o", o}});
  }
}

// Every file in examples/ has a test above (add one when you add an example).
TEST(Examples, EveryExampleIsTested) {
  const std::set<std::string> tested = {
      "vanilla.attn",  "causal.attn",        "alibi.attn",         "softcap.attn",
      "sliding_window.attn", "prefix_lm.attn", "document.attn",    "gqa.attn",
      "diff_attn.attn", "evoformer_row.attn", "evoformer_col.attn", "lse.attn",
      "cross.attn"};
  std::set<std::string> found;
  for (const auto& f : testing::list_dir(testing::source_path("examples")))
    if (f.size() > 5 && f.substr(f.size() - 5) == ".attn") found.insert(f);
  EXPECT_EQ(found, tested);
}

}  // namespace
}  // namespace flashgen
