// The lowered kernel description (lower/lower.h), tested on its fields: which path each kernel
// takes and why, the tensor-core launch of the examples, the element kernel's threads, arrays
// and workspace layout, and the text form behind `--dump-after lower`.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>
#include <set>

#include "compiler/cuda_call.h"
#include "compiler/pipeline.h"
#include "flashgen/compile.h"
#include "flashgen/frontend.h"
#include "passes/passes.h"
#include "support/support.h"

namespace flashgen {
namespace {

Compiled lowered(const Program& p, Target t, const Extents& sizes) {
  CompileOptions o;
  o.target = t;
  o.sizes = sizes;
  return compile_program(p, o, "lower");
}
// The same in one kernel: --strict keeps softmax clusters together (lower/split_clusters.cpp),
// for the tests of the one-kernel rules (value splits, products) on programs of several groups.
Compiled fused(const Program& p, Target t, const Extents& sizes) {
  CompileOptions o;
  o.target = t;
  o.sizes = sizes;
  o.strict = true;
  return compile_program(p, o, "lower");
}

// An integer count of a bool beside the attention (masks_and_outputs.attn's count_i64;
// partials.attn's int_count, a partial over [b, h, m]; where(c, 1, 0) summed as an i32) is
// summed in f32 by a plain group on the
// tensor cores, exact up to 2^24 keys (the host refuses more); a float count sets no limit, and
// an integer sum of anything else stays on the element path, saying so.
TEST(Lower, AnIntegerCountOfABoolIsSummedInF32OnTheTensorCores) {
  auto program = [](const char* file, const std::string& name) {
    for (const Program& p : parse_file(testing::source_path(file)))
      if (p.name == name) return p;
    throw std::runtime_error("no program " + name);
  };
  const Extents heads = {{"d", 64}, {"e", 64}};
  for (Target t : {Target::cuda_sm80, Target::cuda_sm90}) {
    SCOPED_TRACE(target_name(t));
    for (const auto& [file, name, limit] :
         std::vector<std::tuple<const char*, const char*, int64_t>>{
             {"tests/programs/masks_and_outputs.attn", "count_i64", int64_t{1} << 24},
             {"tests/programs/partials.attn", "int_count", int64_t{1} << 24},
             {"tests/programs/masks_and_outputs.attn", "count_cast", 0}}) {
      SCOPED_TRACE(name);
      const Compiled c = lowered(program(file, name), t, heads);
      const LoweredKernel& lk = c.lowered.kernels.at(0);
      ASSERT_EQ(lk.path, LoweredKernel::Path::tensor_core) << lk.why;
      EXPECT_EQ(lk.tensor_core.launch.count_keys_limit, limit);
      ASSERT_EQ(lk.tensor_core.groups.size(), 2u);  // the softmax and the count's plain group
      EXPECT_LT(lk.tensor_core.groups[1].max_node, 0);
      ASSERT_EQ(lk.tensor_core.groups[1].sums.size(), 1u);
    }
    const Program where_count = parse_source(R"(
program wc(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], win: i32[h]) {
  keep = n <= m and m - n <= win[h]
  s = where(keep, sum(q * k, d) / sqrt(size(d)), -inf)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
  out cnt: i32[b, h, m] = sum(where(keep and s > 0.0, 1, 0), n)
}
)", "wc.attn").at(0);
    const Compiled wc = lowered(where_count, t, heads);
    const LoweredKernel& wk = wc.lowered.kernels.at(0);
    ASSERT_EQ(wk.path, LoweredKernel::Path::tensor_core) << wk.why;
    EXPECT_EQ(wk.tensor_core.launch.count_keys_limit, int64_t{1} << 24);
    const Program sums = parse_source(R"(
program int_sum(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], w: i32[b, n]) {
  s = sum(q * k, d)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
  out t: i64[b, h, m] = sum(i64(s > 0.0) * i64(w), n)
}
)", "int_sum.attn").at(0);
    const Compiled c = lowered(sums, t, heads);
    const LoweredKernel& lk = c.lowered.kernels.at(0);
    EXPECT_EQ(lk.path, LoweredKernel::Path::element);
    EXPECT_NE(lk.why.find("an integer sum other than a count of a bool"), std::string::npos)
        << lk.why;
  }
}

