// The program passes keep meaning: the reference evaluator gives the same results before and
// after canonicalize and online_rewrite (on random inputs, with fully masked rows), and the
// pass output of a few examples matches tests/passes/golden/*.txt (regenerate with
// FLASHGEN_UPDATE_GOLDEN=1 after an intended change).
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "flashgen/compile.h"
#include "flashgen/flashgen.h"
#include "passes/passes.h"
#include "support/support.h"

namespace flashgen {
namespace {

Program example(const std::string& name) { return testing::example_program(name); }

TEST(Passes, CanonicalizeAndOnlineRewriteKeepMeaning) {
  for (const char* name : {"causal", "diff_attn", "lse", "evoformer_row", "sliding_window"}) {
    Program p = example(name);
    Program c = canonicalize(p);
    Program r = online_rewrite(c);
    for (const Node& n : c.nodes) EXPECT_FALSE(is_sugar(n.op)) << name;
    Extents ext;
    for (const std::string& d : p.dims) ext[d] = 5;
    ext["m"] = 300;  // sliding_window: rows past n + 256 are fully masked
    ext["n"] = 9;
    ext["i"] = ext["j"] = 300;
    TensorMap in = random_inputs(p, ext, 11);
    TensorMap a = evaluate_reference_f64(p, in), b = evaluate_reference_f64(c, in),
              d = evaluate_reference_f64(r, in);
    for (const Output& o : p.outputs) {
      // The passes move where f32 roundings happen (each f32 value is rounded): f32 accuracy.
      const double tol = 1e-5 * std::max(1.0, testing::max_abs(a.at(o.name)));
      EXPECT_EQ(testing::compare_tensors(b.at(o.name), a.at(o.name), tol), "") << name;
      EXPECT_EQ(testing::compare_tensors(d.at(o.name), a.at(o.name), tol), "") << name;
    }
  }
}

TEST(Passes, OnlineRewriteDistributesDiffAttn) {
  // sum((p1 - lam*p2) * v, n) becomes a difference of two sums, each with its normalizer
  // pulled out: no sum over n of a div_or_zero is left.
  Program r = online_rewrite(canonicalize(example("diff_attn")));
  for (const Node& n : r.nodes)
    if (n.op == Op::Sum) EXPECT_NE(r.nodes[n.args[0]].op, Op::DivOrZero) << r.str();
}

class Golden : public ::testing::TestWithParam<const char*> {};

TEST_P(Golden, PassOutputMatches) {
  std::string name = GetParam();
  Program p = example(name);
  std::string got;
  for (const char* stage : {"canonicalize", "online_rewrite", "classify_tiles"})
    got += "=== " + std::string(stage) + "\n" + dump_after(p, stage, {});
  std::string path = testing::source_path("tests/passes/golden/" + name + ".txt");
  if (std::getenv("FLASHGEN_UPDATE_GOLDEN")) testing::write_text_file(path, got);
  ASSERT_TRUE(testing::file_exists(path)) << path;
  std::string want = testing::read_text_file(path);
  if (got != want) {
    // Report the first differing line, not two whole dumps.
    std::istringstream g(got), w(want);
    std::string gl, wl;
    int line = 1;
    while (std::getline(g, gl) && std::getline(w, wl) && gl == wl) ++line;
    ADD_FAILURE() << path << ":" << line << " differs\n  got:  " << gl << "\n  want: " << wl
                  << "\n(FLASHGEN_UPDATE_GOLDEN=1 regenerates after an intended change)";
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, Golden,
                         ::testing::Values("causal", "diff_attn", "lse", "evoformer_row"));

}  // namespace
}  // namespace flashgen
