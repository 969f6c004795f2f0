// The exp homomorphism beyond the lowered softmax template, and the limits of sum splitting
// (passes/online_rewrite.cpp): hand-written softmaxes (exp, exp2, shifted, raw max) fuse into
// one kernel and match the reference, also on fully -inf rows, as do softmaxes whose max is
// taken with a value beside the keys (attention sinks); a product of K non-exp sums is
// not expanded into 2^K sums; sum((s - max(s)) * v) is not split into a cancelling difference
// but computed from a materialized max; values computed per key (v + bias) are distributed into
// plain sums.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "flashgen/compile.h"
#include "flashgen/flashgen.h"
#include "flashgen/ref.h"
#include "compiler/pipeline.h"
#include "passes/passes.h"
#include "support/support.h"

namespace flashgen {
namespace {

Program parse_one(const std::string& src) { return parse_source(src, "test.attn").at(0); }

// CPU backend against the f64 reference, at f32 tolerance scaled by the output's size.
void expect_matches(const Program& p, const Extents& ext, uint64_t seed, double tol = 2e-4) {
  TensorMap in = random_inputs(p, ext, seed);
  TensorMap want = evaluate_reference_f64(p, in), got = run_cpu(p, in);
  for (const Output& o : p.outputs) {
    double scale = std::max(1.0, testing::max_abs(want.at(o.name)));
    EXPECT_EQ(testing::compare_tensors(got.at(o.name), want.at(o.name), tol * scale), "")
        << p.name << " output " << o.name;
  }
}

// The canonical, online-rewritten program against the program as written, both in the f64
// reference.
void expect_rewrite_keeps_meaning(const Program& p, const Extents& ext, uint64_t seed) {
  const Program r = online_rewrite(canonicalize(p));
  TensorMap in = random_inputs(p, ext, seed);
  TensorMap a = evaluate_reference_f64(p, in), b = evaluate_reference_f64(r, in);
  for (const Output& o : p.outputs)
    EXPECT_EQ(testing::compare_tensors(b.at(o.name), a.at(o.name),
                                       1e-5 * std::max(1.0, testing::max_abs(a.at(o.name)))),
              "")
        << p.name;
}

const char* kHandWritten[] = {
    // exactly as docs/language.md defines softmax, without the safe max
    "program manual2(q: f32[m, d], k: f32[n, d], v: f32[n, e]) {\n"
    "  s = sum(q * k, d) / sqrt(size(d))\n"
    "  p = exp(s - max(s, n))\n"
    "  out o: f32[m, e] = sum(p * v, n) / sum(p, n)\n}\n",
    "program manual_exp2(q: f32[m, d], k: f32[n, d], v: f32[n, e]) {\n"
    "  s = sum(q * k, d) / sqrt(size(d))\n"
    "  p = exp2(s - max(s, n))\n"
    "  out o: f32[m, e] = sum(p * v, n) / sum(p, n)\n}\n",
    "program manual_shift(q: f32[m, d], k: f32[n, d], v: f32[n, e]) {\n"
    "  s = sum(q * k, d) / sqrt(size(d))\n"
    "  p = exp(s - max(s, n) - 1.)\n"
    "  out o: f32[m, e] = sum(p * v, n)\n  out l: f32[m] = sum(p, n)\n}\n",
    "program manual_scaled(q: f32[m, d], k: f32[n, d], v: f32[n, e]) {\n"
    "  s = sum(q * k, d)\n"
    "  p = exp(0.5 * (s - max(s, n)) + 0.25)\n"
    "  out o: f32[m, e] = sum(p * v, n) / sum(p, n)\n}\n",
};

TEST(PassesOnlineForms, HandWrittenSoftmaxFusesAndMatches) {
  for (const char* src : kHandWritten) {
    Program p = parse_one(src);
    EXPECT_EQ(kernel_count(p, {}), 1) << p.name << "\n" << explain(p, {});
    expect_matches(p, {{"m", 37}, {"n", 301}, {"d", 7}, {"e", 5}}, 3);
    // The rewrite alone keeps meaning in the reference too.
    expect_rewrite_keeps_meaning(p, {{"m", 5}, {"n", 9}, {"d", 3}, {"e", 2}}, 4);
  }
}

TEST(PassesOnlineForms, RawMaxGivesNaNOnFullyMaskedRows) {
  // Rows m >= n + 20 are all -inf: the reference gives NaN there (-inf - -inf), the safe
  // softmax 0; the fused kernel must give what the reference gives for both.
  Program p = parse_one(
      "program raw(q: f32[m, d], k: f32[n, d], v: f32[n, e]) {\n"
      "  s = where(m < n + 20, sum(q * k, d), -inf)\n"
      "  p = exp(s - max(s, n))\n"
      "  out o: f32[m, e] = sum(p * v, n)\n"
      "  out w: f32[m, e] = sum(softmax(s, n) * v, n)\n}\n");
  EXPECT_EQ(kernel_count(p, {}), 1) << explain(p, {});
  Extents ext{{"m", 70}, {"n", 33}, {"d", 4}, {"e", 3}};
  TensorMap in = random_inputs(p, ext, 9);
  TensorMap want = evaluate_reference_f64(p, in);
  EXPECT_TRUE(std::isnan(want.at("o").at({69, 0})));
  expect_matches(p, ext, 9);
}

// A softmax whose max is taken together with a value beside the keys: attention sinks (a
// per-head logit that joins the normalizer, gpt-oss), softmax plus one (the max with 0), and
// exp2 with a scale. exp(s - T), T = maximum(max(s, n), c), is rewritten at the max
// (exp(s - safe(M)) * exp(safe(M) - T)), so one kernel streams it; rows whose keys are all
// masked (m >= n + 20) give what the reference gives. A T read from an input (a saved
// logsumexp) is one pass as it is and gets no max.
TEST(PassesOnlineForms, AMaxTakenWithAValueBesideTheKeysStaysOnePass) {
  const char* srcs[] = {
      "program sinks(q: f32[h, m, d], k: f32[h, n, d], v: f32[h, n, e], sink: f32[h]) {\n"
      "  s = where(m < n + 20, sum(q * k, d) / sqrt(size(d)), -inf)\n"
      "  mx = maximum(max(s, n), sink[h])\n"
      "  out o: f32[h, m, e] = sum(exp(s - mx) * v, n) / (sum(exp(s - mx), n) + "
      "exp(sink[h] - mx))\n}\n",
      "program plus_one(q: f32[h, m, d], k: f32[h, n, d], v: f32[h, n, e]) {\n"
      "  s = sum(q * k, d)\n"
      "  mx = maximum(max(s, n), 0.0)\n"
      "  out o: f32[h, m, e] = sum(exp(s - mx) * v, n) / (exp(-mx) + sum(exp(s - mx), n))\n}\n",
      "program sinks2(q: f32[h, m, d], k: f32[h, n, d], v: f32[h, n, e], sink: f32[h]) {\n"
      "  s = where(m < n + 20, sum(q * k, d), -inf)\n"
      "  mx = maximum(max(s, n), sink[h])\n"
      "  p = exp2(0.5 * s - 0.5 * mx)\n"
      "  out o: f32[h, m, e] = sum(p * v, n) / (sum(p, n) + exp2(0.5 * sink[h] - 0.5 * mx))\n"
      "  out l: f32[h, m] = sum(p, n)\n}\n",
  };
  for (const char* src : srcs) {
    const Program p = parse_one(src);
    EXPECT_EQ(kernel_count(p, {}), 1) << p.name << "\n" << explain(p, {});
    expect_matches(p, {{"h", 3}, {"m", 70}, {"n", 33}, {"d", 4}, {"e", 3}}, 5);
    expect_matches(p, {{"h", 2}, {"m", 5}, {"n", 301}, {"d", 7}, {"e", 5}}, 6);
    // the rewrite alone keeps meaning in the reference
    expect_rewrite_keeps_meaning(p, {{"h", 2}, {"m", 25}, {"n", 9}, {"d", 3}, {"e", 2}}, 7);
  }
  // Sinks of -inf ("no sink on this head") and NaN beside a finite one. The terms exp(-inf - T)
  // of masked keys are NaN for T = -inf or NaN, where the strong zero would keep the rewritten
  // terms 0: on sinks2's rows whose keys are all masked (m >= n + 20) with the sink of -inf,
  // and on raw's first row (one live key, weighted 0) with the NaN sink, the outputs are NaN.
  const Program raw = parse_one(
      "program raw(q: f32[h, m, d], k: f32[h, n, d], v: f32[h, n, e], sink: f32[h]) {\n"
      "  s = where(n <= m, sum(q * k, d), -inf)\n"
      "  mx = maximum(max(s, n), sink[h])\n"
      "  out w: f32[h, m] = sum(exp(s - mx) * f32(n), n)\n}\n");
  const Program sinks2 = parse_one(srcs[2]);
  for (const Program& p : {sinks2, raw}) {
    const Program r = online_rewrite(canonicalize(p));
    TensorMap in = random_inputs(p, {{"h", 3}, {"m", 40}, {"n", 9}, {"d", 3}, {"e", 2}}, 8);
    Tensor sink(DType::f32, {3});
    sink.set(0, -INFINITY);
    sink.set(1, NAN);
    sink.set(2, 0.25);
    in["sink"] = sink;
    TensorMap want = evaluate_reference_f64(p, in), ref = evaluate_reference_f64(r, in),
              got = run_cpu(p, in);
    for (const Output& o : p.outputs) {
      const double tol = 2e-4 * std::max(1.0, testing::max_abs(want.at(o.name)));
      EXPECT_EQ(testing::compare_tensors(ref.at(o.name), want.at(o.name), tol), "")
          << p.name << " output " << o.name << " (rewritten, in the reference)";
      EXPECT_EQ(testing::compare_tensors(got.at(o.name), want.at(o.name), tol), "")
          << p.name << " output " << o.name << " (cpu)";
    }
    // (the cases are there: [h, m] outputs)
    if (p.name == "sinks2") {
      for (int64_t m = 28; m < 40; ++m) EXPECT_TRUE(std::isnan(want.at("l").at({0, m}))) << m;
      EXPECT_FALSE(std::isnan(want.at("l").at({0, 0})));
    } else {
      EXPECT_TRUE(std::isnan(want.at("w").at({1, 0})));
      EXPECT_FALSE(std::isnan(want.at("w").at({2, 0})));
    }
  }
  // a saved logsumexp: exp(s - lse) needs no max, and none is added
  const Program saved = parse_one(
      "program saved(q: f32[m, d], k: f32[n, d], v: f32[n, e], lse: f32[m]) {\n"
      "  out o: f32[m, e] = sum(exp(sum(q * k, d) - lse) * v, n)\n}\n");
  const Program r = online_rewrite(canonicalize(saved));
  for (const Node& n : r.nodes) EXPECT_NE(n.op, Op::Max) << r.str();
  EXPECT_EQ(kernel_count(saved, {}), 1);
}

TEST(PassesOnlineForms, ProductOfManySumsStaysOneTerm) {
  std::string src =
      "program prod(q: f32[m, d], k: f32[n, d], v: f32[n, e]) {\n"
      "  s = sum(q * k, d) / sqrt(size(d))\n"
      "  out o: f32[m, e] = sum(softmax(s, n) * v";
  for (int i = 1; i <= 10; ++i) src += " * (s + " + std::to_string(i) + ".)";
  src += ", n)\n}\n";
  Program p = parse_one(src);
  auto t0 = std::chrono::steady_clock::now();
  std::string text = explain(p, {});
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 2.0);
  EXPECT_EQ(kernel_count(p, {}), 1) << text;
  Program r = online_rewrite(canonicalize(p));
  int sums = 0;
  for (const Node& n : r.nodes)
    if (n.op == Op::Sum && n.reduce.size() == 1 && r.dims[n.reduce[0]] == "n") ++sums;
  EXPECT_LE(sums, 4) << r.str();  // not 2^10
  expect_matches(p, {{"m", 19}, {"n", 203}, {"d", 5}, {"e", 3}}, 5, 1e-3);
}

TEST(PassesOnlineForms, TooManyTermsLeavesTheSumWhole) {
  // (p1 + p2)^8 would split into 2^8 sums: past the cap the sum is left whole and planned with
  // materialized normalizers, and the rewrite still keeps meaning.
  std::string src =
      "program many(q: f32[m, d], k: f32[n, d], v: f32[n, e]) {\n"
      "  s = sum(q * k, d)\n  t = s * 0.5\n"
      "  out o: f32[m, e] = sum(v";
  for (int i = 0; i < 8; ++i) src += " * (softmax(s, n) + softmax(t, n))";
  src += ", n)\n}\n";
  Program p = parse_one(src);
  auto t0 = std::chrono::steady_clock::now();
  Program r = online_rewrite(canonicalize(p));
  EXPECT_GT(kernel_count(p, {}), 1);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 2.0);
  TensorMap in = random_inputs(p, {{"m", 3}, {"n", 7}, {"d", 2}, {"e", 2}}, 6);
  EXPECT_EQ(testing::compare_tensors(evaluate_reference_f64(r, in).at("o"),
                                     evaluate_reference_f64(p, in).at("o"), 1e-5),
            "");
}