// A Min accumulator beside the attention (masks_and_outputs.attn's row_min, partials.attn's
// group_min) is a group of its own on the tensor cores: a running max of the negated scores,
// its mask of inf peeled like -inf's (and the tile mask found through it).
TEST(Lower, AMinAccumulatorIsANegatedGroup) {
  auto program = [](const char* file, const std::string& name) {
    for (const Program& p : parse_file(testing::source_path(file)))
      if (p.name == name) return p;
    throw std::runtime_error("no program " + name);
  };
  for (Target t : {Target::cuda_sm80, Target::cuda_sm90})
    for (const auto& [file, name] : std::vector<std::pair<const char*, const char*>>{
             {"tests/programs/masks_and_outputs.attn", "row_min"},
             {"tests/programs/partials.attn", "group_min"}}) {
      SCOPED_TRACE(std::string(target_name(t)) + " " + name);
      const Compiled c = lowered(program(file, name), t, {{"d", 64}, {"e", 64}});
      const LoweredKernel& lk = c.lowered.kernels.at(0);
      ASSERT_EQ(lk.path, LoweredKernel::Path::tensor_core) << lk.why;
      const auto& groups = lk.tensor_core.groups;
      ASSERT_EQ(groups.size(), 2u);
      EXPECT_FALSE(groups[0].negate);
      EXPECT_TRUE(groups[1].negate);
      EXPECT_EQ(c.plan.program.nodes[groups[1].max_node].op, Op::Min);
      EXPECT_TRUE(groups[1].sums.empty());
      const bool masked = std::string(name) == "row_min";
      EXPECT_EQ(groups[1].score_steps.size(), masked ? 2u : 1u);  // (the mask, the scale)
      EXPECT_EQ(c.plan.kernels[lk.plan_kernel].tiles.mask >= 0, masked);
    }
  // An integer max or min (the first kept key) is not a group: its running max would come back
  // through log2(e) and ln(2), an integer one too small.
  for (const char* op : {"min", "max"}) {
    SCOPED_TRACE(op);
    const Program p = parse_source(std::string(R"(
program first_key(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = where(n <= m, sum(q * k, d) / sqrt(size(d)), -inf)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
  out fk: i32[b, h, m] = )") + op + "(where(n <= m and s > 0.0, n, " +
                                       (std::string(op) == "min" ? "1000000" : "-1") +
                                       "), n)\n}\n",
                                   "first_key.attn").at(0);
    CompileOptions o;
    o.target = Target::cuda_sm90;
    o.sizes = {{"d", 64}, {"e", 64}};
    o.strict = true;
    const Compiled c = compile_program(p, o, "lower");
    const LoweredKernel& lk = c.lowered.kernels.at(0);
    EXPECT_EQ(lk.path, LoweredKernel::Path::element);
    EXPECT_NE(lk.why.find("a group's running max is a float"), std::string::npos) << lk.why;
  }
}

// Kernels of three to five groups (tests/programs/groups.attn) take the tensor cores: every
// softmax, max or min and plain sum beside the attention is a group of the one kernel; a max or
// min that nothing else reads is bare (no exponentials, no P operands: the Spec's kBareGroups);
// on mma.sync the groups' weights of a key tile stay within 128 registers a thread (16 rows a
// warp, keys in tiles of 32 where needed). Past that, the kernel takes the element path and
// says why.
TEST(Lower, EveryGroupOfAKernelIsOneOfItsTemplateGroups) {
  const std::vector<Program> ps = parse_file(testing::source_path("tests/programs/groups.attn"));
  // program -> groups, and which are bare
  const std::map<std::string, std::vector<bool>> expect = {
      {"row_stats", {false, true, false}},
      {"temperatures", {false, false, false}},
      {"gqa_mixed", {false, true, false, false}},
      {"three_weights", {false, false, false}},
      {"window_five", {false, false, false, true, false}},
      {"f32_five", {false, true, false, false, false}},
      {"doc_mix", {false, false, false}},
      {"lse3", {false, false, false, false}},
      {"alibi_stats", {false, true, false}},
      {"four_out", {false, false, false}},
      {"relu_sq", {false, true, false, false}}};
  ASSERT_EQ(ps.size(), expect.size() + 1);  // (and three_maps, below)
  for (Target t : {Target::cuda_sm80, Target::cuda_sm90})
    for (int64_t d : {64, 128})
      for (const Program& p : ps) {
        if (p.name == "three_maps") continue;
        SCOPED_TRACE(std::string(target_name(t)) + " d=" + std::to_string(d) + " " + p.name);
        const Compiled c = lowered(p, t, {{"d", d}, {"e", d}});
        ASSERT_EQ(c.lowered.kernels.size(), 1u);
        const LoweredKernel& lk = c.lowered.kernels[0];
        ASSERT_EQ(lk.path, LoweredKernel::Path::tensor_core) << lk.why;
        const TensorCoreKernel& tc = lk.tensor_core;
        const std::vector<bool>& bare = expect.at(p.name);
        ASSERT_EQ(tc.groups.size(), bare.size());
        int bare_bits = 0;
        for (size_t g = 0; g < bare.size(); ++g) {
          EXPECT_EQ(tc.groups[g].bare, bare[g]) << "group " << g;
          if (!bare[g]) continue;
          bare_bits |= 1 << g;
          EXPECT_TRUE(tc.groups[g].negate);  // (each program's bare group is a min)
          EXPECT_TRUE(tc.groups[g].sums.empty());
          for (const auto& pv : tc.pv) EXPECT_NE(pv.group, static_cast<int>(g));
        }
        const Sm80Launch& la = tc.launch;
        if (!la.wgmma) {  // a tile's weights of the widest group count within 128 registers
          const int weights = static_cast<int>(std::max(tc.scores.size(), tc.groups.size())) *
                              (la.rows_per_warp / 16) * la.block_n / 2;
          EXPECT_LE(weights, 128) << la.block_n;
        }
        // the printed Spec carries the bare groups as data
        CompileOptions opt;
        opt.target = t;
        opt.sizes = {{"d", d}, {"e", d}};
        const std::string src = compile_to_target(p, opt).sources.at(0);
        EXPECT_EQ(src.find("kBareGroups = " + std::to_string(bare_bits) + ";") !=
                      std::string::npos,
                  bare_bits != 0);
      }
  // three score maps, three value tensors and five P.V accumulators in one kernel (sm80,
  // d = 64), its value columns in chunks of 32 (5 x 32 / 2 = 80 registers of accumulators)
  {
    const Compiled c = lowered(ps.at(5), Target::cuda_sm80, {{"d", 64}, {"e", 64}});
    ASSERT_EQ(ps.at(5).name, "three_maps");
    ASSERT_EQ(c.lowered.kernels.size(), 1u);
    const TensorCoreKernel& tc = c.lowered.kernels[0].tensor_core;
    ASSERT_EQ(c.lowered.kernels[0].path, LoweredKernel::Path::tensor_core)
        << c.lowered.kernels[0].why;
    EXPECT_EQ(tc.scores.size(), 3u);
    EXPECT_EQ(tc.groups.size(), 3u);
    EXPECT_EQ(tc.pv.size(), 5u);
    EXPECT_EQ(tc.launch.value_split, 2);
    // at d = 128 one kernel would split the values in 4 chunks: a kernel per map instead
    EXPECT_EQ(lowered(ps.at(5), Target::cuda_sm80, {{"d", 128}, {"e", 128}}).lowered.kernels.size(),
              3u);
  }
  // f32 operands in pieces with five groups at d = e = 32: keys in tiles of 32, so 4 warps a
  // block (a K/V tile of 32 x 32 does not split evenly over 256 threads)
  for (Target t : {Target::cuda_sm80, Target::cuda_sm90}) {
    const Compiled c = lowered(ps.at(6), t, {{"d", 32}, {"e", 32}});
    ASSERT_EQ(ps.at(6).name, "f32_five");
    const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
    ASSERT_EQ(c.lowered.kernels.at(0).path, LoweredKernel::Path::tensor_core)
        << target_name(t) << ": " << c.lowered.kernels.at(0).why;
    EXPECT_EQ(la.pieces, 3);
    EXPECT_EQ(la.block_n, 32);
    EXPECT_EQ(la.warps, 4);
  }
  // five groups take keys in tiles of 32 on mma.sync (five tiles of 64 keys' weights: 160)
  const Compiled five = lowered(ps.at(4), Target::cuda_sm80, {{"d", 128}, {"e", 128}});
  EXPECT_EQ(five.lowered.kernels.at(0).tensor_core.launch.block_n, 32);
  // nine groups (a softmax and eight counts) would take 144 registers even at 32 keys a tile
  std::string counts;
  for (int i = 0; i < 8; ++i)
    counts += "  out c" + std::to_string(i) + ": f32[h, m] = sum(f32(s > " + std::to_string(i) +
              ".5), n)\n";
  const Program nine = parse_source(
      "program nine(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e]) {\n"
      "  s = sum(q * k, d)\n  out o: f32[h, m, e] = sum(softmax(s, n) * v, n)\n" +
          counts + "}\n",
      "nine.attn").at(0);
  for (Target t : {Target::cuda_sm80, Target::cuda_sm90}) {
    SCOPED_TRACE(target_name(t));
    const Compiled c = lowered(nine, t, {{"d", 64}, {"e", 64}});
    const LoweredKernel& lk = c.lowered.kernels.at(0);
    EXPECT_EQ(lk.path, LoweredKernel::Path::element);
    EXPECT_NE(lk.why.find("9 groups: their weights of a tile of 32 keys would take 144 "
                          "registers a thread (at most 128)"),
              std::string::npos)
        << lk.why;
  }
}

// Kernels of the scores' row reductions alone (tests/programs/scores_only.attn: a log-sum-exp,
// the largest and smallest logit, a count, sigmoid sums; no P.V accumulator) take the tensor
// cores with no value tensor: no V operand, no value dim, partial rows of the groups' state
// alone and a combine thread a row (a softmax weighted by m - n too: two groups of one running
// max); f16 operands beside a count stay f16 (no P.V rounds its
// weights); wgmma on sm90 wherever the head dim fills its panels.
TEST(Lower, KernelsOfNoAccumulatorTakeTheTensorCores) {
  const std::vector<Program> ps =
      parse_file(testing::source_path("tests/programs/scores_only.attn"));
  // program -> each group's kind: 's' softmax (row sums), 'b' a max or min alone, 'p' plain sums
  const std::map<std::string, std::string> expect = {{"lse_causal", "s"},
                                                     {"logit_range", "bb"},
                                                     {"max_sim", "bp"},
                                                     {"gqa_window", "sp"},
                                                     {"lse_f32", "ss"},
                                                     {"exp_dist", "ss"},
                                                     {"kept_min", "b"}};
  ASSERT_EQ(ps.size(), expect.size());
  for (Target t : {Target::cuda_sm80, Target::cuda_sm90})
    for (int64_t d : {32, 64, 128})
      for (const Program& p : ps) {
        SCOPED_TRACE(std::string(target_name(t)) + " d=" + std::to_string(d) + " " + p.name);
        const Compiled c = lowered(p, t, {{"d", d}});
        ASSERT_EQ(c.lowered.kernels.size(), 1u);
        const LoweredKernel& lk = c.lowered.kernels[0];
        ASSERT_EQ(lk.path, LoweredKernel::Path::tensor_core) << lk.why;
        const TensorCoreKernel& tc = lk.tensor_core;
        const Sm80Launch& la = tc.launch;
        EXPECT_TRUE(tc.pv.empty());
        EXPECT_TRUE(tc.vbufs.empty());
        EXPECT_EQ(tc.vdim, -1);
        EXPECT_EQ(la.num_acc, 0);
        const std::string& kinds = expect.at(p.name);
        ASSERT_EQ(tc.groups.size(), kinds.size());
        for (size_t g = 0; g < kinds.size(); ++g) {
          const TensorCoreKernel::Group& gr = tc.groups[g];
          EXPECT_EQ(gr.max_node < 0, kinds[g] == 'p') << "group " << g;
          EXPECT_EQ(gr.bare, kinds[g] == 'b') << "group " << g;
          EXPECT_EQ(gr.sums.empty(), kinds[g] == 'b') << "group " << g;
        }
        // the split key loop's partial rows: each group's running max and row sum, nothing more;
        // the combine kernels take a thread a row
        const int G = static_cast<int>(kinds.size());
        EXPECT_EQ(la.part_row, 2 * G);
        EXPECT_EQ(la.few_part_row, 2 * G);
        EXPECT_EQ(la.combine_threads_per_row(false), 1);
        EXPECT_EQ(la.combine_threads_per_row(true), 1);
        ASSERT_EQ(la.head_dims.size(), 1u);
        EXPECT_EQ(la.head_dims[0].first, "d");
        EXPECT_EQ(la.value_split, 1);
        // operands: f32 in 3 bf16 pieces; f16 as it is beside a count (pieces only where a P.V
        // would round unbounded weights to f16)
        EXPECT_EQ(la.pieces, p.name == "lse_f32" ? 3 : 1);
        if (p.name == "max_sim") EXPECT_EQ(tc.elem, DType::f16);
        // wgmma on sm90 for 16-bit operands whose head dim fills 64-column panels; its TMA maps
        // are K's alone
        EXPECT_EQ(la.wgmma, t == Target::cuda_sm90 && p.name != "lse_f32" && d % 64 == 0)
            << la.products_why;
        for (const Sm80Launch::TmaOperand& op : la.tma)
          EXPECT_EQ(c.plan.buffers[op.buffer].name, "k");
        // small heads (5 blocks an SM) only where one group's weights fit beside Q
        if (!la.wgmma && la.pieces == 1)
          EXPECT_EQ(la.min_blocks == 5, d <= 64 && G == 1) << la.min_blocks;
        // the printed Spec: no value tensor, no accumulator
        CompileOptions opt;
        opt.target = t;
        opt.sizes = {{"d", d}};
        const std::string src = compile_to_target(p, opt).sources.at(0);
        EXPECT_NE(src.find("kNumV = 0, kNumAcc = 0;"), std::string::npos);
      }
  // a row reduction of something other than a contraction over the head dim stays on the
  // element path, and says why
  const Program l1 = parse_source(R"(
program l1(q: bf16[h, m, d], k: bf16[h, n, d]) {
  out far: f32[h, m] = max(sum(abs(q - k), d), n)
}
)", "l1.attn").at(0);
  const Compiled c1 = lowered(l1, Target::cuda_sm90, {{"d", 64}});
  const LoweredKernel& lk = c1.lowered.kernels.at(0);
  EXPECT_EQ(lk.path, LoweredKernel::Path::element);
  EXPECT_NE(lk.why.find("no tensor-core contraction"), std::string::npos) << lk.why;
}

// Scores that contract head dims of their own (tests/programs/score_dims.attn: MLA's per-head
// and rotary dims, two softmaxes of different widths) share one tile, the widest score's: each
// score keeps its own dim and extent, the launch compiles every dim in, the Spec prints each
// score's columns (score_dim_data), and the FLOP count sums the scores' own widths. A narrower
// score's columns must be a multiple of 8, and operands in bf16 pieces take one width: else
// the element path, which says why.
TEST(Lower, ScoresOverHeadDimsOfTheirOwnShareOneTile) {
  const std::vector<Program> ps =
      parse_file(testing::source_path("tests/programs/score_dims.attn"));
  ASSERT_EQ(ps.size(), 3u);
  for (Target t : {Target::cuda_sm80, Target::cuda_sm90})
    for (const auto& [d, r] : std::vector<std::pair<int64_t, int64_t>>{{128, 64}, {64, 32},
                                                                       {96, 40}, {40, 128}})
      for (const Program& p : ps) {
        SCOPED_TRACE(std::string(target_name(t)) + " d=" + std::to_string(d) +
                     " r=" + std::to_string(r) + " " + p.name);
        Extents sizes = {{"d", d}, {"r", r}};
        if (p.name != "mla_lse") sizes["e"] = 64;
        const Compiled c = lowered(p, t, sizes);
        ASSERT_EQ(c.lowered.kernels.size(), 1u);
        const LoweredKernel& lk = c.lowered.kernels[0];
        ASSERT_EQ(lk.path, LoweredKernel::Path::tensor_core) << lk.why;
        const TensorCoreKernel& tc = lk.tensor_core;
        ASSERT_EQ(tc.scores.size(), 2u);
        const Program& pr = c.plan.program;
        EXPECT_EQ(pr.dims[tc.scores[0].dim], "d");
        EXPECT_EQ(pr.dims[tc.scores[1].dim], "r");
        EXPECT_EQ(tc.scores[0].D, d);
        EXPECT_EQ(tc.scores[1].D, r);
        EXPECT_EQ(tc.D, std::max(d, r));  // the tile: the widest score's
        EXPECT_EQ(pr.dims[tc.cdim], d >= r ? "d" : "r");
        const Sm80Launch& la = tc.launch;
        std::map<std::string, int64_t> heads(la.head_dims.begin(), la.head_dims.end());
        EXPECT_EQ(heads.at("d"), d);
        EXPECT_EQ(heads.at("r"), r);
        EXPECT_EQ(heads.count("e"), p.name == "mla_lse" ? 0u : 1u);
        EXPECT_EQ(la.score_dims, d + r);
        EXPECT_EQ(la.structure.scores.at(1).dim, tc.scores[1].dim);
        // wgmma where the shared tile fills 64-column panels
        EXPECT_EQ(la.wgmma, t == Target::cuda_sm90 && tc.Dt % 64 == 0) << la.products_why;
        CompileOptions opt;
        opt.target = t;
        opt.sizes = sizes;
        const std::string src = compile_to_target(p, opt).sources.at(0);
        EXPECT_NE(src.find("int score_dim_data(int s) { return s == 0 ? " + std::to_string(d) +
                           " : " + std::to_string(r) + "; }"),
                  std::string::npos);
      }
  // one width for every score: no score_dim_data, the source as before
  {
    const Compiled c = lowered(ps.at(0), Target::cuda_sm90, {{"d", 64}, {"r", 64}, {"e", 64}});
    ASSERT_EQ(c.lowered.kernels.at(0).path, LoweredKernel::Path::tensor_core);
    CompileOptions opt;
    opt.target = Target::cuda_sm90;
    opt.sizes = {{"d", 64}, {"r", 64}, {"e", 64}};
    EXPECT_EQ(compile_to_target(ps.at(0), opt).sources.at(0).find("score_dim_data"),
              std::string::npos);
  }
  // a narrower score's columns not a multiple of 8; f32 operands (pieces) of two widths
  {
    const Compiled c = lowered(ps.at(0), Target::cuda_sm90, {{"d", 128}, {"r", 20}, {"e", 64}});
    const LoweredKernel& lk = c.lowered.kernels.at(0);
    EXPECT_EQ(lk.path, LoweredKernel::Path::element);
    EXPECT_NE(lk.why.find("contracts r = 20 columns beside a score of 128"), std::string::npos)
        << lk.why;
  }
  const Program f32 = parse_source(R"(
program mla32(qn: f32[h, m, d], qr: f32[h, m, r], kn: f32[h, n, d], kr: f32[n, r], v: f32[h, n, e]) {
  out o: f32[h, m, e] = sum(softmax(sum(qn * kn, d) + sum(qr * kr, r), n) * v, n)
}
)", "mla32.attn").at(0);
  const Compiled c = lowered(f32, Target::cuda_sm80, {{"d", 64}, {"r", 32}, {"e", 64}});
  const LoweredKernel& lk = c.lowered.kernels.at(0);
  EXPECT_EQ(lk.path, LoweredKernel::Path::element);
  EXPECT_NE(lk.why.find("operands in bf16 pieces beside scores over head dims of their own"),
            std::string::npos)
      << lk.why;
}

// One kernel's tensor-core lowering at d = e = 64 in every form a test reads: the launch, the
// text form (--dump-after lower), the printed source and explain's JSON of the kernel.
// (path: the callers assert it before reading the rest, which is empty off the path)
struct TensorCoreForms {
  LoweredKernel::Path path;
  std::string why;
  Sm80Launch launch;
  std::string text, source;
  nlohmann::json explain;
};
TensorCoreForms tensor_core_forms(const Program& p, Target target) {
  const Extents sizes = {{"d", 64}, {"e", 64}};
  Compiled c = lowered(p, target, sizes);
  const LoweredKernel& k = c.lowered.kernels.at(0);
  TensorCoreForms f{k.path, k.why, k.tensor_core.launch, c.lowered.str(c.plan), "", {}};
  if (k.path != LoweredKernel::Path::tensor_core) return f;
  CompileOptions opt;
  opt.target = target;
  opt.sizes = sizes;
  f.source = compile_to_target(p, opt).sources.at(0);
  f.explain = nlohmann::json::parse(explain_json(p, opt)).at("kernels").at(0).at("cuda");
  return f;
}

TEST(Lower, EveryExampleTakesTheTensorCorePathAtItsHeadSizes) {
  for (const std::string& name : testing::example_names()) {
    Program p = testing::example_program(name);
    const int64_t d = name.rfind("evoformer", 0) == 0 ? 32 : 64;
    Compiled c = lowered(p, Target::cuda_sm90, {{"d", d}, {"e", d}});
    ASSERT_EQ(c.lowered.kernels.size(), 1u) << name;
    const LoweredKernel& k = c.lowered.kernels[0];
    EXPECT_EQ(k.path, LoweredKernel::Path::tensor_core) << name << ": " << k.why;
    EXPECT_EQ(k.plan_kernel, 0);
    EXPECT_EQ(k.entry, k.tensor_core.launch.entry);
    EXPECT_GT(k.tensor_core.launch.smem_bytes, 0);
    EXPECT_LE(k.tensor_core.launch.smem_bytes, smem_budget(Target::cuda_sm90).per_block);
    EXPECT_FALSE(k.tensor_core.scores.empty());
  }
}

// The attention structure the template recognized, as data: diff_attn has two score
// contractions (q1.k1, q2.k2 over d), two softmax groups and a P.V accumulator per group over e.
TEST(Lower, TheTensorCoreStructureIsData) {
  Program p = testing::example_program("diff_attn");
  Compiled c = fused(p, Target::cuda_sm90, {{"d", 64}, {"e", 128}});
  ASSERT_EQ(c.lowered.kernels.size(), 1u);
  const Sm80Structure& st = c.lowered.kernels[0].tensor_core.launch.structure;
  const Program& q = c.plan.program;
  ASSERT_EQ(st.scores.size(), 2u);
  std::set<std::string> pairs;
  for (const auto& s : st.scores)
    pairs.insert(c.plan.buffers[s.q_buffer].name + "." + c.plan.buffers[s.k_buffer].name);
  EXPECT_EQ(pairs, (std::set<std::string>{"q1.k1", "q2.k2"}));
  for (const auto& s : st.scores) EXPECT_EQ(q.dims[s.dim], "d");
  EXPECT_EQ(q.dims[st.value_dim], "e");
  ASSERT_EQ(st.groups.size(), 2u);
  for (const auto& g : st.groups) {
    EXPECT_EQ(q.nodes[g.max_node].op, Op::Max);
    EXPECT_EQ(q.nodes[g.max_node].args[0], g.arg);
  }
  ASSERT_GE(st.pv.size(), 2u);
  std::set<int> groups;
  for (const auto& a : st.pv) {
    EXPECT_EQ(c.plan.buffers[a.v_buffer].name, "v");
    EXPECT_EQ(q.nodes[a.node].op, Op::Sum);
    groups.insert(a.group);
  }
  EXPECT_EQ(groups, (std::set<int>{0, 1}));
  std::string text = c.lowered.str(c.plan);
  EXPECT_NE(text.find("group 1: running max %"), std::string::npos) << text;
  EXPECT_NE(text.find(" = q1 . k1 over d"), std::string::npos) << text;
}

// A softmax group's score form is lowering's (Sm80Structure::ScoreStep), and the printer prints
// it: the masks where(c, x, -inf) and the positive uniform factors that join the exp2 scale,
// outermost first, down to the rest. A factor that is not uniform stays in the rest.
TEST(Lower, SoftmaxScoresArePeeledOfMasksAndScalesOnce) {
  using Step = Sm80Structure::ScoreStep;
  Program causal = testing::example_program("causal");
  Compiled c = lowered(causal, Target::cuda_sm90, {{"d", 64}, {"e", 64}});
  const Sm80Structure& st = c.lowered.kernels.at(0).tensor_core.launch.structure;
  const Program& q = c.plan.program;
  ASSERT_EQ(st.groups.size(), 1u);
  const Sm80Structure::Group& g = st.groups[0];
  ASSERT_EQ(g.score_steps.size(), 2u);
  EXPECT_EQ(g.score_steps[0], (Step{Step::mask, c.plan.kernels[0].tiles.mask}));
  EXPECT_EQ(g.score_steps[1].kind, Step::divide);
  EXPECT_EQ(q.nodes[g.score_steps[1].node].op, Op::Sqrt);
  EXPECT_EQ(g.score_rest, st.scores.at(0).node);
  Program p = parse_source(R"(
program twice(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e], t: f32[h]) {
  out a: bf16[h, m, e] = sum(softmax(2.0 * where(n <= m, sum(q * k, d), -inf), n) * v, n)
  out b: bf16[h, m, e] = sum(softmax(sum(q * k, d) / t, n) * v, n)
}
)", "t.attn").at(0);
  c = lowered(p, Target::cuda_sm90, {{"d", 64}, {"e", 64}});
  const Sm80Structure& s2 = c.lowered.kernels.at(0).tensor_core.launch.structure;
  ASSERT_EQ(s2.groups.size(), 2u);
  const Program& q2 = c.plan.program;
  int scaled = 0, unscaled = 0;
  for (const Sm80Structure::Group& gr : s2.groups) {
    if (!gr.score_steps.empty()) {  // 2 * where(...): the factor, then the mask
      ++scaled;
      ASSERT_EQ(gr.score_steps.size(), 2u);
      EXPECT_EQ(gr.score_steps[0].kind, Step::multiply);
      EXPECT_EQ(q2.nodes[gr.score_steps[0].node].value, 2.0);
      EXPECT_EQ(gr.score_steps[1].kind, Step::mask);
      EXPECT_EQ(q2.nodes[gr.score_rest].op, Op::Sum);
    } else {  // / t[h]: a parameter is no uniform positive factor
      ++unscaled;
      EXPECT_EQ(gr.score_rest, gr.arg);
      EXPECT_EQ(q2.nodes[gr.arg].op, Op::Div);
    }
  }
  EXPECT_EQ(scaled, 1);
  EXPECT_EQ(unscaled, 1);
}

// The tensor cores take bf16 or f16 operands of one type, and head dims of any extent up to 256
// (tiles rounded up to 32 columns: the padding reads as 0); mixed operand types take the element
// path and say why.
TEST(Lower, F16OperandsAndOddHeadDimsTakeTheTensorCores) {
  const char* src = R"(
program f16odd(q: f16[b, h, m, d], k: f16[b, h, n, d], v: f16[b, h, n, e]) {
  out o: f16[b, h, m, e] = sum(softmax(sum(q * k, d), n) * v, n)
}
program mixed(q: bf16[b, h, m, d], k: f16[b, h, n, d], v: bf16[b, h, n, e]) {
  out o: bf16[b, h, m, e] = sum(softmax(sum(q * k, d), n) * v, n)
}
)";
  for (auto [d, e] : {std::pair<int64_t, int64_t>{5, 7}, {33, 64}, {64, 64}, {1, 256}, {200, 40}}) {
    Compiled c = lowered(select_program(parse_source(src, "t.attn"), "f16odd"), Target::cuda_sm80, {{"d", d}, {"e", e}});
    ASSERT_EQ(c.lowered.kernels.size(), 1u);
    const LoweredKernel& k = c.lowered.kernels[0];
    ASSERT_EQ(k.path, LoweredKernel::Path::tensor_core) << d << " " << e << ": " << k.why;
    const TensorCoreKernel& tc = k.tensor_core;
    EXPECT_EQ(tc.elem, DType::f16);
    EXPECT_EQ(tc.D, d);
    EXPECT_EQ(tc.DV, e);
    EXPECT_EQ(tc.Dt % 32, 0);
    EXPECT_EQ(tc.DVt % 32, 0);
    EXPECT_TRUE(tc.Dt >= d && tc.Dt < d + 32) << tc.Dt;
    EXPECT_TRUE(tc.DVt >= e && tc.DVt < e + 32) << tc.DVt;
    EXPECT_EQ(tc.DVc * tc.vsplit, tc.DVt);
    EXPECT_EQ(tc.launch.score_dims, d);  // FLOPs count the program's extents
  }
  Compiled c = lowered(select_program(parse_source(src, "t.attn"), "f16odd"), Target::cuda_sm80, {{"d", 257}, {"e", 64}});
  EXPECT_EQ(c.lowered.kernels[0].path, LoweredKernel::Path::element);
  EXPECT_NE(c.lowered.kernels[0].why.find("d = 257"), std::string::npos) << c.lowered.kernels[0].why;
  // operands of two types: bf16 pieces (OperandsOfMixedTypesBecomeBf16Pieces)
  c = lowered(select_program(parse_source(src, "t.attn"), "mixed"), Target::cuda_sm80, {{"d", 64}, {"e", 64}});
  EXPECT_EQ(c.lowered.kernels[0].path, LoweredKernel::Path::tensor_core);
  EXPECT_EQ(c.lowered.kernels[0].tensor_core.launch.pieces, 2);
}

// cuda-sm90 lowers to wgmma products where the tiles line up with its 64-column panels and
// the fragments fit the registers: two compute warpgroups (8 warps of 16 rows) and a producer
// warpgroup, 128-key tiles where they fit, as many K/V stages as shared
// memory holds (at most 4); the few-rows kernel keeps one warp and
// 64-key tiles. Accumulators of 256 columns fit at 64-key tiles; wider ones take a wider value
// split (HopperGrowsTheValueSplitWhileTensorBound). Tiles that are not multiples of 64 columns
// (d = 100 pads to 128, 96 does not) and cuda-sm80 keep mma.sync (the other reasons:
// HopperSaysWhyProductsStayOnMmaSync).
TEST(Lower, HopperTakesWgmmaWhereItsTilesLineUp) {
  struct Case { const char* name; int64_t d, e; bool wgmma; int block_n; };
  for (const Case& t : {Case{"vanilla", 128, 128, true, 128}, Case{"causal", 64, 64, true, 128},
                        Case{"gqa", 128, 128, true, 128}, Case{"vanilla", 100, 128, true, 128},
                        Case{"vanilla", 64, 256, true, 64}, Case{"vanilla", 96, 96, false, 64},
                        Case{"evoformer_row", 32, 32, false, 64}}) {
    Program p = testing::example_program(t.name);
    Compiled c = lowered(p, Target::cuda_sm90, {{"d", t.d}, {"e", t.e}});
    ASSERT_EQ(c.lowered.kernels.size(), 1u);
    const LoweredKernel& k = c.lowered.kernels[0];
    ASSERT_EQ(k.path, LoweredKernel::Path::tensor_core) << t.name << ": " << k.why;
    const Sm80Launch& la = k.tensor_core.launch;
    EXPECT_EQ(la.wgmma, t.wgmma) << t.name << " d=" << t.d << " e=" << t.e;
    EXPECT_EQ(la.block_n, t.block_n) << t.name << " d=" << t.d;
    EXPECT_EQ(la.few_block_n, 64);
    if (t.wgmma) {
      // two compute warpgroups of 64 rows and a producer warpgroup
      EXPECT_TRUE(la.warp_specialized);
      EXPECT_EQ(la.warps, 12);
      EXPECT_EQ(la.producer_warps, 4);
      EXPECT_EQ(la.block_m, 128);
      EXPECT_EQ(la.rows_per_warp, 16);
      EXPECT_EQ(la.min_blocks, 1);
      EXPECT_EQ(k.tensor_core.DVc % 64, 0);
      // Q (in one or two buffers), then as many stages of K and V as fit (at most 4; nothing
      // staged here), then the ring's 256 bytes of mbarriers, tile indices and range slots (32
      // more for a second Q buffer's mbarriers). The stages come first: a second Q buffer only
      // where it fits beside them.
      const int64_t D = k.tensor_core.Dt, DV = k.tensor_core.DVc, BN = la.block_n;
      const int64_t stage = BN * D * 2 + BN * DV * 2, q = 128 * D * 2;
      const int64_t budget = smem_budget(Target::cuda_sm90).per_block;
      ASSERT_TRUE(la.q_buffers == 1 || la.q_buffers == 2);
      EXPECT_EQ(la.smem_bytes, la.q_buffers * q + la.stages * stage + 256 + 32 * (la.q_buffers - 1));
      EXPECT_LE(la.smem_bytes, budget);
      EXPECT_GE(la.stages, 2);
      const int64_t one_q = q + la.stages * stage + 256;  // the launch with one Q buffer
      EXPECT_TRUE(la.stages == 4 || one_q + stage > budget)
          << t.name << " d=" << t.d << ": a stage more would fit";
      EXPECT_EQ(la.q_buffers, one_q + q + 32 <= budget ? 2 : 1) << t.name << " d=" << t.d;
    } else {
      EXPECT_FALSE(la.warp_specialized);
      EXPECT_EQ(la.stages, 2);
      EXPECT_EQ(la.producer_warps, 0);
    }
    // the few-rows kernel: one warp, two stages of 64-key tiles (of its own value chunk)
    if (la.staged.empty())
      EXPECT_EQ(la.few_smem_bytes, static_cast<int>(16 * k.tensor_core.Dt * 2 +
                                                  2 * (64 * k.tensor_core.Dt * 2 +
                                                       64 * la.few_value_cols * 2)));
    Compiled c80 = lowered(p, Target::cuda_sm80, {{"d", t.d}, {"e", t.e}});
    EXPECT_FALSE(c80.lowered.kernels[0].tensor_core.launch.wgmma);
    EXPECT_EQ(c80.lowered.kernels[0].tensor_core.launch.warps, 4);
    EXPECT_FALSE(c80.lowered.kernels[0].tensor_core.launch.warp_specialized);
  }
}

// The compute loop's form and the wgmma width are the lowering's: m64n128k16 where the key tile
// holds 128 columns (64-key tiles keep m64n64k16); the pipelined loop with ping-pong turns where
// the scores, accumulators and P operands of a thread take at most 128 registers (the next
// scores live beside them during P.V), so d = e = 64 at 128 keys (64 + 32 + 32) takes it, d = e
// = 128 (64 + 64 + 32) does not, nor does document at d = e = 128 (its staged tile of ids no
// longer keeps it at 64-key tiles, where it took the pipelined loop).
// The text form and explain's JSON say both.
TEST(Lower, HopperPipelinesWhereTheNextScoresFitAndWidensWgmmaToTheKeyTile) {
  struct Case { const char* name; int64_t d; int block_n, wgmma_n; bool pipelined; };
  for (const Case& t : {Case{"vanilla", 64, 128, 128, true}, Case{"vanilla", 128, 128, 128, false},
                        Case{"causal", 64, 128, 128, true}, Case{"softcap", 128, 128, 128, false},
                        Case{"document", 128, 128, 128, false}, Case{"gqa", 64, 128, 128, true}}) {
    Compiled c = lowered(testing::example_program(t.name), Target::cuda_sm90, {{"d", t.d}, {"e", t.d}});
    const LoweredKernel& k = c.lowered.kernels.at(0);
    ASSERT_EQ(k.path, LoweredKernel::Path::tensor_core) << t.name << ": " << k.why;
    const Sm80Launch& la = k.tensor_core.launch;
    ASSERT_TRUE(la.wgmma && la.warp_specialized) << t.name;
    EXPECT_EQ(la.block_n, t.block_n) << t.name << " d=" << t.d;
    EXPECT_EQ(la.wgmma_n, t.wgmma_n) << t.name << " d=" << t.d;
    EXPECT_EQ(la.pipelined, t.pipelined) << t.name << " d=" << t.d;
    EXPECT_EQ(la.ping_pong, t.pipelined) << t.name << " d=" << t.d;
    CompileOptions opt;
    opt.target = Target::cuda_sm90;
    opt.sizes = {{"d", t.d}, {"e", t.d}};
    const nlohmann::json j = nlohmann::json::parse(explain_json(testing::example_program(t.name), opt));
    bool found = false;
    for (const auto& kj : j.at("kernels"))
      if (kj.contains("cuda") && kj.at("cuda").contains("pipelined")) {
        found = true;
        EXPECT_EQ(kj.at("cuda").at("pipelined").get<bool>(), t.pipelined) << t.name;
        EXPECT_EQ(kj.at("cuda").at("wgmma_n").get<int>(), t.wgmma_n) << t.name;
      }
    EXPECT_TRUE(found) << t.name;
  }
  // cuda-sm80 has neither
  Compiled c = lowered(testing::example_program("vanilla"), Target::cuda_sm80, {{"d", 64}, {"e", 64}});
  EXPECT_FALSE(c.lowered.kernels.at(0).tensor_core.launch.pipelined);
}

// Where a cuda-sm90 kernel's products stay on mma.sync, the launch says why (products_why, in the
// text form and explain's JSON): operands in pieces, a head-dim tile or value chunk that is not
// a multiple of wgmma's 64-column panels, or wgmma's live arrays over the registers it allows.
// wgmma kernels and cuda-sm80 kernels leave it empty.
// A score whose key operand is read through a gather (K from a paged cache) stays on the element
// path, and the reason names the gathered tensor, not a missing contraction.
TEST(Lower, AGatheredKeyOperandIsNamedAsWhyTheScoreStaysOffTheTensorCores) {
  Program p = parse_source(R"(
program paged(q: bf16[b, h, m, d], kc: bf16[c, w, h, d], v: bf16[b, h, n, e], page: i32[b, n]) {
  s = sum(q * kc[page[b, n], n % size(w), h, d], d)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
)", "paged.attn").at(0);
  for (Target t : {Target::cuda_sm80, Target::cuda_sm90}) {
    Compiled c = lowered(p, t, {{"d", 64}, {"e", 64}});
    const LoweredKernel& k = c.lowered.kernels.at(0);
    EXPECT_EQ(k.path, LoweredKernel::Path::element);
    EXPECT_NE(k.why.find("reads 'kc' through a gather"), std::string::npos) << k.why;
  }
}

TEST(Lower, HopperSaysWhyProductsStayOnMmaSync) {
  struct Case { const char* name; int64_t d, e; bool wgmma; };
  for (const Case& t : {Case{"vanilla", 128, 128, true}, Case{"diff_attn", 64, 64, true},
                        // two scores and two accumulators of 128 columns: 224 registers,
                        // and at a value split of 4 1.6x mma.sync's multiply-adds
                        Case{"diff_attn", 192, 256, false},
                        // wgmma's arrays fit at a value split of 4, where its exponentials
                        // would take the kernel off the tensor pipe
                        Case{"diff_attn", 64, 256, false},
                        Case{"vanilla", 96, 96, false}, Case{"evoformer_row", 32, 32, false}}) {
    const Extents sizes = {{"d", t.d}, {"e", t.e}};
    Compiled c = fused(testing::example_program(t.name), Target::cuda_sm90, sizes);
    const LoweredKernel& k = c.lowered.kernels.at(0);
    ASSERT_EQ(k.path, LoweredKernel::Path::tensor_core) << t.name << ": " << k.why;
    const Sm80Launch& la = k.tensor_core.launch;
    const std::string at = std::string(t.name) + " d=" + std::to_string(t.d);
    EXPECT_EQ(la.wgmma, t.wgmma) << at;
    EXPECT_EQ(la.products_why.empty(), t.wgmma) << at << ": " << la.products_why;
    CompileOptions opt;
    opt.target = Target::cuda_sm90;
    opt.strict = true;
    opt.sizes = sizes;
    const nlohmann::json j =
        nlohmann::json::parse(explain_json(testing::example_program(t.name), opt));
    const nlohmann::json& cj = j.at("kernels").at(0).at("cuda");
    EXPECT_EQ(cj.at("products").get<std::string>(), t.wgmma ? "wgmma" : "mma.sync") << at;
    EXPECT_EQ(cj.contains("products_why"), !t.wgmma) << at;
    Compiled c80 = fused(testing::example_program(t.name), Target::cuda_sm80, sizes);
    EXPECT_TRUE(c80.lowered.kernels.at(0).tensor_core.launch.products_why.empty()) << at;
  }
  // operands in bf16 pieces (f32 q, k, v)
  Program p = parse_source(R"(
program f32attn(q: f32[h, m, d], k: f32[h, n, d], v: f32[h, n, e]) {
  out o: f32[h, m, e] = sum(softmax(sum(q * k, d), n) * v, n)
}
)", "t.attn").at(0);
  Compiled c = fused(p, Target::cuda_sm90, {{"d", 64}, {"e", 64}});
  const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
  EXPECT_GT(la.pieces, 1);
  EXPECT_FALSE(la.wgmma);
  EXPECT_FALSE(la.products_why.empty());
}

// Where wgmma's arrays do not fit the registers at the mma.sync shape's value split, a wider
// split (each chunk recomputing the scores) takes wgmma while it stays tensor-bound: each
// softmax exponential a (row, key) pair takes in a chunk against at least 128 multiply-adds a
// pair. The score code's own special-function ops (softcap's tanh, sigmoid) do not count: the
// wider split measured faster for them (bench/NOTES.md, session 21). One accumulator of 256
// value columns fits in one chunk (176 registers at 64-key tiles: session 22); two scores and
// two groups (diff_attn) grow the split. The cuda-sm80 target keeps the split its
// accumulators need.
TEST(Lower, HopperGrowsTheValueSplitWhileTensorBound) {
  std::map<std::string, Program> programs = {
      {"sigmoid_causal",
       parse_file(testing::source_path("bench/programs/sigmoid_causal.attn")).at(0)},
      {"linear", parse_source(R"(
program linear(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  out o: bf16[b, h, m, e] = sum(relu(sum(q * k, d)) * v, n)
}
)", "t.attn").at(0)}};
  for (const char* name : {"vanilla", "causal", "diff_attn", "softcap", "alibi"})
    programs.emplace(name, testing::example_program(name));
  struct Case { const char* name; int64_t d, e; bool wgmma; int split90, split80; };
  for (const Case& t : {Case{"vanilla", 64, 256, true, 1, 1},
                        Case{"causal", 128, 256, true, 1, 1},
                        Case{"vanilla", 256, 256, true, 1, 1},
                        Case{"alibi", 128, 256, true, 1, 1},
                        // 32 + 128 + 16 registers at 64-key tiles: the bound
                        Case{"vanilla", 192, 256, true, 1, 1},
                        // 2 x 2 exponentials against 2 x 2 x 128 + 2 x 128 multiply-adds
                        Case{"diff_attn", 128, 128, true, 2, 1},
                        Case{"diff_attn", 128, 256, true, 4, 2},
                        // 2 x 2 exponentials against 2 x 2 x 64 + 2 x 128: exactly as long
                        Case{"diff_attn", 64, 128, false, 1, 1},
                        Case{"softcap", 128, 256, true, 1, 1},
                        Case{"softcap", 64, 256, true, 1, 1},
                        Case{"softcap", 128, 128, true, 1, 1},
                        // no softmax: a plain group of sigmoid weights, or of relu weights
                        Case{"sigmoid_causal", 64, 256, true, 1, 1},
                        Case{"linear", 64, 256, true, 1, 1}}) {
    const Extents sizes = {{"d", t.d}, {"e", t.e}};
    const std::string at = std::string(t.name) + " d=" + std::to_string(t.d) +
                           " e=" + std::to_string(t.e);
    const Program& p = programs.at(t.name);
    Compiled c = fused(p, Target::cuda_sm90, sizes);
    const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
    EXPECT_EQ(la.wgmma, t.wgmma) << at << ": " << la.products_why;
    EXPECT_EQ(la.value_split, t.split90) << at;
    EXPECT_EQ(la.value_split > 1, !la.value_split_why.empty()) << at;
    EXPECT_EQ(la.value_cols, t.e / t.split90) << at;
    if (t.wgmma && t.split90 > 1) {
      // why the narrower split did not take wgmma: its registers
      EXPECT_NE(la.value_split_why.find("not at " + std::to_string(t.split90 / 2) +
                                        " (wgmma's scores, accumulators and P operands would "
                                        "take"),
                std::string::npos) << at << ": " << la.value_split_why;
    }
    if (!t.wgmma)
      EXPECT_NE(la.products_why.find("the 4 softmax exponentials a (row, key) pair"),
                std::string::npos) << at << ": " << la.products_why;
    Compiled c80 = fused(p, Target::cuda_sm80, sizes);
    EXPECT_EQ(c80.lowered.kernels.at(0).tensor_core.launch.value_split, t.split80) << at;
  }
  // Growth stops at 1.5x mma.sync's multiply-adds a pair, and the reason says so.
  Compiled wide = fused(testing::example_program("diff_attn"), Target::cuda_sm90,
                          {{"d", 256}, {"e", 128}});
  const Sm80Launch& lw = wide.lowered.kernels.at(0).tensor_core.launch;
  EXPECT_FALSE(lw.wgmma);
  EXPECT_NE(lw.products_why.find("a value split of 2 would take 1280 multiply-adds a (row, key) "
                                 "pair, more than 1.5x mma.sync's 768"),
            std::string::npos) << lw.products_why;
  // A padded value dim (250 columns in tiles of 256) is not split: its chunks would differ.
  // One accumulator fits in one chunk; diff_attn's two do not.
  Compiled padded1 = fused(testing::example_program("vanilla"), Target::cuda_sm90,
                             {{"d", 64}, {"e", 250}});
  EXPECT_TRUE(padded1.lowered.kernels.at(0).tensor_core.launch.wgmma);
  Compiled padded = fused(testing::example_program("diff_attn"), Target::cuda_sm90,
                            {{"d", 128}, {"e", 250}});
  const Sm80Launch& lp = padded.lowered.kernels.at(0).tensor_core.launch;
  EXPECT_FALSE(lp.wgmma);
  EXPECT_EQ(lp.value_split, 1);
  EXPECT_NE(lp.products_why.find("; a padded value dim is not split wider"), std::string::npos)
      << lp.products_why;
}

// The value split's and the products' reasons reach every text form as the lowering wrote
// them: the lower dump, explain's text and its JSON.
TEST(Lower, WhyTheValueSplitAndTheProductsReachEveryTextForm) {
  for (const int64_t d : {128, 64}) {
    // diff_attn d = 128: wgmma at split 2; d = 64: mma.sync (its exponentials), split 1
    const bool wgmma = d == 128;
    const Extents sizes = {{"d", d}, {"e", 128}};
    const std::string name = "diff_attn d=" + std::to_string(d);
    Program p = testing::example_program("diff_attn");
    Compiled c = fused(p, Target::cuda_sm90, sizes);
    const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
    ASSERT_EQ(la.wgmma, wgmma) << name;
    CompileOptions o;
    o.target = Target::cuda_sm90;
    o.strict = true;
    o.sizes = sizes;
    const std::string text = explain(p, o);
    const nlohmann::json j = nlohmann::json::parse(explain_json(p, o))["kernels"][0]["cuda"];
    const std::string dump = c.lowered.str(c.plan);
    if (wgmma) {
      ASSERT_FALSE(la.value_split_why.empty());
      EXPECT_EQ(j["value_split"], 2);
      EXPECT_EQ(j["value_split_why"], la.value_split_why);
      EXPECT_FALSE(j.contains("products_why"));
      EXPECT_NE(text.find("value columns split in 2 chunks of 64 (" + la.value_split_why + ")"),
                std::string::npos) << text;
      EXPECT_NE(dump.find("(" + la.value_split_why + ")"), std::string::npos) << dump;
    } else {
      ASSERT_FALSE(la.products_why.empty());
      EXPECT_TRUE(la.value_split_why.empty());
      EXPECT_EQ(j["products"], "mma.sync");
      EXPECT_EQ(j["products_why"], la.products_why);
      EXPECT_FALSE(j.contains("value_split_why"));
      EXPECT_NE(text.find(la.products_why), std::string::npos) << text;
      EXPECT_NE(dump.find(la.products_why), std::string::npos) << dump;
    }
  }
}

// The few-rows kernel (one warp of 16 rows) has a value split of its own: chunks of at most
// 128 value columns (a measured bound: bench/NOTES.md, session 22) whose accumulators take at
// most 128 registers a thread and whose tiles fit a block's shared memory, whatever the full
// kernel's split (wgmma holds 256 value columns in one chunk; diff_attn's two accumulators take
// more chunks there, or fewer). Its partial rows, shared memory and combine entry follow its
// chunk, and the split and its reason reach the lower dump and explain (text and JSON).
// Programs of three and four accumulators, and of f32 operands in pieces, too. A chunk that
// cannot halve into whole chunks of 32 columns (e = 192 at four accumulators) or a padded one
// stays as it is.
TEST(Lower, TheFewRowsKernelHasAValueSplitOfItsOwn) {
  std::vector<Program> programs;
  for (const std::string& name : testing::example_names())
    programs.push_back(testing::example_program(name));
  for (const bool f32 : {false, true}) {
    programs.push_back(testing::source_program("bench/programs/four_acc.attn", f32));
    programs.push_back(testing::parse_typed(R"(
program three(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], w: bf16[b, h, n, e]) {
  s = sum(q * k, d)
  p1 = softmax(s, n)
  p2 = softmax(where(n <= m, s, -inf), n)
  out o1: f32[b, h, m, e] = sum(p1 * v, n)
  out o2: f32[b, h, m, e] = sum(p1 * w, n)
  out o3: f32[b, h, m, e] = sum(p2 * v, n)
}
)", "three.attn", f32));
  }
  int multi = 0;  // kernels of three or four accumulators split for their registers
  int lowered_tc = 0;
  for (const Target target : {Target::cuda_sm90, Target::cuda_sm80}) {
    const SmemBudget budget = smem_budget(target);
    for (const Program& p : programs) {
      for (const auto& [d, e] : std::vector<std::pair<int64_t, int64_t>>{
               {32, 64}, {32, 128}, {32, 192}, {32, 256}, {32, 250}, {128, 128}, {128, 256}}) {
        Extents sizes = {{"d", d}, {"e", e}};
        if (p.name.rfind("evoformer", 0) == 0) sizes = {{"d", e}};  // (its value dim is d)
        Compiled c = fused(p, target, sizes);
        const std::string at = p.name + " d=" + std::to_string(d) + " e=" + std::to_string(e) +
                               " " + target_name(target);
        // (f32 operands at e = 250: the full kernel's tiles do not fit; the element path)
        if (c.lowered.kernels.at(0).path != LoweredKernel::Path::tensor_core) continue;
        ++lowered_tc;
        const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
        const int A = la.num_acc;
        const int fvs = la.few_value_split, cols = la.few_value_cols;
        // the whole (padded) value dim in either kernel's chunks
        EXPECT_EQ(fvs * cols, la.value_split * la.value_cols) << at;
        EXPECT_LE(la.few_smem_bytes, budget.per_block) << at;
        if (e == 250) {
          EXPECT_EQ(fvs, 1) << at;  // padded to 256: not split (the chunks would differ)
        } else if (cols % 64 == 0) {  // (else it could not halve into whole chunks of 32)
          EXPECT_LE(cols, 128) << at;
          EXPECT_LE(A * cols / 2, 128) << at;
        }
        if (fvs > 1) {  // and no narrower than it needs: the reason held at twice the chunk
          const std::string& why = la.few_value_split_why;
          if (2 * cols > 128)
            EXPECT_EQ(why, "one warp holds at most 128 value columns an accumulator, not " +
                               std::to_string(2 * cols)) << at;
          else if (A * cols > 128)
            EXPECT_NE(why.find(std::to_string(A) + " accumulators would take " +
                               std::to_string(A * cols) + " registers"),
                      std::string::npos) << at << ": " << why;
          else
            EXPECT_NE(why.find("bytes of shared memory"), std::string::npos) << at << ": " << why;
          multi += A > 2 && 2 * cols <= 128;
        } else {
          EXPECT_TRUE(la.few_value_split_why.empty()) << at;
        }
        EXPECT_EQ(la.few_part_row - A * cols, la.part_row - A * la.value_cols) << at;
        EXPECT_EQ(la.value_split_of(true), fvs);
        EXPECT_EQ(la.value_cols_of(true), cols);
        EXPECT_EQ(la.part_row_of(true), la.few_part_row);
        EXPECT_EQ(la.few_combine_entry, la.few_entry + "_combine") << at;
      }
    }
  }
  EXPECT_GT(multi, 0);  // the register bound was exercised
  EXPECT_GE(lowered_tc, 2 * 7 * static_cast<int>(programs.size()) - 8);
  // diff_attn d128/e128 on Hopper: wgmma in two chunks of 64 (its arrays fit only there), the
  // few-rows kernel in one of 128 (mma.sync: two accumulators of 64 registers each)
  {
    Compiled c = fused(testing::example_program("diff_attn"), Target::cuda_sm90,
                         {{"d", 128}, {"e", 128}});
    const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
    EXPECT_TRUE(la.wgmma);
    EXPECT_EQ(la.value_split, 2);
    EXPECT_EQ(la.few_value_split, 1);
    EXPECT_EQ(la.few_value_cols, 128);
    EXPECT_TRUE(la.few_value_split_why.empty());
  }
  // vanilla d64/e256 on Hopper: wgmma in one chunk; the few-rows kernel in 2 of 128 columns
  Program p = testing::example_program("vanilla");
  const Extents sizes = {{"d", 64}, {"e", 256}};
  Compiled c = fused(p, Target::cuda_sm90, sizes);
  const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
  ASSERT_TRUE(la.wgmma);
  EXPECT_EQ(la.value_split, 1);
  EXPECT_EQ(la.few_value_split, 2);
  EXPECT_EQ(la.few_value_cols, 128);
  EXPECT_EQ(la.few_part_row, 2 + 128);
  EXPECT_EQ(la.part_row, 2 + 256);
  // Q (16 x 64), then two stages of a 64-key K tile and a 64-key V tile of 128 columns
  EXPECT_EQ(la.few_smem_bytes, 16 * 64 * 2 + 2 * (64 * 64 * 2 + 64 * 128 * 2));
  EXPECT_EQ(la.few_value_split_why,
            "one warp holds at most 128 value columns an accumulator, not 256");
  CompileOptions o;
  o.target = Target::cuda_sm90;
  o.strict = true;
  o.sizes = sizes;
  const nlohmann::json j = nlohmann::json::parse(explain_json(p, o))["kernels"][0]["cuda"];
  EXPECT_EQ(j["value_split"], 1);
  EXPECT_EQ(j["few_rows_value_split"], 2);
  EXPECT_EQ(j["few_rows_value_split_why"], la.few_value_split_why);
  EXPECT_NE(explain(p, o).find("the few-rows kernel's value columns split in 2 chunks of 128 (" +
                               la.few_value_split_why + ")"),
            std::string::npos);
  EXPECT_NE(c.lowered.str(c.plan).find("2 value-column chunks of 128 (" +
                                       la.few_value_split_why + ")"),
            std::string::npos);
}

// A wgmma kernel that stages a tile takes 128-key tiles where its stages fit (the score code reads
// a staged tile at the running kernel's pitch, TileView::bn), while the few-rows kernel keeps its
// 64-key tiles; the staged areas follow all stages' K and V, each rounded up to 128 bytes (the
// few-rows kernel's 16 x 144 bytes of pair are not a whole KiB), which keeps document at d = 128
// (a staged key tile of 128 ids: 640 bytes, not 1 KiB) at 3 stages in 227 KiB. GPU test:
// CudaBackend.StagedTilesMatchTheReference (its decode sizes run the few-rows kernel).
TEST(Lower, HopperKernelsWithStagedTilesTakeTheKeyTileThatFits) {
  Program p = parse_source(R"(
program pair_bias(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], pair: bf16[b, h, m, n]) {
  out o: bf16[b, h, m, e] = sum(softmax(sum(q * k, d) / sqrt(size(d)) + pair, n) * v, n)
}
)", "t.attn").at(0);
  Compiled c = lowered(p, Target::cuda_sm90, {{"d", 64}, {"e", 64}});
  const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
  ASSERT_FALSE(la.staged.empty());
  EXPECT_TRUE(la.wgmma);
  EXPECT_EQ(la.block_n, 128);
  EXPECT_EQ(la.few_block_n, 64);
  EXPECT_EQ(la.stages, 3);
  const int staged = (128 * (128 * 2 + 16) + 127) / 128 * 128;
  EXPECT_EQ(la.smem_bytes, 128 * 64 * 2 + 3 * (2 * 128 * 64 * 2) + 3 * staged + 256);
  EXPECT_EQ(la.few_smem_bytes, 16 * 64 * 2 + 2 * (2 * 64 * 64 * 2) + 2 * (16 * (64 * 2 + 16)));
  Compiled doc = lowered(testing::example_program("document"), Target::cuda_sm90,
                         {{"d", 128}, {"e", 128}});
  const Sm80Launch& dl = doc.lowered.kernels.at(0).tensor_core.launch;
  ASSERT_EQ(dl.staged.size(), 1u);
  EXPECT_EQ(dl.block_n, 128);
  EXPECT_EQ(dl.stages, 3);
  EXPECT_EQ(dl.smem_bytes, 128 * 128 * 2 + 3 * (2 * 128 * 128 * 2) + 3 * 640 + 256);
  EXPECT_LE(dl.smem_bytes, smem_budget(Target::cuda_sm90).per_block);
}

// The tile scan by warps (Sm80Launch::scan_by_warps, the Spec's kScanByWarps): a warp-specialized
// kernel whose classify reads data over the keys (document's doc[n]) has its producer's four
// warps classify four spans at once; index masks (causal, sliding window), unmasked kernels and
// the sm80 path scan as before. The text form and explain's JSON say it. GPU test: the document
// examples and CudaBackend's data-mask tests (cuda_examples_test.cpp) on the sm90 path.
TEST(Lower, HopperScansDataMaskedTilesByWarps) {
  struct Case { const char* name; Target target; bool by_warps; };
  for (const Case& t : {Case{"document", Target::cuda_sm90, true},
                        Case{"document", Target::cuda_sm80, false},
                        Case{"causal", Target::cuda_sm90, false},
                        Case{"sliding_window", Target::cuda_sm90, false},
                        Case{"vanilla", Target::cuda_sm90, false}}) {
    const Program p = testing::example_program(t.name);
    Compiled c = lowered(p, t.target, {{"d", 128}, {"e", 128}});
    const LoweredKernel& k = c.lowered.kernels.at(0);
    ASSERT_EQ(k.path, LoweredKernel::Path::tensor_core) << t.name << ": " << k.why;
    const Sm80Launch& la = k.tensor_core.launch;
    EXPECT_EQ(la.scan_by_warps, t.by_warps) << t.name;
    EXPECT_EQ(c.lowered.str(c.plan).find("tile scan by warps") != std::string::npos, t.by_warps)
        << t.name;
    CompileOptions opt;
    opt.target = t.target;
    opt.sizes = {{"d", 128}, {"e", 128}};
    const nlohmann::json j = nlohmann::json::parse(explain_json(p, opt));
    EXPECT_EQ(j.at("kernels").at(0).at("cuda").at("scan_by_warps").get<bool>(), t.by_warps)
        << t.name;
  }
}

// Sm80Launch::checks_read_scores (the Spec's kChecksReadScores): where a check of the score code
// reads a score product (a checked gather's index, the divisor of x % y), a partial tile's score
// code runs only at real keys (a padded key's product, 0, could fail a check no real element
// fails); elsewhere it runs at every key and the result is selected. Checks that read only the
// indices, or a % whose dividend alone reads the score, and every example keep the select. On
// both targets; the text form and explain's JSON say it.
TEST(Lower, ChecksThatReadScoresKeepTheScoreCodeAtRealKeys) {
  struct Case { const char* name; const char* body; bool reads; };
  const std::string head =
      "(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], table: f32[u]) {\n"
      "  s = sum(q * k, d)\n  out o: f32[b, h, m, e] = sum(softmax(";
  for (const Case& t : {Case{"bucket", "s + table[i32(s == 0.0) * 100]", true},
                        Case{"log_bucket", "s + table[i32(log2(abs(s))) + 40]", true},
                        Case{"divisor", "s + f32((m + n) % i32(abs(s) * 4.0))", true},
                        Case{"in_mask", "where(table[i32(abs(s))] > 0.0, s, -inf)", true},
                        Case{"nested", "s + table[i32(table[i32(abs(s))])]", true},
                        Case{"dividend", "s + f32(i32(abs(s)) % 7)", false},
                        Case{"by_index", "s + table[n - m + 300]", false},
                        Case{"guarded", "where(s == 0.0, s + table[n - m + 5], s)", false},
                        Case{"plain", "s", false}}) {
    const Program p =
        parse_source("program " + std::string(t.name) + head + t.body + ", n) * v, n)\n}\n",
                     "t.attn")
            .at(0);
    for (Target target : {Target::cuda_sm90, Target::cuda_sm80}) {
      const TensorCoreForms f = tensor_core_forms(p, target);
      ASSERT_EQ(f.path, LoweredKernel::Path::tensor_core) << t.name << ": " << f.why;
      EXPECT_EQ(f.launch.checks_read_scores, t.reads) << t.name;
      EXPECT_EQ(f.text.find("checks read the scores") != std::string::npos, t.reads) << t.name;
      EXPECT_EQ(f.source.find("kChecksReadScores = true") != std::string::npos, t.reads)
          << t.name;
      EXPECT_EQ(f.explain.at("checks_read_scores").get<bool>(), t.reads) << t.name;
    }
  }
  // a plain group's weights (sigmoid attention) and the second score of two (diff_attn's form)
  const Program plain_group = parse_source(R"(
program sig(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], table: f32[u]) {
  s = sum(q * k, d)
  out o: f32[b, h, m, e] = sum(sigmoid(s + table[i32(abs(s))]) * v, n)
}
)", "t.attn").at(0);
  const Program two = parse_source(R"(
program two(q: bf16[b, h, m, d], k: bf16[b, h, n, d], p: bf16[b, h, m, d], r: bf16[b, h, n, d], v: bf16[b, h, n, e], table: f32[u]) {
  s1 = sum(q * k, d)
  s2 = sum(p * r, d)
  out o: f32[b, h, m, e] = sum(softmax(s1, n) * v, n) - sum(softmax(s2 + table[i32(abs(s2))], n) * v, n)
}
)", "t.attn").at(0);
  for (const Program& p : {plain_group, two}) {
    Compiled c = lowered(p, Target::cuda_sm90, {{"d", 64}, {"e", 64}});
    const LoweredKernel& k = c.lowered.kernels.back();
    ASSERT_EQ(k.path, LoweredKernel::Path::tensor_core) << p.name << ": " << k.why;
    EXPECT_TRUE(k.tensor_core.launch.checks_read_scores) << p.name;
  }
  for (const std::string& name : testing::example_names()) {
    if (name.rfind("evoformer", 0) == 0) continue;  // (d = 32: no tensor cores at d = 128)
    Compiled c = lowered(testing::example_program(name), Target::cuda_sm90, {{"d", 128}, {"e", 128}});
    for (const LoweredKernel& k : c.lowered.kernels)
      if (k.path == LoweredKernel::Path::tensor_core)
        EXPECT_FALSE(k.tensor_core.launch.checks_read_scores) << name;
  }
}

// Sm80Launch::clamp_keys (the Spec's kClampKeys) and the tile mask as a pass (kKeep): every
// tile runs one element loop, at a padded key of the last tile too. Where the per-element code
// reads device memory by the key (a gather by a computed index, more (row, key) tiles than are
// staged) or divides by a value read at the key, it runs at key N - 1 there; a read the kernel
// holds in shared memory (a staged tile, a value per diagonal) or a constant divisor keeps the
// key itself. A mask whose removed elements contribute nothing is printed as keep(), the score
// without it. On both targets; the text form and explain's JSON say it.
TEST(Lower, KeysClampedOnlyWhereThePerElementCodeReadsDeviceMemoryByTheKey) {
  struct Case { const char* name; const char* params; const char* score; bool clamp, keep; };
  // (score_mask: the mask reads a score, so keep() could not compute it: the score holds it)
  for (const Case& t :
       {Case{"pairmod", ", pair: f32[m, r]", "sum(q * k, d) + pair[m, (n + m) % 7]", true, false},
        Case{"divkey", ", w: i32[n]", "sum(q * k, d) + f32((m + n) % w[n])", true, false},
        Case{"bigbias",
             ", x1: f32[b, h, m, n], x2: f32[b, h, m, n], x3: f32[b, h, m, n], "
             "x4: f32[b, h, m, n], x5: f32[b, h, m, n]",
             "sum(q * k, d) + x1 + x2 + x3 + x4 + x5", true, false},
        Case{"masked_gather", ", table: f32[u]",
             "where(n <= m, sum(q * k, d) + table[m * 3 + n], -inf)", true, true},
        Case{"by_diagonal", ", table: f32[u]", "sum(q * k, d) + table[n - m + 300]", false, false},
        Case{"staged_doc", ", doc: i32[t]",
             "where(doc[m] == doc[n], sum(q * k, d), -inf)", false, true},
        Case{"const_mod", "", "where((m - n) % 3 == 0 and n <= m, sum(q * k, d), -inf)", false,
             true},
        Case{"score_mask", "", "where(sum(q * k, d) > 0.0 and n <= m, sum(q * k, d), -inf)",
             false, false}}) {
    const Program p =
        parse_source("program " + std::string(t.name) +
                         "(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]" +
                         t.params + ") {\n  s = " + t.score +
                         "\n  out o: f32[b, h, m, e] = sum(softmax(s, n) * v, n)\n}\n",
                     "t.attn")
            .at(0);
    for (Target target : {Target::cuda_sm90, Target::cuda_sm80}) {
      const TensorCoreForms f = tensor_core_forms(p, target);
      ASSERT_EQ(f.path, LoweredKernel::Path::tensor_core) << t.name << ": " << f.why;
      EXPECT_EQ(f.launch.clamp_keys, t.clamp) << t.name;
      EXPECT_EQ(f.text.find("keys clamped") != std::string::npos, t.clamp) << t.name;
      EXPECT_EQ(f.launch.keep_pass, t.keep) << t.name;
      EXPECT_EQ(f.text.find("mask as a pass") != std::string::npos, t.keep) << t.name;
      EXPECT_EQ(f.source.find("kClampKeys = true") != std::string::npos, t.clamp) << t.name;
      EXPECT_EQ(f.source.find("static __device__ bool keep(") != std::string::npos, t.keep)
          << t.name;
      EXPECT_EQ(f.source.find("kMasked"), std::string::npos) << t.name;  // one score function
      EXPECT_EQ(f.explain.at("clamp_keys").get<bool>(), t.clamp) << t.name;
      EXPECT_EQ(f.explain.at("keep_pass").get<bool>(), t.keep) << t.name;
    }
  }
  // A mask that only a value per tile line reads in the score code (a weight where(mask, f, 0)
  // computed per diagonal or per key): keep() computes the mask's operands itself, so its reads
  // decide the clamp and the staging too. hidden_diag: the mask reads a gather by a function of
  // n - m (not a plain dim index: read from device memory, so keys are clamped: at a padded key
  // its index could be past the table); hidden_key: the mask reads msk[n], staged with the K/V
  // tile (zero past N), so no clamp.
  struct Hidden { const char* name; const char* params; const char* weight; bool clamp, staged; };
  for (const Hidden& t :
       {Hidden{"hidden_diag", ", tab: f32[u]",
               "where(tab[n - m + size(m) - 1] > 0.0, exp(tab[n - m + size(m) - 1]), 0.0)", true,
               false},
        Hidden{"hidden_key", ", msk: i32[n], pos: f32[n]", "where(msk[n] != 0, exp(pos[n]), 0.0)",
               false, true}}) {
    const Program p = parse_source("program " + std::string(t.name) +
                                       "(q: bf16[b, h, m, d], k: bf16[b, h, n, d], "
                                       "v: bf16[b, h, n, e]" +
                                       t.params + ") {\n  w = " + t.weight +
                                       "\n  out o: f32[b, h, m, e] = sum(w * sigmoid(sum(q * k, "
                                       "d)) * v, n)\n}\n",
                                   "t.attn")
                          .at(0);
    for (Target target : {Target::cuda_sm90, Target::cuda_sm80}) {
      Compiled c = lowered(p, target, {{"d", 64}, {"e", 64}});
      const LoweredKernel& k = c.lowered.kernels.at(0);
      ASSERT_EQ(k.path, LoweredKernel::Path::tensor_core) << t.name << ": " << k.why;
      const TensorCoreKernel& tc = k.tensor_core;
      ASSERT_TRUE(tc.launch.keep_pass) << t.name;
      EXPECT_EQ(tc.launch.clamp_keys, t.clamp) << t.name;
      EXPECT_EQ(tc.diagonal.size() + tc.key_values.size(), 1u) << t.name;  // the weight
      ASSERT_EQ(tc.staged.size(), t.staged ? 1u : 0u) << t.name;
      if (t.staged) EXPECT_EQ(p.params[tc.staged[0].param].name, "msk") << t.name;
    }
  }
  for (const std::string& name : testing::example_names()) {
    if (name.rfind("evoformer", 0) == 0) continue;  // (d = 32: no tensor cores at d = 128)
    Compiled c = lowered(testing::example_program(name), Target::cuda_sm90, {{"d", 128}, {"e", 128}});
    for (const LoweredKernel& k : c.lowered.kernels)
      if (k.path == LoweredKernel::Path::tensor_core) {
        EXPECT_FALSE(k.tensor_core.launch.clamp_keys) << name;
        // (no example's mask reads a score: every one whose removed elements contribute
        // nothing runs it as a pass)
        EXPECT_EQ(k.tensor_core.launch.keep_pass,
                  c.plan.kernels.at(k.plan_kernel).tiles.unmasked_full)
            << name;
      }
  }
}

// A warp-specialized kernel's producer copies K and V by TMA: one 5-dim map per operand (the K
// of each score, then each value tensor), dims innermost first: the column dim, the key dim,
// the buffer's parallel dims in position order. A value split starts V's column coordinate at
// the block's chunk. mma.sync kernels have none, and neither does a kernel with one operand no
// 5-dim map takes (four parallel dims).
TEST(Lower, HopperProducersCopyKAndVByTensorMaps) {
  struct Case { const char* name; std::vector<std::string> k_dims, v_dims; };
  for (const Case& t : {Case{"vanilla", {"d", "n", "b", "h"}, {"e", "n", "b", "h"}},
                        Case{"gqa", {"d", "n", "b", "g"}, {"e", "n", "b", "g"}}}) {
    Program p = testing::example_program(t.name);
    Compiled c = lowered(p, Target::cuda_sm90, {{"d", 128}, {"e", 128}});
    const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
    ASSERT_TRUE(la.warp_specialized) << t.name;
    ASSERT_EQ(la.tma.size(), 2u) << t.name;
    EXPECT_EQ(la.tma[0].buffer, la.structure.scores.at(0).k_buffer);
    EXPECT_EQ(la.tma[1].buffer, la.structure.pv.at(0).v_buffer);
    for (int i = 0; i < 2; ++i) {
      const Sm80Launch::TmaOperand& op = la.tma[i];
      std::vector<std::string> names;
      for (int d : op.dims) names.push_back(p.dims[d]);
      EXPECT_EQ(names, i == 0 ? t.k_dims : t.v_dims) << t.name;
      ASSERT_EQ(op.pos.size(), op.dims.size());
      for (size_t j = 0; j < op.pos.size(); ++j)
        EXPECT_EQ(c.plan.buffers[op.buffer].dims[op.pos[j]], op.dims[j]);
      EXPECT_FALSE(op.value_chunk);
    }
    EXPECT_TRUE(lowered(p, Target::cuda_sm80, {{"d", 128}, {"e", 128}})
                    .lowered.kernels.at(0).tensor_core.launch.tma.empty());
  }
  EXPECT_TRUE(lowered(testing::example_program("vanilla"), Target::cuda_sm90, {{"d", 96}, {"e", 96}})
                  .lowered.kernels.at(0).tensor_core.launch.tma.empty());
  // three accumulators of 128 columns: the value columns split in two chunks of 64
  Program p3 = parse_source(R"(
program three(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], w: bf16[b, h, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  out o1: f32[b, h, m, e] = sum(softmax(s, n) * v, n)
  out o2: f32[b, h, m, e] = sum(softmax(s * 0.5, n) * v, n)
  out o3: f32[b, h, m, e] = sum(softmax(s, n) * w, n)
}
)", "t.attn").at(0);
  // four parallel dims on K (a map has five: column, key and three more): no operand by TMA,
  // not even V, whose dims would fit
  Program p4 = parse_source(R"(
program four(q: bf16[a, b, c, h, m, d], k: bf16[a, b, c, h, n, d], v: bf16[b, h, n, e]) {
  out o: f32[a, b, c, h, m, e] = sum(softmax(sum(q * k, d) / sqrt(size(d)), n) * v, n)
}
)", "t.attn").at(0);
  Compiled c4 = lowered(p4, Target::cuda_sm90, {{"d", 128}, {"e", 128}});
  ASSERT_EQ(c4.lowered.kernels.at(0).path, LoweredKernel::Path::tensor_core)
      << c4.lowered.kernels[0].why;
  EXPECT_TRUE(c4.lowered.kernels[0].tensor_core.launch.warp_specialized);
  EXPECT_TRUE(c4.lowered.kernels[0].tensor_core.launch.tma.empty());
  Compiled c3 = lowered(p3, Target::cuda_sm90, {{"d", 64}, {"e", 128}});
  ASSERT_EQ(c3.lowered.kernels.size(), 1u);
  const Sm80Launch& l3 = c3.lowered.kernels[0].tensor_core.launch;
  ASSERT_TRUE(l3.warp_specialized);
  EXPECT_EQ(l3.value_split, 2);
  ASSERT_EQ(l3.tma.size(), 3u);  // one K, two value tensors
  EXPECT_FALSE(l3.tma[0].value_chunk);
  EXPECT_TRUE(l3.tma[1].value_chunk);
  EXPECT_TRUE(l3.tma[2].value_chunk);
}

// Warp-specialized kernels run a persistent grid, the sm80 path never. Without a tile mask
// (every work item computes the same key tiles) the walking calls have a build of their own
// where its loop differs; per call (choose_key_split) the blocks walk the items when an item's
// key loop is at most kWalkTiles tiles (after a key split), never in the few-rows kernel. A
// kernel whose items' work differs (a mask the interval rules decide: index arithmetic, causal
// and windows; key tiles classified by data, document's ids, a per-key flag) walks in its main
// build at every length; a mask they never decide (keep[b, h, m, n]) walks as the unmasked do,
// in its main build. The grid (sm80_grid): as many blocks as are resident at once, fewer when
// there are fewer items; else (row tiles, parallel indices over y and z).
// GPU test: the examples, CudaBackend's data-mask tests and CudaProfile's walking test.
TEST(Lower, PersistentGridsWalkShortKeyLoopsOrItemsOfUnequalWork) {
  const Extents hd = {{"d", 128}, {"e", 128}};
  for (const char* name : {"vanilla", "softcap", "cross"}) {
    const Compiled c = lowered(testing::example_program(name), Target::cuda_sm90, hd);
    const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
    EXPECT_TRUE(la.warp_specialized && la.persistent && !la.items_differ) << name;
    // the walking calls' own build (its entry), pipelined with ping-pong at d = e = 128,
    // where the main build (long key loops) is not
    EXPECT_EQ(la.walk_entry, name + std::string("_k0_walk")) << name;
    EXPECT_TRUE(la.walk_pipelined) << name;
    EXPECT_FALSE(la.pipelined) << name;
    const Compiled c80 = lowered(testing::example_program(name), Target::cuda_sm80, hd);
    const Sm80Launch& sm80 = c80.lowered.kernels.at(0).tensor_core.launch;
    EXPECT_FALSE(sm80.persistent) << name;
    EXPECT_EQ(sm80.walk_entry, "") << name;
    // at d = e = 64 the main loop is pipelined already: the main build walks too
    const Compiled c64 =
        lowered(testing::example_program(name), Target::cuda_sm90, {{"d", 64}, {"e", 64}});
    const Sm80Launch& d64 = c64.lowered.kernels.at(0).tensor_core.launch;
    EXPECT_TRUE(d64.persistent && d64.pipelined && d64.walk_pipelined) << name;
    EXPECT_EQ(d64.walk_entry, "") << name;
  }
  for (const char* name : {"causal", "gqa", "alibi", "lse", "sliding_window", "prefix_lm"}) {
    const Compiled c = lowered(testing::example_program(name), Target::cuda_sm90, hd);
    const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
    EXPECT_TRUE(la.warp_specialized && la.persistent && la.items_differ) << name;
    EXPECT_EQ(la.producer_regs, 56) << name;
    EXPECT_EQ(la.walk_entry, "") << name;  // (the main build walks)
    EXPECT_EQ(la.walk_pipelined, la.pipelined) << name;
    EXPECT_TRUE(choose_key_split(la, 512, 512, 512, 132).walk) << name;
    EXPECT_TRUE(choose_key_split(la, 4096, 64, 4096, 132).walk) << name;
    EXPECT_FALSE(choose_key_split(la, 1, 512, 4096, 132).walk) << name;
    EXPECT_FALSE(lowered(testing::example_program(name), Target::cuda_sm80, hd)
                     .lowered.kernels.at(0).tensor_core.launch.persistent)
        << name;
  }
  // tiles classified by data: document's ids, and a flag per key and per row (a program no
  // example has); both head sizes; the main build walks (no entry of its own), at any length
  const Program flags = parse_source(R"(
program flags(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], keep: i32[n], row: i32[m]) {
  s = where(keep[n] > 0 and row[m] >= keep[n], sum(q * k, d), -inf)
  out o: f32[b, h, m, e] = sum(softmax(s, n) * v, n)
}
)", "t.attn").at(0);
  for (const Program& p : {testing::example_program("document"), flags})
    for (int64_t d : {64, 128}) {
      const Compiled c = lowered(p, Target::cuda_sm90, {{"d", d}, {"e", d}});
      const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
      EXPECT_TRUE(la.warp_specialized && la.persistent && la.scan_by_warps && la.items_differ)
          << p.name << " " << d;
      EXPECT_EQ(la.producer_regs, 88) << p.name << " " << d;  // (no spills: NvrtcExamples)
      EXPECT_NE(c.lowered.str(c.plan).find("producer 88 registers"), std::string::npos) << p.name;
      EXPECT_EQ(la.walk_entry, "") << p.name << " " << d;
      EXPECT_EQ(la.walk_pipelined, la.pipelined) << p.name << " " << d;
      EXPECT_TRUE(choose_key_split(la, 4096, 64, 4096, 132).walk) << p.name << " " << d;
      EXPECT_TRUE(choose_key_split(la, 512, 512, 512, 132).walk) << p.name << " " << d;
      EXPECT_FALSE(choose_key_split(la, 1, 512, 4096, 132).walk) << p.name << " " << d;
      EXPECT_FALSE(lowered(p, Target::cuda_sm80, {{"d", d}, {"e", d}})
                       .lowered.kernels.at(0).tensor_core.launch.persistent)
          << p.name << " " << d;
    }
  {  // a per-pair mask tensor: no tile is ever decided, every item computes every tile
    const Program keep = parse_source(R"(
program keep(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], keep: bool[b, h, m, n]) {
  s = where(keep, sum(q * k, d) / sqrt(size(d)), -inf)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
)", "t.attn").at(0);
    const Compiled ck = lowered(keep, Target::cuda_sm90, hd);
    const Sm80Launch& lk = ck.lowered.kernels.at(0).tensor_core.launch;
    EXPECT_GE(lk.mask_node, 0);
    EXPECT_TRUE(lk.persistent && !lk.items_differ);
    EXPECT_EQ(lk.walk_entry, "");  // (masked: the main build walks)
    EXPECT_TRUE(choose_key_split(lk, 512, 512, 512, 132).walk);
    EXPECT_FALSE(choose_key_split(lk, 4096, 64, 4096, 132).walk);
  }
  const Compiled c = lowered(testing::example_program("vanilla"), Target::cuda_sm90, hd);
  const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
  ASSERT_EQ(la.min_blocks, 1);
  const int64_t walk_keys = la.block_n * KeySplit::kWalkTiles;
  // rows, parallel indices, keys -> (few, split, walk)
  struct Case { int64_t rows, par, keys; bool few; int split; bool walk; };
  for (const Case& t : {Case{512, 512, walk_keys, false, 1, true},
                        Case{512, 512, walk_keys + 1, false, 1, false},
                        Case{4096, 128, 4096, false, 1, false},
                        Case{1, 256, walk_keys, true, 1, false},
                        Case{200, 1, 16 * walk_keys, false, 16, true},
                        Case{200, 1, 128 * walk_keys, false, 64, false}}) {
    const KeySplit ks = choose_key_split(la, t.rows, t.par, t.keys, 132);
    EXPECT_EQ(ks.few, t.few) << t.rows << " " << t.par << " " << t.keys;
    EXPECT_EQ(ks.split, t.split) << t.rows << " " << t.par << " " << t.keys;
    EXPECT_EQ(ks.walk, t.walk) << t.rows << " " << t.par << " " << t.keys;
  }
  KeySplit walk;
  walk.walk = true;
  const Dim3 g = sm80_grid(la, walk, 4, 8 * 16, 132);  // 512 items
  EXPECT_EQ(std::vector<unsigned>({g.x, g.y, g.z}), std::vector<unsigned>({132, 1, 1}));
  const Dim3 small = sm80_grid(la, walk, 3, 5, 132);  // 15 items: a block each
  EXPECT_EQ(std::vector<unsigned>({small.x, small.y, small.z}), std::vector<unsigned>({15, 1, 1}));
  const Dim3 grid = sm80_grid(la, KeySplit{}, 32, 70000, 132);
  EXPECT_EQ(std::vector<unsigned>({grid.x, grid.y, grid.z}), std::vector<unsigned>({32, 65535, 2}));
}

// The few-rows kernel (one warp a block) is resident as often as shared memory allows, and a
// decode call's key split fills whole waves of those blocks: b8 h32 (256 blocks) on 132 SMs x 3
// takes 3 chunks (768 blocks, 2 waves: 5 chunks would take 4 waves of shorter chunks), one b1
// h32 row 12; a grid of at least a wave of blocks is not split.
TEST(Lower, DecodeSplitsFillWholeWavesOfTheFewRowsKernel) {
  const Extents hd = {{"d", 128}, {"e", 128}};
  const Compiled c = lowered(testing::example_program("vanilla"), Target::cuda_sm90, hd);
  const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
  const SmemBudget b = smem_budget(Target::cuda_sm90);
  EXPECT_EQ(la.few_block_n, 64);
  EXPECT_EQ(la.few_blocks_per_sm, b.per_sm / (la.few_smem_bytes + 1024));
  ASSERT_EQ(la.few_blocks_per_sm, 3);  // 4 KiB of Q, 2 stages of 64 keys of K and V
  EXPECT_EQ(choose_key_split(la, 1, 8 * 32, 16384, 132).split, 3);
  EXPECT_EQ(choose_key_split(la, 4, 8 * 32, 16384, 132).split, 3);
  EXPECT_EQ(choose_key_split(la, 1, 32, 65536, 132).split, 12);
  EXPECT_EQ(choose_key_split(la, 1, 132 * 3, 65536, 132).split, 1);
  EXPECT_EQ(choose_key_split(la, 1, 8, 64 * 7, 132).split, 1);  // under 8 tiles: no split
  const Compiled c64 = lowered(testing::example_program("vanilla"), Target::cuda_sm90,
                               {{"d", 64}, {"e", 64}});
  const Sm80Launch& l64 = c64.lowered.kernels.at(0).tensor_core.launch;
  EXPECT_EQ(l64.few_blocks_per_sm, 6);
  EXPECT_EQ(choose_key_split(l64, 1, 32 * 16, 4096, 132).split, 3);  // 1536 blocks, 2 waves
}

// A call's tensor maps (tma_map_shapes): extents and byte strides in the map's dim order, boxes
// of 64 columns x the key tile; none (cp.async) when a base or a stride is not a multiple of 16
// bytes, a stride is 0 or an extent is 0, with the reason.
TEST(Lower, TensorMapsDescribeTheCallsKAndVOrSayWhyNot) {
  Program p = testing::example_program("vanilla");
  Compiled c = lowered(p, Target::cuda_sm90, {{"d", 128}, {"e", 128}});
  const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
  ASSERT_EQ(la.tma.size(), 2u);
  const int64_t B = 2, H = 3, M = 70, N = 300, D = 128;
  std::vector<int64_t> extv(p.dims.size());
  for (size_t d = 0; d < p.dims.size(); ++d) {
    const std::string& n = p.dims[d];
    extv[d] = n == "b" ? B : n == "h" ? H : n == "m" ? M : n == "n" ? N : D;
  }
  const size_t NB = c.plan.buffers.size();
  std::vector<DevicePtr> ptrs(NB);
  std::vector<std::vector<int64_t>> strides(NB);
  for (size_t i = 0; i < NB; ++i) {
    ptrs[i] = 0x10000 * (i + 1);
    const std::vector<int>& dims = c.plan.buffers[i].dims;
    strides[i].assign(dims.size(), 1);
    for (size_t j = dims.size() - 1; j-- > 0;) strides[i][j] = strides[i][j + 1] * extv[dims[j + 1]];
  }
  std::string why;
  std::vector<TmaMapShape> m = tma_map_shapes(la, ptrs, strides, extv, &why);
  ASSERT_EQ(m.size(), 2u) << why;
  const uint64_t want_dims[5] = {128, 300, 2, 3, 1};
  const uint64_t want_strides[4] = {2 * D, 2 * H * N * D, 2 * N * D, 2 * N * D};
  for (const TmaMapShape& s : m) {
    for (int j = 0; j < 5; ++j) EXPECT_EQ(s.dims[j], want_dims[j]) << j;
    for (int j = 0; j < 4; ++j) EXPECT_EQ(s.strides_bytes[j], want_strides[j]) << j;
    EXPECT_EQ(s.box[0], 64u);
    EXPECT_EQ(s.box[1], static_cast<uint32_t>(la.block_n));
    EXPECT_EQ(s.box[2] * s.box[3] * s.box[4], 1u);
  }
  EXPECT_EQ(m[0].base, ptrs[la.tma[0].buffer]);
  // keys strided across heads ([b, n, h, d] in memory): still a map, with its strides
  std::vector<std::vector<int64_t>> bnhd = strides;
  const int kb = la.tma[0].buffer;
  bnhd[kb] = {N * H * D, D, H * D, 1};
  m = tma_map_shapes(la, ptrs, bnhd, extv, &why);
  ASSERT_EQ(m.size(), 2u) << why;
  EXPECT_EQ(m[0].strides_bytes[0], static_cast<uint64_t>(2 * H * D));
  EXPECT_EQ(m[0].strides_bytes[2], static_cast<uint64_t>(2 * D));
  // no maps, and the reason: a base 2 bytes off, a row stride of 100 elements (200 bytes), a
  // stride of 0, no keys (an extent of 0: the call copies nothing), a column stride of 2
  auto refused = [&](const std::vector<DevicePtr>& at, const std::vector<std::vector<int64_t>>& st,
                     const std::vector<int64_t>& ex, const char* reason) {
    EXPECT_TRUE(tma_map_shapes(la, at, st, ex, &why).empty()) << reason;
    EXPECT_NE(why.find(reason), std::string::npos) << why;
  };
  std::vector<DevicePtr> off = ptrs;
  off[kb] += 2;
  refused(off, strides, extv, "base");
  std::vector<std::vector<int64_t>> odd = strides, zero = strides, cols = strides;
  odd[kb][2] = 100;
  refused(ptrs, odd, extv, "16 bytes");
  zero[kb][1] = 0;
  refused(ptrs, zero, extv, "positive");
  std::vector<int64_t> nokeys = extv;
  for (size_t d = 0; d < p.dims.size(); ++d)
    if (p.dims[d] == "n") nokeys[d] = 0;
  refused(ptrs, strides, nokeys, "extent");
  cols[kb][3] = 2;
  refused(ptrs, cols, extv, "column");
}

// Gathers by computed indices proved in range (ir/index_range.h) are not checked per element:
// the relative-position bias table[h, clamp(n - m + 64, 0, size(r) - 1)] needs only a non-empty
// table (a condition the host checks per call); table[h, n - m] may go negative and stays
// checked; h indexes table's own dim h, in range by the binding.
TEST(Lower, ProvedGatherIndicesRunUncheckedUnderTheirExtentConditions) {
  std::vector<Program> ps = parse_source(R"(
program rel(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], table: f32[h, r]) {
  s = sum(q * k, d) + table[h, clamp(n - m + 64, 0, size(r) - 1)]
  out o: bf16[b, h, m, e] = sum(softmax(where(n <= m, s, -inf), n) * v, n)
}
program raw(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], table: f32[h, r]) {
  s = sum(q * k, d) + table[h, n - m]
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
)", "t.attn");
  for (Target t : {Target::cuda_sm80, Target::cuda_sm90}) {
    Compiled c = lowered(ps[0], t, {{"d", 64}, {"e", 64}});
    const TensorCoreKernel& tc = c.lowered.kernels.at(0).tensor_core;
    const Program& q = c.plan.program;
    int table = -1, r = -1;
    for (size_t i = 0; i < q.params.size(); ++i)
      if (q.params[i].name == "table") table = static_cast<int>(i);
    for (size_t d = 0; d < q.dims.size(); ++d)
      if (q.dims[d] == "r") r = static_cast<int>(d);
    EXPECT_EQ(tc.proved, (std::set<std::pair<int, int>>{{table, 1}}));
    ASSERT_EQ(tc.launch.range_conditions.size(), 1u);
    EXPECT_EQ(tc.launch.range_conditions[0], (ExtentCondition{-1, 1, r}));
    EXPECT_EQ(tc.launch.range_condition_text, std::vector<std::string>{"1 <= extent(r)"});
    const std::string src = c.sources.empty() ? emit_cuda(ps[0], t, {{"d", 64}, {"e", 64}})
                                              : c.sources[0];
    EXPECT_NE(src.find("#ifdef FG_CHECK_GATHERS"), std::string::npos);
    EXPECT_NE(c.lowered.str(c.plan).find("range condition: 1 <= extent(r)"), std::string::npos);

    Compiled w = lowered(ps[1], t, {{"d", 64}, {"e", 64}});
    const TensorCoreKernel& wt = w.lowered.kernels.at(0).tensor_core;
    EXPECT_TRUE(wt.proved.empty());
    EXPECT_TRUE(wt.launch.range_conditions.empty());
    EXPECT_EQ(emit_cuda(ps[1], t, {{"d", 64}, {"e", 64}}).find("FG_CHECK_GATHERS"),
              std::string::npos);
  }
}

// The shared memory of `values` values per diagonal or per key that launch `with` has and
// `without`, of the same kernel shape, has not: block_m + block_n - 1 floats each (rounded up to
// 4) after the stages, in the full and the few-rows kernels. Warp-specialized, a copy per stage
// where the target's block holds them (`per_block` bytes), else two.
void expect_tile_values_smem(const Sm80Launch& with, const Sm80Launch& without, int values,
                             int per_block) {
  ASSERT_EQ(without.block_m, with.block_m);
  ASSERT_EQ(without.block_n, with.block_n);
  ASSERT_EQ(without.stages, with.stages);
  ASSERT_EQ(without.warp_specialized, with.warp_specialized);
  const int pitch = (with.block_m + with.block_n - 1 + 3) / 4 * 4;
  const int few_pitch = (16 + with.few_block_n - 1 + 3) / 4 * 4;
  int copies = 1;
  if (with.warp_specialized) {
    const int two = without.smem_bytes + 2 * values * pitch * 4;
    const int all = two + (with.stages - 2) * values * pitch * 4;
    copies = all <= per_block ? with.stages : 2;
  }
  EXPECT_EQ(with.diag_copies, copies);
  EXPECT_EQ(with.smem_bytes - without.smem_bytes, copies * values * pitch * 4);
  EXPECT_EQ(with.few_smem_bytes - without.few_smem_bytes, values * few_pitch * 4);
}