// Values computed per key under a softmax (tests/programs/value_sums.attn): each sum over the
// keys that the rewrite leaves is a product with no + or - among its factors (a plain value
// tensor or a weight), one kernel, the meaning kept (also without keys), and the CPU backend
// matches; the pipeline splits for the CUDA targets only. Not distributed that way: a score
// offset by its row max (the parts' error would grow with the max: the max stays materialized),
// an integer value (its sum wraps per key) and a value that is a sum itself ((v + c) - c).
TEST(PassesOnlineForms, ValuesComputedPerKeyAreDistributed) {
  const Extents ext{{"b", 2}, {"h", 3}, {"m", 19}, {"n", 203}, {"d", 5}, {"e", 7}};
  for (const Program& p : parse_file(testing::source_path("tests/programs/value_sums.attn"))) {
    SCOPED_TRACE(p.name);
    const Program r = online_rewrite(canonicalize(p));
    int sums = 0;
    for (const Node& n : r.nodes) {
      if (n.op != Op::Sum || r.dims[n.reduce.at(0)] != "n") continue;
      ++sums;
      std::vector<int> stack = {n.args[0]};
      while (!stack.empty()) {
        const Node& f = r.nodes[stack.back()];
        stack.pop_back();
        EXPECT_NE(f.op, Op::Add) << r.str();
        EXPECT_NE(f.op, Op::Sub) << r.str();
        if (f.op == Op::Mul) stack.insert(stack.end(), f.args.begin(), f.args.end());
      }
    }
    // value_bias: e * v and e; value_mix: e * v, e * u and e; key_offset: e * v, e * kb and e
    EXPECT_EQ(sums, p.name == "value_bias" ? 2 : 3) << r.str();
    // the pipeline asks for the split for CUDA only: on the CPU the value stays per key (one
    // sum of e times it, besides the row sum)
    for (const Target t : {Target::cpu, Target::cuda_sm90}) {
      CompileOptions opt;
      opt.target = t;
      const Program& w = compile_program(p, opt, "online_rewrite").rewritten;
      int key_sums = 0;
      for (const Node& n : w.nodes) key_sums += n.op == Op::Sum && w.dims[n.reduce.at(0)] == "n";
      EXPECT_EQ(key_sums, t == Target::cpu ? 2 : sums) << target_name(t) << "\n" << w.str();
    }
    EXPECT_EQ(kernel_count(p, {}), 1);
    expect_rewrite_keeps_meaning(p, ext, 3);
    expect_matches(p, ext, 4, 1e-2);  // (bf16 outputs)
    Extents none = ext;  // no keys: every row's softmax is empty
    none["n"] = 0;
    expect_rewrite_keeps_meaning(p, none, 5);
  }
  // Not distributed: terms offset by a reduction (in a P.V and in a row sum: the parts' error
  // would grow with the max; their maxes stay materialized), integer terms (their sum wraps
  // per key: v + 2^31 - 1 is negative for v > 0, and one pass as it is), and terms that are sums
  // themselves ((v + 65536) - 65536: the parts would cancel; one pass as it is).
  const Extents small{{"m", 7}, {"n", 50}, {"d", 5}, {"e", 4}};
  for (const char* src :
       {"program offset(q: f32[m, d], k: f32[n, d], v: f32[n, e]) {\n"
        "  s = sum(q * k, d)\n"
        "  out o: f32[m, e] = sum(softmax(s, n) * (s - max(s, n)) * v, n)\n}\n",
        "program ent(q: f32[m, d], k: f32[n, d]) {\n"
        "  s = sum(q * k, d) + 10000.\n"
        "  mx = max(s, n)\n  p = exp(s - mx)\n"
        "  out h: f32[m] = log(sum(p, n)) - sum(p * (s - mx), n) / sum(p, n)\n}\n",
        "program wrap(q: f32[m, d], k: f32[n, d], v: i32[n, e]) {\n"
        "  out o: f32[m, e] = sum(softmax(sum(q * k, d), n) * (v + i32(2147483647)), n)\n}\n",
        "program cancel(q: f32[m, d], k: f32[n, d], v: f32[n, e]) {\n"
        "  out o: f32[m, e] = sum(softmax(sum(q * k, d), n) * ((v + 65536.) - 65536.), n)\n}\n"}) {
    const Program p = parse_one(src);
    SCOPED_TRACE(p.name);
    const bool one_pass = p.name == "wrap" || p.name == "cancel";
    EXPECT_EQ(kernel_count(p, {}), one_pass ? 1 : 2);
    expect_rewrite_keeps_meaning(p, small, 5);
    expect_matches(p, small, 6);
    // the rewrite CUDA asks for keeps the value whole: one sum of e times it, and the row sum
    const Program r = online_rewrite(canonicalize(p));
    int key_sums = 0;
    for (const Node& n : r.nodes) key_sums += n.op == Op::Sum && r.dims[n.reduce.at(0)] == "n";
    if (one_pass) EXPECT_EQ(key_sums, 2) << r.str();
  }
}

TEST(PassesOnlineForms, CancellingSumIsMaterializedNotSplit) {
  Program p = parse_one(
      "program cancel2(q: f32[m, d], k: f32[n, d], v: f32[n, e]) {\n"
      "  s = sum(q * k, d) * 0. + f32(n % 7) + 100000.\n"
      "  out o: f32[m, e] = sum((s - max(s, n)) * v, n)\n}\n");
  EXPECT_EQ(kernel_count(p, {}), 2);
  std::string text = explain(p, {});
  EXPECT_NE(text.find("materialized"), std::string::npos) << text;
  Extents ext{{"m", 7}, {"d", 5}, {"n", 3000}, {"e", 4}};
  TensorMap in = random_inputs(p, ext, 1);
  TensorMap want = evaluate_reference_f64(p, in), got = run_cpu(p, in);
  // Terms are integers 0..6 times N(0,1): the sum of 3000 of them is O(300); f32 accumulation
  // gives ~1e-4 relative error, a cancelling split would be off by ~1e5 * 3000 * 6e-8.
  EXPECT_EQ(testing::compare_tensors(got.at("o"), want.at("o"), 0.05), "");
}

}  // namespace
}  // namespace flashgen