// Score code that depends on the row and key only through n - m (or m - n) and per-block values
// is computed once per tile diagonal when it is dearer than a shared-memory read (a gather, a
// transcendental, an integer converted to float): the rel-position gather, exp(-|n - m|) and
// ALiBi's slope * (n - m) are; the causal mask is not; a value that
// also reads m on its own is not.
TEST(Lower, FunctionsOfTheDiagonalAreComputedOncePerDiagonal) {
  std::vector<Program> ps = parse_source(R"(
program rel(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], table: f32[h, r]) {
  s = sum(q * k, d) + table[h, clamp(m - n, 0, size(r) - 1)] + exp(abs(n - m) * -0.1)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program alibi(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], slope: f32[h]) {
  s = sum(q * k, d) + slope * (n - m)
  out o: bf16[b, h, m, e] = sum(softmax(where(n <= m, s, -inf), n) * v, n)
}
program mixed(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], table: f32[h, r]) {
  s = sum(q * k, d) + table[h, clamp(n - m + m % 3, 0, size(r) - 1)]
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program rows(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], table: f32[h, r]) {
  s = sum(q * k, d) + table[h, clamp(m, 0, size(r) - 1)] + exp(abs(m) * -0.1)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program cheap(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], w: f32[h]) {
  s = sum(q * k, d) + where(n - m > 8, 0, w)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program many(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], a: f32[h], b1: f32[h], b2: f32[h], b3: f32[h], b4: f32[h]) {
  s = sum(q * k, d) + exp(a * (n - m)) + b1 * (n - m) + b2 * (m - n) + b3 * (n - m) + b4 * (m - n)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
)", "t.attn");
  for (Target t : {Target::cuda_sm80, Target::cuda_sm90}) {
    Compiled c = lowered(ps[0], t, {{"d", 64}, {"e", 64}});
    const TensorCoreKernel& tc = c.lowered.kernels.at(0).tensor_core;
    const Program& q = c.plan.program;
    ASSERT_EQ(tc.diagonal.size(), 2u);
    std::multiset<Op> ops;
    for (int id : tc.diagonal) ops.insert(q.nodes[id].op);
    EXPECT_EQ(ops, (std::multiset<Op>{Op::Gather, Op::Exp}));
    ASSERT_EQ(tc.deltas.size(), 2u);  // m - n in the gather, n - m in the exp
    std::multiset<int> signs;
    for (const auto& [id, sign] : tc.deltas) {
      EXPECT_EQ(q.nodes[id].op, Op::Sub);
      signs.insert(sign);
    }
    EXPECT_EQ(signs, (std::multiset<int>{-1, 1}));
    EXPECT_EQ(tc.launch.diagonal.size(), 2u);
    EXPECT_NE(c.lowered.str(c.plan).find("per diagonal: "), std::string::npos);
    // the shared memory of two diagonals, against the same kernel shape whose two values read
    // m alone (no diagonals)
    Compiled rows = lowered(ps[3], t, {{"d", 64}, {"e", 64}});
    EXPECT_TRUE(rows.lowered.kernels.at(0).tensor_core.diagonal.empty());
    expect_tile_values_smem(tc.launch, rows.lowered.kernels.at(0).tensor_core.launch, 2,
                            smem_budget(t).per_block);
    Compiled alibi = lowered(ps[1], t, {{"d", 64}, {"e", 64}});
    const TensorCoreKernel& at = alibi.lowered.kernels.at(0).tensor_core;
    ASSERT_EQ(at.diagonal.size(), 1u);  // slope * (n - m), not the mask n <= m
    const Node& bias = alibi.plan.program.nodes[at.diagonal[0]];
    EXPECT_EQ(bias.op, Op::Mul);
    EXPECT_EQ(bias.type, DType::f32);
    // at d = 128 two copies of one diagonal (bench/programs/rel_bias.attn) leave room for the
    // third stage of K and V that the kernel without it has (one copy per stage would not:
    // 229504 + 3 x 1 KiB > 227 KiB)
    Program rb = parse_file(testing::source_path("bench/programs/rel_bias.attn")).at(0);
    Compiled c128 = lowered(rb, t, {{"d", 128}, {"e", 128}, {"r", 129}});
    Compiled causal128 = lowered(testing::example_program("causal"), t, {{"d", 128}, {"e", 128}});
    const Sm80Launch& l128 = c128.lowered.kernels.at(0).tensor_core.launch;
    EXPECT_EQ(c128.lowered.kernels.at(0).tensor_core.diagonal.size(), 1u);
    EXPECT_EQ(l128.stages, causal128.lowered.kernels.at(0).tensor_core.launch.stages);
    Compiled mixed = lowered(ps[2], t, {{"d", 64}, {"e", 64}});
    EXPECT_TRUE(mixed.lowered.kernels.at(0).tensor_core.diagonal.empty());
    // A where's condition and an integer literal convert nothing per element: no value there
    // is dearer than the read.
    Compiled cheap = lowered(ps[4], t, {{"d", 64}, {"e", 64}});
    EXPECT_TRUE(cheap.lowered.kernels.at(0).tensor_core.diagonal.empty());
    // More diagonal values than slots: the dearest (exp of a converted n - m) is kept though
    // it comes first in the source (the users-first walk meets it last).
    Compiled many = lowered(ps[5], t, {{"d", 64}, {"e", 64}});
    const TensorCoreKernel& mt = many.lowered.kernels.at(0).tensor_core;
    ASSERT_EQ(mt.diagonal.size(), 4u);
    std::multiset<Op> kept;
    for (int id : mt.diagonal) kept.insert(many.plan.program.nodes[id].op);
    EXPECT_EQ(kept, (std::multiset<Op>{Op::Exp, Op::Mul, Op::Mul, Op::Mul}));
  }
}

// Score code that depends on the key and per-block values alone is computed once per key of a
// tile when it is dearer than a shared-memory read (a special function, a gather by data), into
// the diagonal values' area after them (tests/programs/key_values.attn): the largest such value,
// not what a row index or a score enters; a parameter only a key value reads is not staged, one
// the score also reads per element is; a plain per-key load or gather by plain dim indices is
// staged, not a key value.
TEST(Lower, FunctionsOfTheKeyAreComputedOncePerKey) {
  const std::vector<Program> ps = parse_file(testing::source_path("tests/programs/key_values.attn"));
  auto find = [&](const char* name) {
    for (const Program& p : ps)
      if (p.name == name) return p;
    ADD_FAILURE() << name;
    return ps.at(0);
  };
  std::vector<Program> more = parse_source(R"(
program plain_key(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], kb: f32[b, h, n]) {
  s = where(n <= m, sum(q * k, d) / sqrt(size(d)) + 2.0 * kb, -inf)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program key_mask(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], keep: bool[b, h, n]) {
  s = sum(q * k, d) / sqrt(size(d)) + where(keep[b, h, n], 0., -1e9)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program key_gather(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], kb: f32[b, h, n]) {
  s = sum(q * k, d) / sqrt(size(d)) + 2.0 * kb[b, h, n] / sqrt(size(d))
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program five(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], sl: f32[h],
             a1: f32[b, h, n], a2: f32[b, h, n], a3: f32[b, h, n], a4: f32[b, h, n]) {
  s = sum(q * k, d) + sl * (n - m) + tanh(a1) + exp(exp(a2)) + sigmoid(a3) + log(exp(a4) + 1.0)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program with_row(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], kb: f32[b, h, n]) {
  s = where(n <= m, sum(q * k, d) / sqrt(size(d)) + tanh(kb + f32(m)), -inf)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program with_score(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], kb: f32[b, h, n]) {
  s = sum(q * k, d) / sqrt(size(d))
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * sigmoid(s + kb) * v, n)
}
)", "t.attn");
  const Extents heads = {{"d", 64}, {"e", 64}};
  for (Target t : {Target::cuda_sm80, Target::cuda_sm90}) {
    SCOPED_TRACE(t == Target::cuda_sm80 ? "sm80" : "sm90");
    // the key value's ops, and that it holds the key dim and no row dim
    auto ops_of = [&](const Compiled& c, int id) {
      const Program& q = c.plan.program;
      const PlanKernel& k = c.plan.kernels.at(0);
      EXPECT_TRUE(dimset_contains(q.nodes[id].dims, k.red_dim));
      EXPECT_FALSE(dimset_contains(q.nodes[id].dims, k.row_dim));
      std::multiset<Op> ops;
      for (int a : closure_of(q, id)) ops.insert(q.nodes[a].op);
      return ops;
    };
    Compiled kt = lowered(find("key_tanh"), t, heads);
    const TensorCoreKernel& tk = kt.lowered.kernels.at(0).tensor_core;
    ASSERT_EQ(tk.key_values.size(), 1u);
    EXPECT_TRUE(tk.diagonal.empty());
    // the largest such value: 2.0 * tanh(kb), not tanh(kb)
    EXPECT_EQ(kt.plan.program.nodes[tk.key_values[0]].op, Op::Mul);
    EXPECT_EQ(ops_of(kt, tk.key_values[0]).count(Op::Tanh), 1u);
    EXPECT_TRUE(tk.staged.empty());  // kb: read by the key value alone
    EXPECT_EQ(tk.launch.key_values.size(), 1u);
    // the shared memory of one value, against the same kernel shape without it (causal)
    Compiled causal = lowered(testing::example_program("causal"), t, heads);
    expect_tile_values_smem(tk.launch, causal.lowered.kernels.at(0).tensor_core.launch, 1,
                            smem_budget(t).per_block);
    // at d = 128 the ring's stages leave no room for a copy per stage on sm90 (two copies)
    const Extents wide = {{"d", 128}, {"e", 128}};
    const Compiled kt128 = lowered(find("key_tanh"), t, wide);
    const Compiled causal128 = lowered(testing::example_program("causal"), t, wide);
    const Sm80Launch& tk128 = kt128.lowered.kernels.at(0).tensor_core.launch;
    expect_tile_values_smem(tk128, causal128.lowered.kernels.at(0).tensor_core.launch, 1,
                            smem_budget(t).per_block);
    if (t == Target::cuda_sm90) {
      EXPECT_EQ(tk.launch.diag_copies, tk.launch.stages);  // d = 64: one per stage
      EXPECT_GT(tk.launch.stages, 2);
      EXPECT_EQ(tk128.diag_copies, 2);
      EXPECT_GT(tk128.stages, 2);
    }

    Compiled kb = lowered(find("key_bucket"), t, heads);
    const TensorCoreKernel& tb = kb.lowered.kernels.at(0).tensor_core;
    ASSERT_EQ(tb.key_values.size(), 1u);
    EXPECT_EQ(ops_of(kb, tb.key_values[0]).count(Op::Gather), 2u);  // table[h, bucket[n]]
    EXPECT_TRUE(tb.staged.empty());

    Compiled ag = lowered(find("alibi_gate"), t, heads);
    const TensorCoreKernel& ta = ag.lowered.kernels.at(0).tensor_core;
    ASSERT_EQ(ta.diagonal.size(), 1u);  // slope * (n - m)
    ASSERT_EQ(ta.key_values.size(), 1u);  // sigmoid(gl), a P.V weight
    EXPECT_EQ(ag.plan.program.nodes[ta.key_values[0]].op, Op::Sigmoid);

    Compiled gq = lowered(find("gqa_key_exp"), t, heads);
    const TensorCoreKernel& tg = gq.lowered.kernels.at(0).tensor_core;
    ASSERT_EQ(tg.key_values.size(), 1u);
    EXPECT_EQ(gq.plan.program.nodes[tg.key_values[0]].op, Op::Exp);
    ASSERT_EQ(tg.staged.size(), 1u);  // w: the score reads it per element as well
    EXPECT_EQ(gq.plan.program.params[tg.staged[0].param].name, "w");

    // not key values: a plain load (staged instead), a value that reads the row, one that
    // reads the score
    Compiled pk = lowered(more.at(0), t, heads);
    EXPECT_TRUE(pk.lowered.kernels.at(0).tensor_core.key_values.empty());
    EXPECT_EQ(pk.lowered.kernels.at(0).tensor_core.staged.size(), 1u);
    // (a gather by plain dim indices is a load: Evoformer's key mask)
    Compiled km = lowered(more.at(1), t, heads);
    EXPECT_TRUE(km.lowered.kernels.at(0).tensor_core.key_values.empty());
    EXPECT_EQ(km.lowered.kernels.at(0).tensor_core.staged.size(), 1u);
    // (a division by a constant is a multiply: index_blocks' floor(f32(n) / 256.0))
    Program ib = parse_file(testing::source_path("bench/programs/index_blocks.attn")).at(0);
    EXPECT_TRUE(lowered(ib, t, heads).lowered.kernels.at(0).tensor_core.key_values.empty());
    // (nor is a gather by plain indices read explicitly, nor an op over no dim: sqrt(size(d)))
    Compiled kg = lowered(more.at(2), t, heads);
    EXPECT_TRUE(kg.lowered.kernels.at(0).tensor_core.key_values.empty());
    EXPECT_EQ(kg.lowered.kernels.at(0).tensor_core.staged.size(), 1u);
    // Values per diagonal and per key share 4 places, the dearest first: exp(exp(a2)) and
    // log(exp(a4) + 1) (two ops each), then of the three of one (a conversion or an op) the
    // first the users-first walk meets: sigmoid(a3), tanh(a1); slope * (n - m) stays per
    // element. Nothing is staged: each key's parameter is read by its value alone.
    Compiled fv = lowered(more.at(3), t, heads);
    const TensorCoreKernel& tf = fv.lowered.kernels.at(0).tensor_core;
    EXPECT_TRUE(tf.diagonal.empty());
    std::multiset<Op> kept;
    for (int id : tf.key_values) kept.insert(fv.plan.program.nodes[id].op);
    EXPECT_EQ(kept, (std::multiset<Op>{Op::Exp, Op::Log, Op::Sigmoid, Op::Tanh}));
    EXPECT_TRUE(tf.staged.empty());
    Compiled wr = lowered(more.at(4), t, heads);
    EXPECT_TRUE(wr.lowered.kernels.at(0).tensor_core.key_values.empty());
    Compiled ws = lowered(more.at(5), t, heads);
    ASSERT_EQ(ws.lowered.kernels.at(0).path, LoweredKernel::Path::tensor_core);
    EXPECT_TRUE(ws.lowered.kernels.at(0).tensor_core.key_values.empty());
  }
}

TEST(Lower, MissingHeadExtentsTakeTheElementPathAndSaySo) {
  Compiled c = lowered(testing::example_program("vanilla"), Target::cuda_sm80, {});
  ASSERT_EQ(c.lowered.kernels.size(), 1u);
  const LoweredKernel& k = c.lowered.kernels[0];
  EXPECT_EQ(k.path, LoweredKernel::Path::element);
  EXPECT_EQ(k.why, "the extents of its head dims (d, e) are not given, and the tensor-core "
                   "template compiles them in");
}

// Operands not all of one 16-bit type reach the tensor cores as bf16 pieces: 3 with an f32 one
// (6 products), 2 for bf16 beside f16 (3 products), 1 for f8 (converted); each Q, K and V
// buffer once, in a Params slot
// after the plan's buffers; mma.sync (no wgmma, no producer warpgroup) and 16 rows a warp;
// keys in tiles of 32 where tiles of 64 would not fit one block's shared memory.
TEST(Lower, OperandsOfMixedTypesBecomeBf16Pieces) {
  std::vector<Program> ps = parse_source(R"(
program f32s(q: f32[b, h, m, d], k: f32[b, n, h, d], v: f32[b, h, n, e]) {
  out o: f32[b, h, m, e] = sum(softmax(sum(q * k, d), n) * v, n)
}
program mixed(q: bf16[b, h, m, d], k: f16[b, n, h, d], v: bf16[b, h, n, e]) {
  out o: bf16[b, h, m, e] = sum(softmax(sum(q * k, d), n) * v, n)
}
program one(q: f16[b, h, m, d], k: f16[b, n, h, d], v: f16[b, h, n, e]) {
  out o: bf16[b, h, m, e] = sum(softmax(sum(q * k, d), n) * v, n)
}
program f8s(q: f8e4m3[b, h, m, d], k: f8e5m2[b, n, h, d], v: bf16[b, h, n, e]) {
  out o: bf16[b, h, m, e] = sum(softmax(sum(q * k, d), n) * v, n)
}
)", "pieces.attn");
  for (const Program& p : ps)
    for (int64_t d : {64, 128}) {
      SCOPED_TRACE(p.name + " d=" + std::to_string(d));
      Compiled c = lowered(p, Target::cuda_sm90, {{"d", d}, {"e", d}});
      ASSERT_EQ(c.lowered.kernels.size(), 1u);
      const LoweredKernel& k = c.lowered.kernels[0];
      ASSERT_EQ(k.path, LoweredKernel::Path::tensor_core) << k.why;
      const Sm80Launch& la = k.tensor_core.launch;
      const int want = p.name == "f32s" ? 3 : (p.name == "mixed" ? 2 : 1);
      EXPECT_EQ(la.pieces, want);
      EXPECT_EQ(k.tensor_core.elem, p.name == "one" ? DType::f16 : DType::bf16);
      const int nb = static_cast<int>(c.plan.buffers.size());
      if (p.name == "one") {
        EXPECT_TRUE(la.split.empty());
        EXPECT_TRUE(la.wgmma);
        EXPECT_EQ(la.num_buffers, nb);
        continue;
      }
      EXPECT_FALSE(la.wgmma);
      EXPECT_FALSE(la.warp_specialized);
      EXPECT_TRUE(la.tma.empty());
      EXPECT_EQ(la.rows_per_warp, want > 1 ? 16 : 32);  // (P's pieces live through P.V)
      EXPECT_EQ(la.split_entry, p.name + "_k0_split");
      ASSERT_EQ(la.split.size(), 3u);
      EXPECT_EQ(la.num_buffers, nb + 3);
      const char* names[] = {"q", "k", "v"};
      for (int i = 0; i < 3; ++i) {
        const Sm80Launch::SplitOperand& o = la.split[i];
        EXPECT_EQ(c.plan.buffers[o.buffer].name, names[i]);
        EXPECT_EQ(o.name, names[i]);
        EXPECT_EQ(o.slot, nb + i);
        EXPECT_EQ(o.dims, c.plan.buffers[o.buffer].dims);
        EXPECT_EQ(o.type, p.params[c.plan.buffers[o.buffer].param].type);
      }
      // pieces x (Q, two stages of K and V): 64 keys a tile, 32 for 3 pieces at d = 128
      EXPECT_EQ(la.block_n, d == 128 && want == 3 ? 32 : 64);
      const int64_t bytes = want * (la.block_m * d * 2 + 2 * (2 * la.block_n * d * 2));
      EXPECT_EQ(la.smem_bytes, bytes);
      EXPECT_LE(la.smem_bytes, smem_budget(Target::cuda_sm90).per_block);
      EXPECT_EQ(la.few_block_n, la.block_n);
      // blocks of 8 warps (128 rows) where shared memory holds them (bench/NOTES.md, session 15)
      if (want > 1) EXPECT_EQ(la.warps, 8);
    }
  // An A100's 163 KiB: f32 at d = 128 keeps blocks of 4 warps (8 would take 192 KiB).
  Compiled a100 = lowered(ps[0], Target::cuda_sm80, {{"d", 128}, {"e", 128}});
  const Sm80Launch& la = a100.lowered.kernels[0].tensor_core.launch;
  EXPECT_EQ(la.warps, 4);
  EXPECT_EQ(la.block_m, 64);
  EXPECT_EQ(la.smem_bytes, 3 * (64 * 128 * 2 + 2 * (2 * 32 * 128 * 2)));
}

// Sums over keys without a softmax are plain groups (max_node -1): their weights are score
// element code as they are; a softmax group beside one keeps its running max; a mask that zeroes
// the weights classifies tiles as a softmax mask does.
TEST(Lower, SumsWithoutASoftmaxArePlainGroups) {
  std::vector<Program> ps = parse_source(R"(
program sig(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  w = where(n <= m, sigmoid(sum(q * k, d)), 0.0)
  out o: bf16[b, h, m, e] = sum(w * v, n)
  out l: f32[b, h, m] = sum(w, n)
}
program both(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = sum(q * k, d)
  out o: f32[b, h, m, e] = sum(softmax(s, n) * v, n) + sum(relu(s) * v, n)
}
program half(q: f16[b, h, m, d], k: f16[b, h, n, d], v: f16[b, h, n, e]) {
  r = relu(sum(q * k, d) * 30.0)
  out o: f32[b, h, m, e] = sum(r * r * v, n)
}
program ints(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  w = where(n <= m, sigmoid(sum(q * k, d)), 0.0)
  out o: f32[b, h, m, e] = sum(w * v, n)
  out c: i64[b, h, m] = sum(where(n <= m, 16777217 + b + h, 0), n)
}
)", "plain.attn");
  Compiled c = lowered(ps[0], Target::cuda_sm90, {{"d", 64}, {"e", 64}});
  ASSERT_EQ(c.lowered.kernels[0].path, LoweredKernel::Path::tensor_core) << c.lowered.kernels[0].why;
  const Program& p = c.plan.program;
  const Sm80Structure& st = c.lowered.kernels[0].tensor_core.launch.structure;
  ASSERT_EQ(st.groups.size(), 1u);
  EXPECT_EQ(st.groups[0].max_node, -1);
  EXPECT_EQ(p.nodes[st.groups[0].arg].op, Op::Where);
  ASSERT_EQ(st.groups[0].sums.size(), 1u);
  EXPECT_EQ(st.groups[0].sums[0], p.outputs[1].node);
  ASSERT_EQ(st.pv.size(), 1u);
  EXPECT_EQ(st.pv[0].group, 0);
  EXPECT_EQ(st.pv[0].node, p.outputs[0].node);
  // where(n <= m, w, 0) zeroes both sums above the diagonal: tiles are classified
  const PlanKernel& k = c.plan.kernels[0];
  ASSERT_GE(k.tiles.mask, 0);
  EXPECT_EQ(p.nodes[k.tiles.mask].op, Op::Le);
  EXPECT_TRUE(k.tiles.skip_empty);
  EXPECT_TRUE(c.lowered.kernels[0].tensor_core.launch.persistent);  // masked: walks at any length

  c = lowered(ps[1], Target::cuda_sm90, {{"d", 64}, {"e", 64}});
  ASSERT_EQ(c.lowered.kernels[0].path, LoweredKernel::Path::tensor_core) << c.lowered.kernels[0].why;
  const Sm80Structure& both = c.lowered.kernels[0].tensor_core.launch.structure;
  ASSERT_EQ(both.groups.size(), 2u);
  EXPECT_GE(both.groups[0].max_node, 0);  // the softmax group
  EXPECT_EQ(both.groups[1].max_node, -1);
  EXPECT_EQ(c.plan.program.nodes[both.groups[1].arg].op, Op::Relu);
  ASSERT_EQ(both.pv.size(), 2u);
  EXPECT_NE(both.pv[0].group, both.pv[1].group);
  // Unbounded weights beside f16 operands: bf16 pieces (P rounded to f16 could overflow).
  c = lowered(ps[2], Target::cuda_sm90, {{"d", 64}, {"e", 64}});
  ASSERT_EQ(c.lowered.kernels[0].path, LoweredKernel::Path::tensor_core) << c.lowered.kernels[0].why;
  EXPECT_EQ(c.lowered.kernels[0].tensor_core.launch.pieces, 2);
  EXPECT_EQ(c.lowered.kernels[0].tensor_core.elem, DType::bf16);
  // An integer sum stays exact on the element path.
  c = lowered(ps[3], Target::cuda_sm90, {{"d", 64}, {"e", 64}});
  EXPECT_EQ(c.lowered.kernels[0].path, LoweredKernel::Path::element);
  EXPECT_NE(c.lowered.kernels[0].why.find("is of i64"), std::string::npos) << c.lowered.kernels[0].why;
}

// A call binds the value split of the kernel it launches (bind_sm80, host pointers only):
// vanilla d64/e256 on Hopper runs its full kernel in one chunk and its few-rows kernel in two
// of 128. A decode call's grid, partial states and combine grid count the few-rows chunks; a
// prefill call's the full kernel's.
TEST(Lower, ACallBindsTheValueSplitOfTheKernelItLaunches) {
  Program p = testing::example_program("vanilla");
  Compiled c = lowered(p, Target::cuda_sm90, {{"d", 64}, {"e", 256}});
  const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
  ASSERT_EQ(la.value_split, 1);
  ASSERT_EQ(la.few_value_split, 2);
  const int64_t B = 2, H = 4, D = 64, E = 256;
  for (const int64_t M : {16, 300}) {
    const int64_t N = 16384;
    SCOPED_TRACE("m=" + std::to_string(M));
    const std::vector<int64_t> extv = {B, H, M, D, N, E};  // b h m d n e
    std::vector<DevicePtr> ptrs;
    std::vector<std::vector<int64_t>> strides;
    for (const PlanBuffer& b : c.plan.buffers) {
      ptrs.push_back(0x100000 * (ptrs.size() + 1));
      std::vector<int64_t> st(b.dims.size());
      int64_t acc = 1;
      for (size_t j = st.size(); j-- > 0;) st[j] = acc, acc *= extv[b.dims[j]];
      strides.push_back(st);
    }
    CudaBoundKernel bk;
    bind_sm80(la, p, ptrs, strides, 0x9000, 0x40000000, extv, 132, bk);
    const KeySplit ks = choose_key_split(la, M, B * H, N, 132);
    ASSERT_EQ(bk.few, M <= 16);
    ASSERT_EQ(bk.key_split, ks.split);
    const int vs = bk.few ? 2 : 1, cols = bk.few ? 128 : 256;
    const int64_t P = B * H * vs * ks.split;  // the grid's parallel indices
    ASSERT_LE(P, 65535);
    EXPECT_EQ(bk.grid.y, static_cast<unsigned>(P));
    EXPECT_EQ(bk.grid.z, 1u);
    // 8 heads of 16K keys: both calls split their key loops, and their partial rows hold a
    // running max, a row sum and the accumulator's chunk
    ASSERT_GT(bk.key_split, 1);
    const int64_t part_row = 2 + cols;
    EXPECT_EQ(la.part_row_of(bk.few), part_row);
    EXPECT_EQ(bk.scratch_bytes, P * M * part_row * 4);
    EXPECT_EQ(bk.combine_grid.x, static_cast<unsigned>((M * cols / 2 + 127) / 128));
    EXPECT_EQ(bk.combine_grid.y, static_cast<unsigned>(B * H * vs));
    EXPECT_EQ(bk.smem, static_cast<size_t>(bk.few ? la.few_smem_bytes : la.smem_bytes));
  }
}

// The host's binding of operands in pieces (bind_sm80, host pointers only): each split operand's
// Params slot points into the scratch (q, k, v in order, 256-byte aligned, a row of pieces x its
// innermost extent) with packed strides over the source buffer's dims; a split launch per
// operand carries the source (its own strides: keys laid out [b, n, h, d]) and the pieces; the
// partial states of a split key loop follow the pieces.
TEST(Lower, OperandsInPiecesBindToTheScratch) {
  Program p = parse_source(R"(
program f32s(q: f32[b, h, m, d], k: f32[b, n, h, d], v: f16[b, h, n, e]) {
  out o: f32[b, h, m, e] = sum(softmax(sum(q * k, d), n) * v, n)
}
)", "pieces.attn").at(0);
  Compiled c = lowered(p, Target::cuda_sm80, {{"d", 40}, {"e", 24}});
  ASSERT_EQ(c.lowered.kernels[0].path, LoweredKernel::Path::tensor_core);
  const Sm80Launch& la = c.lowered.kernels[0].tensor_core.launch;
  ASSERT_EQ(la.pieces, 3);
  ASSERT_EQ(la.split.size(), 3u);
  // dims in order of appearance: b h m d n e
  const int64_t B = 2, H = 3, M = 1, D = 40, N = 4000, E = 24;
  const std::vector<int64_t> extv = {B, H, M, D, N, E};
  std::vector<DevicePtr> ptrs;
  std::vector<std::vector<int64_t>> strides;
  for (const PlanBuffer& b : c.plan.buffers) {
    ptrs.push_back(0x100000 * (ptrs.size() + 1));
    if (b.name == "k") strides.push_back({N * H * D, D, H * D, 1});  // [b, n, h, d]
    else strides.emplace_back();  // (unused by the binding: filled below)
  }
  for (size_t i = 0; i < c.plan.buffers.size(); ++i)
    if (strides[i].empty()) {
      std::vector<int64_t> st(c.plan.buffers[i].dims.size());
      int64_t acc = 1;
      for (size_t j = st.size(); j-- > 0;) st[j] = acc, acc *= extv[c.plan.buffers[i].dims[j]];
      strides[i] = st;
    }
  CudaBoundKernel sized, bk;
  bind_sm80(la, p, ptrs, strides, 0x9000, 0, extv, 132, sized);
  const DevicePtr scratch = 0x40000000;
  bind_sm80(la, p, ptrs, strides, 0x9000, scratch, extv, 132, bk);
  ASSERT_EQ(bk.splits.size(), 3u);
  const int NB = la.num_buffers, R = la.max_rank;
  int64_t at = 0;
  const int64_t rows[] = {B * H * M, B * N * H, B * H * N};
  const int64_t cols[] = {D, D, E};
  const int64_t codes[] = {2, 2, 1};  // f32, f32, f16
  for (int i = 0; i < 3; ++i) {
    const Sm80Launch::SplitOperand& o = la.split[i];
    SCOPED_TRACE(o.name);
    EXPECT_EQ(bk.params[o.slot], static_cast<int64_t>(scratch) + at);
    const int64_t row = 3 * cols[i];  // the pieces of a row, packed
    EXPECT_EQ(bk.params[NB + o.slot * R + 3], 1);
    EXPECT_EQ(bk.params[NB + o.slot * R + 2], row);
    const CudaBoundKernel::Split& sp = bk.splits[i];
    EXPECT_EQ(sp.args[0], static_cast<int64_t>(ptrs[o.buffer]));
    EXPECT_EQ(sp.args[1], bk.params[o.slot]);
    EXPECT_EQ(sp.args[2], codes[i]);
    EXPECT_EQ(sp.args[3], 4);  // rank
    EXPECT_EQ(sp.args[4], 3);  // pieces
    EXPECT_EQ(sp.args[5], rows[i]);
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(sp.args[6 + j], extv[o.dims[j]]);
      EXPECT_EQ(sp.args[14 + j], strides[o.buffer][j]);
      EXPECT_EQ(sp.args[22 + j], bk.params[NB + o.slot * R + j]);
    }
    EXPECT_GE(sp.grid.x, 1u);
    at += (rows[i] * row * 2 + 255) / 256 * 256;
  }
  // one query row against 4000 keys: a split key loop, its partial states after the pieces
  ASSERT_GT(bk.key_split, 1);
  const size_t err_at = NB + NB * R + la.num_dims;
  EXPECT_EQ(bk.params[err_at + 2], static_cast<int64_t>(scratch) + at);
  EXPECT_GT(bk.scratch_bytes, at);
  EXPECT_EQ(sized.scratch_bytes, bk.scratch_bytes);
}

TEST(Lower, AnElementKernelsArraysThreadsAndWorkspace) {
  Program p = parse_source(R"(
program sig(q: f32[b, m, d], k: f32[b, n, d], v: f32[b, n, e]) {
  w = sigmoid(sum(q * k, d))
  out o: f32[b, m, e] = sum(w * v, n)
}
)", "sig.attn").at(0);
  // (without the head extents: the tensor-core template, which takes these plain sigmoid
  // weights, compiles them in)
  Compiled c = lowered(p, Target::cuda_sm80, {});
  ASSERT_EQ(c.lowered.kernels.size(), 1u);
  const LoweredKernel& k = c.lowered.kernels[0];
  const PlanKernel& pk = c.plan.kernels[0];
  EXPECT_EQ(k.path, LoweredKernel::Path::element);
  EXPECT_NE(k.why.find("are not given"), std::string::npos) << k.why;
  EXPECT_EQ(k.element.threads, 256);  // arrays span key tiles and head dims
  EXPECT_EQ(k.element.smem_limit, smem_budget(Target::cuda_sm80).per_block);
  // q rows, k and v tiles, the scores, the output accumulator: each a plan value, in plan order.
  ASSERT_EQ(k.element.arrays, element_arrays(c.plan, pk));
  const int m = 1, d = 2, n = 3, e = 4;  // dim ids in order of appearance: b m d n e
  ASSERT_EQ(p.dims[m], "m");
  ASSERT_EQ(p.dims[n], "n");
  std::vector<std::vector<int>> dims;
  for (const ElementArray& a : k.element.arrays) {
    EXPECT_FALSE(a.old_max);
    EXPECT_EQ(a.ctype, "float");
    EXPECT_EQ(a.elem_bytes, 4);
    dims.push_back(a.dims);
  }
  EXPECT_EQ(dims, (std::vector<std::vector<int>>{{m, d}, {n, d}, {n, e}, {m, n}, {m, e}}));
  // The k tile feeds the score contraction over d: stored [d][n] (unit stride over keys); the
  // others in their dims' order.
  EXPECT_EQ(k.element.arrays[1].layout, (std::vector<int>{d, n}));
  for (size_t i : {0u, 2u, 3u, 4u}) EXPECT_EQ(k.element.arrays[i].layout, k.element.arrays[i].dims);
  // Workspace at b=2 m=100 n=50 d=64 e=32: 16-byte aligned arrays of row_tile / red_tile rows,
  // then the block's reduction slots (8 bytes a thread).
  std::vector<int64_t> off;
  const int64_t ws = element_workspace(pk, k.element, {2, 100, 64, 50, 32}, &off);
  const int64_t R = pk.row_tile, N = pk.red_tile;
  const std::vector<int64_t> sizes = {R * 64 * 4, N * 64 * 4, N * 32 * 4, R * N * 4, R * 32 * 4,
                                      8 * 256};
  ASSERT_EQ(off.size(), sizes.size());
  int64_t at = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(off[i], at) << i;
    at = (at + sizes[i] + 15) / 16 * 16;
  }
  EXPECT_EQ(ws, at);
}

// An element kernel whose values are all one element per grid point (no row tile, key tile or
// head dim in any array or stored value) computes a point per thread: registers, no workspace,
// no barriers. One with a row tile spreads the tile's elements over a block of 64 threads.
TEST(Lower, OnlineMaximaKeepTheirPreviousValueAndPointsOfOneElementTakeAThreadEach) {
  Program sm = testing::example_program("vanilla");
  Compiled c = lowered(sm, Target::cuda_sm80, {});
  int olds = 0;
  for (const ElementArray& a : c.lowered.kernels[0].element.arrays) olds += a.old_max;
  EXPECT_EQ(olds, 1);  // one softmax group: one running max rescales the sums
  EXPECT_FALSE(c.lowered.kernels[0].element.thread_per_point);
  const std::vector<Program> progs = parse_source(R"(
program rows(x: f32[b, m]) {
  out o: f32[b, m] = x * 2.0
}
program heads(x: f32[b, h, m]) {
  out o: f32[b, m] = sum(x * x, h)
}
)", "rows.attn");
  Compiled r = lowered(progs.at(0), Target::cuda_sm80, {});
  ASSERT_EQ(r.lowered.kernels.size(), 1u);
  const ElementLaunch& re = r.lowered.kernels[0].element;
  EXPECT_EQ(r.lowered.kernels[0].path, LoweredKernel::Path::element);
  EXPECT_TRUE(re.thread_per_point);
  EXPECT_EQ(re.threads, 128);
  for (const ElementArray& a : re.arrays) EXPECT_TRUE(a.dims.empty());
  EXPECT_EQ(element_workspace(r.plan.kernels[0], re, {2, 3}, nullptr), 0);
  Compiled re_src = compile_program(progs.at(0), [] {
    CompileOptions o;
    o.target = Target::cuda_sm80;
    return o;
  }(), "emit");
  EXPECT_EQ(re_src.sources.at(0).find("__syncthreads"), std::string::npos);
  // (m streamed in row tiles of 16 beside the loop over h: a block per tile)
  Compiled h = lowered(progs.at(1), Target::cuda_sm80, {});
  ASSERT_EQ(h.lowered.kernels.size(), 1u);
  EXPECT_EQ(h.plan.kernels[0].row_dim, 2);
  EXPECT_FALSE(h.lowered.kernels[0].element.thread_per_point);
  EXPECT_EQ(h.lowered.kernels[0].element.threads, 64);
}

// A kernel without a key loop or row tile whose stored buffers have a grid dim innermost takes
// a point per thread too, its arrays over whole dims in the workspace (a warp's threads at
// adjacent points: a norm over the query heads r of [b, r, m, e], a centring over the rows of
// [b, m, e]). Where it reduces a value of one element over those whole dims (the mean), a
// point takes lanes by their extents at the call (ElementLaunch::lane_dims, lanes_for): each
// array point-major within an element, a reduction's partials in a tree in the slots after
// the arrays. One whose stored buffer has a whole dim innermost (a norm over e) keeps a block
// per point, its threads over that dim.
TEST(Lower, WholeDimsOfPointsAdjacentInMemoryTakeAThreadEach) {
  const std::vector<Program> progs = parse_source(R"(
program norm_r(x: f32[b, r, m, e]) {
  out o: f32[b, r, m, e] = x / sqrt(mean(x * x, r) + 1e-6)
}
program center_m(x: bf16[b, m, e], w: f32[m]) {
  out o: bf16[b, m, e] = x * w - mean(x * w, m)
  out top: f32[b, e] = max(x, m)
}
program norm_e(x: f32[b, m, e]) {
  out o: f32[b, m, e] = x / sqrt(sum(x * x, e))
}
program scale_m(x: f32[b, m, e], w: f32[m]) {
  out o: f32[b, m, e] = x * w[m]
}
)", "whole.attn");
  for (int i = 0; i < 2; ++i) {
    const Program& p = progs.at(i);
    SCOPED_TRACE(p.name);
    Compiled c = lowered(p, Target::cuda_sm90, {});
    ASSERT_EQ(c.lowered.kernels.size(), 1u);
    const ElementLaunch& e = c.lowered.kernels[0].element;
    EXPECT_TRUE(e.thread_per_point);
    EXPECT_EQ(e.threads, 256);
    const int whole = p.find_dim(i == 0 ? "r" : "m");
    EXPECT_EQ(e.lane_dims, std::vector<int>{whole});
    // the stored output over the whole dim is computed in its store loop: no array
    ASSERT_EQ(e.stored_direct.size(), 1u);
    EXPECT_EQ(c.plan.buffers[c.plan.kernels[0].writes.at(0)].node, e.stored_direct[0]);
    for (const ElementArray& a : e.arrays) EXPECT_NE(a.node, e.stored_direct[0]);
    // lanes: a power of two up to 32, each lane at least kLaneTerms terms; 8 points a block
    for (const auto& [extent, lanes] : std::vector<std::pair<int64_t, int>>{
             {1, 1}, {7, 1}, {31, 1}, {32, 2}, {100, 4}, {511, 16}, {512, 32}, {1 << 20, 32}}) {
      std::vector<int64_t> extv(p.dims.size(), 5);
      extv[whole] = extent;
      EXPECT_EQ(lanes_for(e, extv), lanes) << extent;
    }
    // the workspace at 7 (1 lane, 256 points a block) and at 4096 (32 lanes, 8 points): each
    // array over the whole dim once per point of the block, one element a point for the
    // others, then the block's reduction slots
    for (const int64_t extent : {int64_t{7}, int64_t{4096}}) {
      std::vector<int64_t> extv(p.dims.size(), 5);
      extv[whole] = extent;
      const int64_t points = 256 / lanes_for(e, extv);
      int64_t want = 0, arrays = 0;
      for (const ElementArray& a : e.arrays) {
        want = (want + 15) / 16 * 16 + points * (a.dims.empty() ? 1 : extent) * a.elem_bytes;
        if (a.dims.empty()) continue;
        EXPECT_EQ(a.dims, std::vector<int>{whole});
        ++arrays;
      }
      want = (want + 15) / 16 * 16 + 8 * 256;
      std::vector<int64_t> offsets;
      EXPECT_EQ(element_workspace(c.plan.kernels[0], e, extv, &offsets), (want + 15) / 16 * 16);
      EXPECT_EQ(offsets.size(), e.arrays.size() + 1);
    }
    const std::string src = compile_program(p, [] {
      CompileOptions o;
      o.target = Target::cuda_sm90;
      return o;
    }(), "emit").sources.at(0);
    EXPECT_NE(src.find("for (int64_t fg_e = fg_l; fg_e < (int64_t)1 * n_" + p.dims[whole] +
                       "; fg_e += fg_L)"),
              std::string::npos) << src;
    EXPECT_NE(src.find(") * fg_P + fg_q]"), std::string::npos);
    EXPECT_NE(src.find("for (int fg_s = (int)fg_L / 2; fg_s > 0; fg_s /= 2)"), std::string::npos);
    EXPECT_NE(src.find("if (fg_live) B"), std::string::npos);
    // explain's JSON at sizes: the lanes a point and the workspace of a block's points
    for (const auto& [extent, lanes] : std::vector<std::pair<int64_t, int>>{{7, 1}, {4096, 32}}) {
      CompileOptions o;
      o.target = Target::cuda_sm90;
      for (const std::string& d : p.dims) o.sizes[d] = 5;
      o.sizes[p.dims[whole]] = extent;
      const nlohmann::json j = nlohmann::json::parse(explain_json(p, o)).at("kernels").at(0).at("cuda");
      EXPECT_EQ(j.at("per_point"), "lanes");
      EXPECT_EQ(j.at("lane_dims"), nlohmann::json::array({p.dims[whole]}));
      EXPECT_EQ(j.at("lanes"), lanes);
      std::vector<int64_t> extv(p.dims.size(), 5);
      extv[whole] = extent;
      EXPECT_EQ(j.at("workspace_bytes").get<int64_t>(),
                element_workspace(c.plan.kernels[0], e, extv, nullptr));
    }
  }
  // without a reduction over the whole dim: one thread a point, no barrier, each thread's
  // element of an array at (i * 128 + threadIdx.x)
  {
    Compiled c = lowered(progs.at(3), Target::cuda_sm90, {});
    const ElementLaunch& e = c.lowered.kernels.at(0).element;
    EXPECT_TRUE(e.thread_per_point);
    EXPECT_TRUE(e.lane_dims.empty());
    EXPECT_EQ(e.threads, 128);
    std::vector<int64_t> extv(progs.at(3).dims.size(), 4096);
    EXPECT_EQ(lanes_for(e, extv), 1);
    const std::string src = compile_program(progs.at(3), [] {
      CompileOptions o;
      o.target = Target::cuda_sm90;
      return o;
    }(), "emit").sources.at(0);
    EXPECT_EQ(src.find("__syncthreads"), std::string::npos);
  }
  Compiled n = lowered(progs.at(2), Target::cuda_sm90, {});
  EXPECT_FALSE(n.lowered.kernels.at(0).element.thread_per_point);
  // (its sum over e, one element per point, is shared by the block's threads and combined in
  // a tree in the reduction slots after the arrays)
  const std::string src = compile_program(progs.at(2), [] {
    CompileOptions o;
    o.target = Target::cuda_sm90;
    return o;
  }(), "emit").sources.at(0);
  EXPECT_NE(src.find("for (int64_t fg_i = threadIdx.x; fg_i < (int64_t)1 * n_e; "
                     "fg_i += blockDim.x)"),
            std::string::npos) << src;
  EXPECT_NE(src.find("P.off[" + std::to_string(n.lowered.kernels[0].element.arrays.size()) +
                     "]))[threadIdx.x] = fg_p;"),
            std::string::npos) << src;
}

// Kernels pass values through intermediates: a tensor-core kernel writes one and reads one in
// its epilogue (a cluster split), or one per row or per key in its score code (a norm:
// HeadDimReductionsPerRowOrKeyRunInKernelsOfTheirOwn), but one over rows and keys (a matrix of
// the key loop's size) puts the kernel on the element path, saying so.
TEST(Lower, IntermediatesReadInTheKeyLoopTakeTheElementPath) {
  Program p = testing::example_program("diff_attn");
  CompileOptions o;
  o.target = Target::cuda_sm90;
  o.sizes = {{"d", 64}, {"e", 64}};
  const Compiled c = compile_program(p, o, "lower");
  // %10: q1.k1 / sqrt(d), a value over (row, key), materialized
  int scaled = -1;
  for (const PlanValue& v : c.plan.kernels.at(0).values)
    if (c.plan.program.nodes[v.node].op == Op::Div && scaled < 0) scaled = v.node;
  ASSERT_GE(scaled, 0);
  Plan plan = make_plan(c.rewritten, o, {{{scaled}, "for the test"}});
  classify_tiles(plan);
  ASSERT_EQ(plan.kernels.size(), 2u);
  const LoweredCuda low = lower_cuda(plan, o.target, o.sizes, smem_budget(o));
  EXPECT_EQ(low.kernels.at(0).path, LoweredKernel::Path::element);  // no key loop
  EXPECT_EQ(low.kernels.at(1).path, LoweredKernel::Path::element);
  EXPECT_NE(low.kernels.at(1).why.find("it reads the intermediate tmp0 over the key dim and the "
                                       "row dim"),
            std::string::npos)
      << low.kernels.at(1).why;
  EXPECT_EQ(plan.buffers.at(plan.materialized().at(0)).node, scaled);
  // an element kernel writes it: held in 8 bytes, as the element kernels compute
  EXPECT_EQ(low.storage.at(plan.materialized().at(0)), DType::f64);
}

// cut_head_reductions: a query's and a key's norm over the head dim (cosine attention) are
// reductions the template does not hold; kernels of their own compute them (per row, per key:
// O(rows * d) work), and the attention kernel takes the tensor-core path reading them back, the
// key norm staged with its K/V tile. A contraction weighted along the head dim stays one kernel
// on the element path (no cut helps it), and --strict keeps one kernel.
TEST(Lower, HeadDimReductionsPerRowOrKeyRunInKernelsOfTheirOwn) {
  const std::vector<Program> ps =
      parse_file(testing::source_path("tests/programs/norms.attn"));  // cosine, out_scale, weighted
  const Program& cosine = ps.at(0);
  for (const auto& [t, d] : {std::pair{Target::cuda_sm90, 128}, std::pair{Target::cuda_sm90, 64},
                             std::pair{Target::cuda_sm80, 128}}) {
    SCOPED_TRACE(std::string(target_name(t)) + " d=" + std::to_string(d));
    const Extents sizes = {{"d", d}, {"e", d}};
    // one kernel: the element path, by the norms
    const Compiled one = fused(cosine, t, sizes);
    ASSERT_EQ(one.lowered.kernels.size(), 1u);
    EXPECT_EQ(one.lowered.kernels[0].path, LoweredKernel::Path::element);
    EXPECT_NE(one.lowered.kernels[0].why.find("a reduction other than the key loop's"),
              std::string::npos);
    const std::vector<Materialize> cuts = head_reduction_cuts(one.plan, one.lowered);
    ASSERT_EQ(cuts.size(), 2u);
    const Program& rp = one.plan.program;
    const int m = rp.find_dim("m"), n = rp.find_dim("n"), dd = rp.find_dim("d");
    std::map<std::string, int> cut_of;  // "row" / "key" -> node
    for (const Materialize& c : cuts) {
      // the norm itself, sqrt(sum(x * x, d)): what the score code reads of the reduction
      ASSERT_EQ(c.nodes.size(), 1u);
      const Node& x = rp.nodes[c.nodes[0]];
      EXPECT_EQ(x.op, Op::Sqrt);
      const Node& sum = rp.nodes[x.args.at(0)];
      EXPECT_EQ(sum.op, Op::Sum);
      EXPECT_EQ(sum.reduce, std::vector<int>{dd});
      const bool row = std::find(x.dims.begin(), x.dims.end(), m) != x.dims.end();
      const bool key = std::find(x.dims.begin(), x.dims.end(), n) != x.dims.end();
      EXPECT_NE(row, key);  // per row or per key, never both
      cut_of[row ? "row" : "key"] = c.nodes[0];
      EXPECT_NE(c.why.find(std::string("a reduction over a head dim, per ") +
                           (row ? "row" : "key") + " (" + node_text(rp, x.args[0]) + ")"),
                std::string::npos) << c.why;
    }
    ASSERT_EQ(cut_of.size(), 2u);
    // lowered: the two norms' kernels on the element path, then the attention kernel on the
    // tensor cores, reading both
    const Compiled c = lowered(cosine, t, sizes);
    ASSERT_EQ(c.plan.kernels.size(), 3u);
    ASSERT_EQ(c.plan.materialized().size(), 2u);
    EXPECT_EQ(c.lowered.kernels[0].path, LoweredKernel::Path::element);
    EXPECT_EQ(c.lowered.kernels[1].path, LoweredKernel::Path::element);
    const LoweredKernel& att = c.lowered.kernels[2];
    ASSERT_EQ(att.path, LoweredKernel::Path::tensor_core) << att.why;
    EXPECT_EQ(att.tensor_core.launch.wgmma, t == Target::cuda_sm90);
    EXPECT_EQ(c.plan.writes(2), std::vector<std::string>{"o"});
    int key_tmp = -1;
    for (int b : c.plan.materialized()) {
      const PlanBuffer& B = c.plan.buffers[b];
      // a tensor-core kernel reads it in f32: held in f32
      EXPECT_EQ(c.lowered.storage[b], DType::f32) << B.name;
      const std::vector<std::string> reads = c.plan.reads(2);
      EXPECT_NE(std::find(reads.begin(), reads.end(), B.name), reads.end()) << B.name;
      EXPECT_TRUE(B.node == cut_of["row"] || B.node == cut_of["key"]) << B.name;
      if (B.node == cut_of["key"]) key_tmp = b;
      for (const Materialize& cut : cuts)
        if (cut.nodes[0] == B.node) EXPECT_EQ(B.reason, cut.why);
    }
    ASSERT_GE(key_tmp, 0);
    // the key norm travels with the K/V tiles (an intermediate: param -1), the row norm does
    // not (its value is one a row)
    const auto& staged = att.tensor_core.staged;
    ASSERT_EQ(staged.size(), 1u);
    EXPECT_EQ(staged[0].param, -1);
    EXPECT_EQ(staged[0].buffer, key_tmp);
    EXPECT_FALSE(staged[0].rows);
    EXPECT_EQ(staged[0].elem_bytes, 4);
    EXPECT_EQ(staged[0].arg_dims, c.plan.buffers[key_tmp].dims);
    EXPECT_EQ(kernel_count(cosine, [&] {
                CompileOptions o;
                o.target = t;
                o.sizes = sizes;
                return o;
              }()),
              3);
  }
  // a per-row norm read by the epilogue only, beside an output per row of the same kind (a
  // max over the head dim): one kernel computes both, the attention kernel reads the norm
  const Compiled os = lowered(ps.at(1), Target::cuda_sm90, {{"d", 64}, {"e", 64}});
  ASSERT_EQ(os.plan.kernels.size(), 2u);
  EXPECT_EQ(os.plan.writes(0), (std::vector<std::string>{"tmp0", "r"}));
  EXPECT_EQ(os.lowered.kernels[1].path, LoweredKernel::Path::tensor_core)
      << os.lowered.kernels[1].why;
  EXPECT_TRUE(os.lowered.kernels[1].tensor_core.staged.empty());
  EXPECT_NE(os.plan.buffers[os.plan.materialized()[0]].reason.find(
                "reductions over a head dim, per row"),
            std::string::npos);
  // the weighted contraction: the key norm alone would not put the kernel on the tensor cores,
  // so the plan stays one kernel
  const Compiled w = lowered(ps.at(2), Target::cuda_sm90, {{"d", 64}, {"e", 64}});
  ASSERT_EQ(w.plan.kernels.size(), 1u);
  EXPECT_EQ(w.lowered.kernels[0].path, LoweredKernel::Path::element);
  EXPECT_NE(w.lowered.kernels[0].why.find("no tensor-core contraction"), std::string::npos);
  EXPECT_EQ(head_reduction_cuts(w.plan, w.lowered).size(), 1u);  // named, not kept
  // without head dims every kernel takes the element path: nothing to gain, one kernel
  EXPECT_EQ(lowered(cosine, Target::cuda_sm90, {}).plan.kernels.size(), 1u);
  const std::vector<Program> more = parse_source(R"(
program shared_norm(q: bf16[b, h, m, d], q2: bf16[b, h, r, d], k: bf16[b, h, n, d],
                    v: bf16[b, h, n, e]) {
  kn = sqrt(sum(k * k, d))
  out o: bf16[b, h, m, e] = sum(softmax(sum(q * k, d) / kn, n) * v, n)
  out o2: bf16[b, h, r, e] = sum(softmax(sum(q2 * k, d) / kn, n) * v, n)
}
program three(q: bf16[b, h, m, d], k1: bf16[b, h, n, d], k2: bf16[b, h, n, d],
              k3: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  qn = sqrt(sum(q * q, d))
  p1 = softmax(sum(q * k1, d) / qn, n)
  p2 = softmax(sum(q * k2, d) / qn, n)
  p3 = softmax(sum(q * k3, d) / qn, n)
  out o: bf16[b, h, m, e] = sum((p1 + p2 + p3) * v, n)
}
)", "more_norms.attn");
  // a key norm two attention kernels read: one kernel computes it (not one per reader)
  const Compiled sh = lowered(more[0], Target::cuda_sm90, {{"d", 64}, {"e", 64}});
  ASSERT_EQ(sh.plan.kernels.size(), 3u);
  ASSERT_EQ(sh.plan.materialized().size(), 1u);
  int writers = 0;
  for (int k = 0; k < sh.plan.kernel_count(); ++k)
    for (const std::string& w : sh.plan.writes(k)) writers += w == "tmp0";
  EXPECT_EQ(writers, 1);
  EXPECT_EQ(sh.lowered.kernels[1].path, LoweredKernel::Path::tensor_core);
  EXPECT_EQ(sh.lowered.kernels[2].path, LoweredKernel::Path::tensor_core);
  // a row norm beside three softmaxes: neither the cut alone (one kernel of three groups) nor
  // the kernels per cluster alone (each still reduces over d) leaves the element path; the cut
  // and then the clusters put all three on the tensor cores
  const Compiled th = lowered(more[1], Target::cuda_sm90, {{"d", 64}, {"e", 64}});
  int tc = 0;
  for (const LoweredKernel& k : th.lowered.kernels)
    tc += k.path == LoweredKernel::Path::tensor_core;
  EXPECT_EQ(tc, 3) << th.lowered.str(th.plan);
  EXPECT_EQ(th.plan.kernels.size(), 4u);
}

// Attention sinks (gpt-oss): the max taken with a per-head logit is rewritten at the max
// (passes/online_rewrite.cpp), so the plan is one kernel, which the tensor-core template takes.
TEST(Lower, AttentionSinksRunInOneTensorCoreKernel) {
  const Program p = parse_source(R"(
program sinks(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], sink: f32[h]) {
  s = where(n <= m, sum(q * k, d) / sqrt(size(d)), -inf)
  mx = maximum(max(s, n), sink[h])
  out o: bf16[b, h, m, e] = sum(exp(s - mx) * v, n) / (sum(exp(s - mx), n) + exp(sink[h] - mx))
}
)", "sinks.attn").at(0);
  for (const auto& [t, d] : {std::pair{Target::cuda_sm90, 64}, std::pair{Target::cuda_sm90, 128},
                             std::pair{Target::cuda_sm80, 128}}) {
    const Compiled c = lowered(p, t, {{"d", d}, {"e", d}});
    ASSERT_EQ(c.lowered.kernels.size(), 1u) << target_name(t) << " d=" << d;
    const LoweredKernel& k = c.lowered.kernels[0];
    ASSERT_EQ(k.path, LoweredKernel::Path::tensor_core) << k.why;
    EXPECT_EQ(k.tensor_core.groups.size(), 1u);
    EXPECT_GE(k.tensor_core.groups[0].max_node, 0);  // a softmax group with its running max
    EXPECT_EQ(k.tensor_core.pv.size(), 1u);
    EXPECT_EQ(k.tensor_core.launch.wgmma, t == Target::cuda_sm90);
  }
}

// Each program of `ps` lowered for sm90 at d = e = 64 and 128 and for sm80 at 128: one kernel,
// on the tensor cores, handed to `check` with its target.
void for_each_tensor_core_lowering(
    const std::vector<Program>& ps,
    const std::function<void(const Program&, Target, const Compiled&, const TensorCoreKernel&)>&
        check) {
  for (const auto& [t, d] : {std::pair{Target::cuda_sm90, 64}, std::pair{Target::cuda_sm90, 128},
                             std::pair{Target::cuda_sm80, 128}})
    for (const Program& p : ps) {
      SCOPED_TRACE(p.name + " " + target_name(t) + " d=" + std::to_string(d));
      const Compiled c = lowered(p, t, {{"d", d}, {"e", d}});
      ASSERT_EQ(c.lowered.kernels.size(), 1u);
      const LoweredKernel& k = c.lowered.kernels[0];
      ASSERT_EQ(k.path, LoweredKernel::Path::tensor_core) << k.why;
      check(p, t, c, k.tensor_core);
    }
}

// Probabilities weighed before they multiply the values (tests/programs/gates.attn): the
// factors of each P.V besides exp(x - max) and the value tensor are the group's P.V weights,
// score element code the kernel multiplies the probabilities by after the row sums took them;
// the row sums stay exp(x - max), or, where they are of the weighted ones too (a mask written
// as a factor), take the weights (weigh_sums). A P.V of the same softmax weighed otherwise takes
// a group of its own with the same running max; a weight that reads the score (entropy) is
// computed with the scores. A second tensor over a head dim keeps the element path, saying why.
TEST(Lower, WeightedProbabilitiesStayOnTheTensorCores) {
  std::vector<Program> ps = parse_file(testing::source_path("tests/programs/gates.attn"));
  // key_gate, dropout, gqa_gate, two_values, gated_and_not, mult_mask, entropy
  ASSERT_EQ(ps.size(), 7u);
  const Program both = ps.at(4), entropy = ps.at(6);
  ps.erase(ps.begin() + 6);
  ps.erase(ps.begin() + 4);
  for_each_tensor_core_lowering(ps, [&](const Program& p, Target t, const Compiled& c,
                                        const TensorCoreKernel& tc) {
      const Program& rp = c.plan.program;
      ASSERT_EQ(tc.groups.size(), 1u);
      const TensorCoreKernel::Group& g = tc.groups[0];
      EXPECT_GE(g.max_node, 0);
      // the row sum: exp(x - max) as it is, or (mult_mask) times the weights
      ASSERT_EQ(g.sums.size(), 1u);
      EXPECT_EQ(g.weigh_sums, p.name == "mult_mask");
      EXPECT_EQ(rp.nodes[rp.nodes[g.sums[0]].args[0]].op, g.weigh_sums ? Op::Mul : Op::Exp);
      EXPECT_EQ(tc.pv.size(), p.name == "two_values" ? 2u : 1u);
      EXPECT_EQ(tc.launch.wgmma, t == Target::cuda_sm90);
      std::vector<std::string> weights;  // the weights, as the op or the parameter they are
      for (int w : g.pv_weight) {
        const Node& n = rp.nodes[w];
        weights.push_back(n.op == Op::Param ? rp.params[n.param].name : op_name(n.op));
      }
      std::sort(weights.begin(), weights.end());
      // (two_values' factor per row leaves the sum over the keys: the epilogue multiplies it)
      const std::map<std::string, std::vector<std::string>> want = {
          {"key_gate", {"sigmoid"}}, {"dropout", {"where"}}, {"gqa_gate", {"w"}},
          {"two_values", {"c", "sigmoid"}}, {"mult_mask", {"cast"}}};
      EXPECT_EQ(weights, want.at(p.name));
      // the printed dump names them
      EXPECT_NE(c.lowered.str(c.plan).find(g.weigh_sums ? ", P.V and row-sum weights %"
                                                          : ", P.V weights %"),
                std::string::npos);
    });
  // gated_and_not: group 0 the softmax with its row sums and the plain P.V, group 1 the same
  // running max and score form, no row sums, the gate on its P.V. entropy: group 0 the output's,
  // unweighted; group 1 the row sum of p * s, its weight the score itself (mask and all, read
  // with the scores)
  for (const Program* p : {&both, &entropy})
    for (const Target t : {Target::cuda_sm90, Target::cuda_sm80}) {
      SCOPED_TRACE(p->name);
      const bool ent = p == &entropy;
      const Compiled c = lowered(*p, t, {{"d", 64}, {"e", 64}});
      ASSERT_EQ(c.lowered.kernels.size(), 1u);
      const LoweredKernel& k = c.lowered.kernels[0];
      ASSERT_EQ(k.path, LoweredKernel::Path::tensor_core) << k.why;
      const std::vector<TensorCoreKernel::Group>& gs = k.tensor_core.groups;
      ASSERT_EQ(gs.size(), 2u);
      EXPECT_EQ(gs[0].score_steps, gs[1].score_steps);  // (the mask, the scale)
      EXPECT_EQ(gs[0].sums.size(), 1u);
      EXPECT_EQ(gs[1].sums.size(), ent ? 1u : 0u);
      EXPECT_TRUE(gs[0].pv_weight.empty());
      ASSERT_EQ(gs[1].pv_weight.size(), 1u);
      if (ent) EXPECT_EQ(gs[1].pv_weight[0], gs[1].arg);
      else EXPECT_EQ(c.plan.program.nodes[gs[1].pv_weight[0]].op, Op::Sigmoid);
      EXPECT_EQ(gs[1].weigh_sums, ent);
      EXPECT_FALSE(gs[0].weight_reads_scores);
      EXPECT_EQ(gs[1].weight_reads_scores, ent);
      ASSERT_EQ(k.tensor_core.pv.size(), ent ? 1u : 2u);
      EXPECT_EQ(k.tensor_core.pv[0].group, 0);
      if (!ent) EXPECT_EQ(k.tensor_core.pv[1].group, 1);
    }
  // A weighted P.V before a plain one, the plain row sum and the weighted one: the plain row
  // sum joins the plain P.V's group, so the weighted P.V's group takes the weighted row sum (two
  // groups, not three). With f16 operands the weighted probabilities, unbounded, go as bf16
  // pieces (f16 would overflow past 65504).
  for (const char* type : {"bf16", "f16"}) {
    const std::string ty = type;
    const Program p = parse_source(
        "program w(q: " + ty + "[h, m, d], k: " + ty + "[h, n, d], v: " + ty + "[h, n, e], g: f32[n]) {\n"
        "  s = sum(q * k, d)\n"
        "  x = exp(s - max(s, n))\n"
        "  out og: f32[h, m, e] = sum(x * g * v, n)\n"
        "  out o: f32[h, m, e] = sum(x * v, n)\n"
        "  out l: f32[h, m] = sum(x, n)\n"
        "  out lg: f32[h, m] = sum(x * g, n)\n"
        "}\n", "w.attn").at(0);
    SCOPED_TRACE(ty);
    const Compiled c = fused(p, Target::cuda_sm90, {{"d", 64}, {"e", 64}});
    ASSERT_EQ(c.lowered.kernels.size(), 1u);
    const LoweredKernel& k = c.lowered.kernels[0];
    ASSERT_EQ(k.path, LoweredKernel::Path::tensor_core) << k.why;
    const TensorCoreKernel& tc = k.tensor_core;
    ASSERT_EQ(tc.groups.size(), 2u);
    ASSERT_EQ(tc.pv.size(), 2u);
    EXPECT_NE(tc.pv[0].group, tc.pv[1].group);
    // og's P.V (the first accumulator) in the group that weighs, its row sum x * g; o's in the
    // other, its row sum x
    const Program& rp = c.plan.program;
    for (const TensorCoreKernel::Acc& a : tc.pv) {
      const TensorCoreKernel::Group& g = tc.groups.at(a.group);
      const bool gated = &a == &tc.pv[0];
      EXPECT_EQ(g.pv_weight.size(), gated ? 1u : 0u);
      EXPECT_EQ(g.weigh_sums, gated);
      ASSERT_EQ(g.sums.size(), 1u);
      EXPECT_EQ(rp.nodes[rp.nodes[g.sums[0]].args[0]].op, gated ? Op::Mul : Op::Exp);
    }
    EXPECT_EQ(tc.elem, DType::bf16);
    EXPECT_EQ(tc.launch.pieces, ty == "f16" ? 2 : 1);
    EXPECT_EQ(tc.launch.split.empty(), ty == "bf16");
  }
  // What the template cannot weigh: the element path, and why.
  const std::vector<std::pair<std::string, std::string>> cannot = {
      {"  out o: f32[b, h, m, e] = sum(softmax(s, n) * g * v * v, n)\n",
       "multiplies two tensors over a head dim"},
  };
  for (const auto& [body, why] : cannot) {
    const Program p = parse_source(
        "program w(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], g: f32[n]) {\n"
        "  s = sum(q * k, d) / sqrt(size(d))\n" + body + "}\n", "w.attn").at(0);
    SCOPED_TRACE(body);
    const Compiled c = fused(p, Target::cuda_sm90, {{"d", 64}, {"e", 64}});
    ASSERT_EQ(c.lowered.kernels.size(), 1u);
    EXPECT_EQ(c.lowered.kernels[0].path, LoweredKernel::Path::element);
    EXPECT_NE(c.lowered.kernels[0].why.find(why), std::string::npos) << c.lowered.kernels[0].why;
  }
}

// Values computed per key (tests/programs/value_sums.attn): the online rewrite distributes
// sum(e * (v + c)) into sums that each read a plain value tensor or leave as an invariant, so
// the kernel runs on the tensor cores: value_bias one P.V of v and the row sum (bias times it in
// the epilogue), value_mix two P.V (v and u; lam leaves the key sum), key_offset a P.V and a
// second group of the same running max whose row sum kb weighs.
TEST(Lower, ValuesComputedPerKeyStayOnTheTensorCores) {
  const std::vector<Program> ps = parse_file(testing::source_path("tests/programs/value_sums.attn"));
  ASSERT_EQ(ps.size(), 3u);
  for_each_tensor_core_lowering(ps, [&](const Program& p, Target t, const Compiled& c,
                                        const TensorCoreKernel& tc) {
      const Program& rp = c.plan.program;
      std::vector<std::string> values;  // the P.V value tensors, by parameter name
      for (const TensorCoreKernel::Acc& a : tc.pv) {
        EXPECT_EQ(a.group, 0);
        const Node& prod = rp.nodes[rp.nodes[a.node].args[0]];
        std::string name;
        for (int f : prod.args)
          if (rp.nodes[f].op == Op::Param) name = rp.params[rp.nodes[f].param].name;
        values.push_back(name);
      }
      std::sort(values.begin(), values.end());
      const std::vector<std::string> want =
          p.name == "value_mix" ? std::vector<std::string>{"u", "v"} : std::vector<std::string>{"v"};
      EXPECT_EQ(values, want);
      ASSERT_EQ(tc.groups.size(), p.name == "key_offset" ? 2u : 1u);
      EXPECT_TRUE(tc.groups[0].pv_weight.empty());
      if (p.name == "key_offset") {
        const TensorCoreKernel::Group& g = tc.groups[1];
        EXPECT_EQ(g.max_node, tc.groups[0].max_node);
        ASSERT_EQ(g.pv_weight.size(), 1u);
        EXPECT_EQ(rp.params[rp.nodes[g.pv_weight[0]].param].name, "kb");
        EXPECT_TRUE(g.weigh_sums);
      }
    });
}

// split_clusters: diff_attn's two softmax groups at e = 2d = 256 need a value split of 4 in
// one kernel (1536 multiply-adds a (row, key) pair); apart, each group's kernel holds its
// accumulator in one chunk (768 in all), the first writing p1.v normalized (tmp0) and the
// second reading it in its epilogue. Where the one kernel needs no value split it stays one
// kernel, and --strict keeps it one.
TEST(Lower, ClustersWhoseAccumulatorsDoNotFitTogetherRunAsKernelsOfTheirOwn) {
  const Program p = testing::example_program("diff_attn");
  const Extents wide = {{"d", 128}, {"e", 256}};
  const Compiled one = fused(p, Target::cuda_sm90, wide);
  ASSERT_EQ(one.lowered.kernels.size(), 1u);
  EXPECT_EQ(one.lowered.kernels[0].tensor_core.launch.value_split, 4);
  EXPECT_EQ(product_cost(one.lowered), 4 * 2 * 128 + 2 * 256);
  const std::vector<Materialize> cuts = cluster_cuts(one.plan, one.lowered);
  ASSERT_EQ(cuts.size(), 1u);
  ASSERT_EQ(cuts[0].nodes.size(), 1u);
  const Node& cut = one.plan.program.nodes[cuts[0].nodes[0]];
  EXPECT_EQ(cut.op, Op::DivOrZero);  // p1.v over its row sum
  const Compiled c = lowered(p, Target::cuda_sm90, wide);
  ASSERT_EQ(c.plan.kernels.size(), 2u);
  ASSERT_EQ(c.plan.materialized().size(), 1u);
  const PlanBuffer& tmp = c.plan.buffers[c.plan.materialized()[0]];
  EXPECT_EQ(tmp.node, cuts[0].nodes[0]);
  EXPECT_EQ(tmp.reason, cuts[0].why);
  EXPECT_NE(tmp.reason.find("run apart from those of %"), std::string::npos) << tmp.reason;
  EXPECT_NE(tmp.reason.find("split in 4 chunks of 64"), std::string::npos) << tmp.reason;
  EXPECT_EQ(c.plan.writes(0), std::vector<std::string>{tmp.name});
  const std::vector<std::string> reads = c.plan.reads(1);
  EXPECT_NE(std::find(reads.begin(), reads.end(), tmp.name), reads.end());
  EXPECT_EQ(c.plan.writes(1), std::vector<std::string>{"o"});
  // a tensor-core kernel writes the f32 cut: it is held as f32; the rest in their dtypes
  ASSERT_EQ(c.lowered.storage.size(), c.plan.buffers.size());
  for (size_t b = 0; b < c.plan.buffers.size(); ++b)
    EXPECT_EQ(c.lowered.storage[b], static_cast<int>(b) == c.plan.materialized()[0]
                                        ? DType::f32
                                        : c.plan.buffers[b].type)
        << c.plan.buffers[b].name;
  for (const LoweredKernel& k : c.lowered.kernels) {
    ASSERT_EQ(k.path, LoweredKernel::Path::tensor_core) << k.why;
    const TensorCoreKernel& tc = k.tensor_core;
    EXPECT_EQ(tc.scores.size(), 1u);
    EXPECT_EQ(tc.groups.size(), 1u);
    EXPECT_EQ(tc.pv.size(), 1u);
    EXPECT_TRUE(tc.launch.wgmma);
    EXPECT_EQ(tc.launch.value_split, 1);
  }
  EXPECT_EQ(product_cost(c.lowered), 2 * (128 + 256));
  const LoweredCuda::ClusterSplit& cs = c.lowered.cluster_split;
  EXPECT_EQ(cs.split_cost, 2 * (128 + 256));
  EXPECT_EQ(cs.fused_cost, 4 * 2 * 128 + 2 * 256);
  EXPECT_EQ(one.lowered.cluster_split.split_cost, 0);
  EXPECT_EQ(one.lowered.cluster_split.row_dim, -1);
  EXPECT_EQ(p.dims.at(cs.row_dim), "m");
  // decode: the few-rows kernels read K again per value chunk of 128 columns; the one kernel
  // 2 chunks x (k1 + k2) + v = 768 elements a key, the kernels per cluster 2 x (2 x k + v) =
  // 1024: calls of at most 16 rows run the one kernel
  EXPECT_EQ(cs.fused_few_reads, 2 * 2 * 128 + 256);
  EXPECT_EQ(cs.split_few_reads, 2 * (2 * 128 + 256));
  EXPECT_TRUE(decode_runs_one_kernel(cs, 1));
  EXPECT_TRUE(decode_runs_one_kernel(cs, 16));
  EXPECT_FALSE(decode_runs_one_kernel(cs, 17));
  EXPECT_FALSE(decode_runs_one_kernel(one.lowered.cluster_split, 1));
  CompileOptions no_split;
  no_split.target = Target::cuda_sm90;
  no_split.sizes = wide;
  no_split.cluster_split = false;
  EXPECT_EQ(compile_program(p, no_split, "lower").plan.kernels.size(), 1u);
  // the text forms: explain names the intermediate and why, the lower dump both kernels
  CompileOptions o;
  o.target = Target::cuda_sm90;
  o.sizes = wide;
  const nlohmann::json j = nlohmann::json::parse(explain_json(p, o));
  ASSERT_EQ(j.at("kernels").size(), 2u);
  EXPECT_EQ(j.at("kernels")[1].at("cuda").at("products"), "wgmma");
  EXPECT_EQ(j.at("cluster_split").at("split_cost"), 768);
  EXPECT_EQ(j.at("cluster_split").at("fused_cost"), 1536);
  EXPECT_EQ(j.at("cluster_split").at("decode_runs_one_kernel"), true);
  EXPECT_NE(c.lowered.str(c.plan).find("kernels per softmax cluster: 768 multiply-adds a (row, "
                                       "key) pair (product_cost) against 1536 in one kernel (mma.sync "
                                       "counted at its rate against wgmma's); "
                                       "decode calls (at most 16 rows of m) read 1024 K and V "
                                       "elements a key against 768 in one kernel, and run the "
                                       "one kernel"),
            std::string::npos) << c.lowered.str(c.plan);
  EXPECT_EQ(kernel_count(p, o), 2);
  const std::string text = explain(p, o);
  EXPECT_NE(text.find(tmp.reason), std::string::npos) << text;
  // where the kernels per cluster do not do enough fewer products it stays one: at d = e = 64
  // (wgmma either way: 256 against 256), and on an A100 (no wgmma: at d64/e128 384 against 384,
  // at d128/e256 the one kernel splits its values in 2 and the kernels per cluster's 768 are
  // not 2/3 of its 1024)
  for (const auto& [t, d, e] : {std::tuple{Target::cuda_sm90, 64, 64},
                                std::tuple{Target::cuda_sm80, 64, 128},
                                std::tuple{Target::cuda_sm80, 128, 256}}) {
    const Compiled k = lowered(p, t, {{"d", d}, {"e", e}});
    EXPECT_EQ(k.plan.kernels.size(), 1u) << target_name(t) << " d=" << d;
  }
  // at d = 64, e = 128 on Hopper the one kernel needs no value split but runs on mma.sync (at a
  // value split of 2 wgmma's exponentials would bind it); the kernels per cluster take wgmma:
  // 384 multiply-adds a pair against 384 at mma.sync's rate (360/790 of wgmma's)
  const Compiled narrow = lowered(p, Target::cuda_sm90, {{"d", 64}, {"e", 128}});
  ASSERT_EQ(narrow.plan.kernels.size(), 2u);
  EXPECT_EQ(narrow.lowered.cluster_split.split_cost, 2 * (64 + 128));
  EXPECT_DOUBLE_EQ(narrow.lowered.cluster_split.fused_cost, 384 / kMmaSyncRateOnSm90);
  for (const LoweredKernel& k : narrow.lowered.kernels)
    EXPECT_TRUE(k.tensor_core.launch.wgmma) << k.tensor_core.launch.products_why;
  const std::string narrow_why = narrow.plan.buffers.at(narrow.plan.materialized().at(0)).reason;
  EXPECT_NE(narrow_why.find("together the kernel runs mma.sync: wgmma's scores"),
            std::string::npos) << narrow_why;
  // --strict: one kernel
  CompileOptions strict = o;
  strict.strict = true;
  EXPECT_EQ(compile_program(p, strict, "lower").plan.kernels.size(), 1u);
  // a per-row output of the first group (its logsumexp) goes with that group's kernel: one
  // kernel writes both cuts, [b, h, m, e] and [b, h, m], the logsumexp straight to its output
  // (no kernel reads it back)
  const Program lse = testing::source_program("bench/programs/diff_lse.attn");
  const Compiled lc = lowered(lse, Target::cuda_sm90, wide);
  ASSERT_EQ(lc.plan.kernels.size(), 2u);
  EXPECT_EQ(lc.plan.writes(0), (std::vector<std::string>{"tmp0", "lse1"}));
  EXPECT_EQ(lc.plan.writes(1), (std::vector<std::string>{"o"}));
  EXPECT_EQ(lc.plan.materialized().size(), 1u);
  for (const LoweredKernel& k : lc.lowered.kernels)
    EXPECT_EQ(k.path, LoweredKernel::Path::tensor_core) << k.why;
  // three softmaxes: one kernel of them all takes the template (3 scores) on mma.sync; on
  // sm80 at d = e = 64 it stays one kernel (a kernel per softmax would do as many products and
  // read v three times), on sm90 a kernel per softmax takes wgmma, each, and decode calls
  // (fewer K/V reads) run the one kernel
  const Program three = testing::source_program("bench/programs/three_softmax.attn");
  for (const Target t : {Target::cuda_sm80, Target::cuda_sm90}) {
    SCOPED_TRACE(target_name(t));
    const Compiled one3 = fused(three, t, {{"d", 64}, {"e", 64}});
    ASSERT_EQ(one3.lowered.kernels.size(), 1u);
    EXPECT_EQ(one3.lowered.kernels[0].path, LoweredKernel::Path::tensor_core)
        << one3.lowered.kernels[0].why;
    EXPECT_EQ(one3.lowered.kernels[0].tensor_core.scores.size(), 3u);
    EXPECT_FALSE(one3.lowered.kernels[0].tensor_core.launch.wgmma);
    const Compiled t3 = lowered(three, t, {{"d", 64}, {"e", 64}});
    const bool split = t == Target::cuda_sm90;
    ASSERT_EQ(t3.plan.kernels.size(), split ? 3u : 1u);
    EXPECT_EQ(t3.plan.materialized().size(), split ? 2u : 0u);
    for (const LoweredKernel& k : t3.lowered.kernels) {
      EXPECT_EQ(k.path, LoweredKernel::Path::tensor_core) << k.why;
      EXPECT_EQ(k.tensor_core.launch.wgmma, split);
    }
    EXPECT_EQ(t3.lowered.cluster_split.fused_element_kernels, 0);
    EXPECT_EQ(t3.lowered.cluster_split.split_element_kernels, 0);
    if (split) EXPECT_TRUE(decode_runs_one_kernel(t3.lowered.cluster_split, 1));
  }
  // a bool read across clusters (logsumexp(s1) > 0 choosing between the two softmaxes' values)
  // is cut at its float argument, which the tensor-core path can store
  const Compiled bc = lowered(testing::source_program("bench/programs/bool_cut.attn"),
                              Target::cuda_sm90, wide);
  ASSERT_EQ(bc.plan.kernels.size(), 2u);
  for (int b : bc.plan.materialized())
    EXPECT_EQ(bc.plan.buffers[b].type, DType::f32) << bc.plan.buffers[b].name;
  for (const LoweredKernel& k : bc.lowered.kernels)
    EXPECT_EQ(k.path, LoweredKernel::Path::tensor_core) << k.why;
  // two plain groups (sigmoid weights, no max and no row sum) split the same way
  const Program plain = parse_source(R"(
program plain2(q1: bf16[b, h, m, d], k1: bf16[b, h, n, d], q2: bf16[b, h, m, d],
               k2: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  out o: bf16[b, h, m, e] = sum(sigmoid(sum(q1 * k1, d)) * v, n) - sum(sigmoid(sum(q2 * k2, d)) * v, n)
}
)", "plain2.attn").at(0);
  const Compiled pc = lowered(plain, Target::cuda_sm90, wide);
  ASSERT_EQ(pc.plan.kernels.size(), 2u);
  for (const LoweredKernel& k : pc.lowered.kernels) {
    ASSERT_EQ(k.path, LoweredKernel::Path::tensor_core) << k.why;
    EXPECT_EQ(k.tensor_core.groups.at(0).max_node, -1);
  }
  // four accumulators, two of each group, every one an output: the first group's outputs are
  // its kernel's, stored by it (no intermediate: the second kernel reads none), at d = 64,
  // e = 256
  const Program four = testing::source_program("bench/programs/four_acc.attn");
  const Compiled f = lowered(four, Target::cuda_sm90, {{"d", 64}, {"e", 256}});
  ASSERT_EQ(f.plan.kernels.size(), 2u);
  EXPECT_EQ(f.plan.materialized().size(), 0u);
  EXPECT_EQ(f.plan.writes(0), (std::vector<std::string>{"o1", "o2"}));
  EXPECT_EQ(f.plan.writes(1), (std::vector<std::string>{"o3", "o4"}));
  EXPECT_TRUE(f.plan.reads(1) == (std::vector<std::string>{"q2", "k2", "v1", "v2"}));
  for (const LoweredKernel& k : f.lowered.kernels) {
    ASSERT_EQ(k.path, LoweredKernel::Path::tensor_core) << k.why;
    EXPECT_EQ(k.tensor_core.groups.size(), 1u);
    EXPECT_EQ(k.tensor_core.pv.size(), 2u);
  }
}

TEST(Lower, TheTextFormNamesPathsAndArrays) {
  std::string text = dump_after(testing::example_program("causal"), "lower",
                                {Target::cuda_sm80, {{"d", 64}, {"e", 64}}});
  EXPECT_EQ(text.rfind("lowered for cuda-sm80\nkernel causal_k0: path tensor_core", 0), 0u) << text;
  std::string el = dump_after(testing::example_program("causal"), "lower", {Target::cuda_sm80});
  EXPECT_NE(el.find("path element"), std::string::npos) << el;
  EXPECT_NE(el.find("(empty skipped, full unmasked)"), std::string::npos) << el;
  EXPECT_NE(el.find("(previous running max)"), std::string::npos) << el;
  EXPECT_NE(el.find("[n:64, d] stored [d, n]"), std::string::npos) << el;
}

}  // namespace
}  // namespace flashgen
