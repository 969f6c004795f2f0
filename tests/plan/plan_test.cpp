// The plan API and explain: fusion decisions asserted through kernel counts, per-kernel reads
// and writes, accumulators, masks and materialization reasons.
#include <gtest/gtest.h>

#include <set>
#include <nlohmann/json.hpp>

#include "codegen/interval_code.h"
#include "compiler/pipeline.h"
#include "flashgen/compile.h"
#include "flashgen/flashgen.h"
#include "flashgen/frontend.h"
#include "support/support.h"

namespace flashgen {
namespace {

Program example(const std::string& name) { return testing::example_program(name); }
Program source(const std::string& text) { return parse_source(text, "test.attn").at(0); }

Plan plan_of(const Program& p) { return compile_program(p, {}).plan; }

TEST(Plan, RowDimMayBeInAnElementTileOverKeys) {
  // bias[h, m, n] is read with the key dim but holds no whole (eliminated) dim: m stays the
  // row dim; h, which k and v carry beside n and d, does not become it.
  Plan plan = plan_of(source(
      "program b(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e], bias: bf16[h, m, n],\n"
      "          keep: bool[m, n]) {\n"
      "  s = where(keep, sum(q * k, d) + bias, -inf)\n"
      "  out o: f32[h, m, e] = sum(softmax(s, n) * v, n)\n}\n"));
  ASSERT_EQ(plan.kernel_count(), 1);
  const PlanKernel& k = plan.kernels[0];
  ASSERT_GE(k.row_dim, 0);
  EXPECT_EQ(plan.program.dims[k.row_dim], "m");
}

TEST(Plan, CausalIsOneKernelReadingQkvWritingO) {
  Plan plan = plan_of(example("causal"));
  ASSERT_EQ(plan.kernel_count(), 1);
  EXPECT_EQ(plan.reads(0), (std::vector<std::string>{"q", "k", "v"}));
  EXPECT_EQ(plan.writes(0), (std::vector<std::string>{"o"}));
  EXPECT_TRUE(plan.materialized().empty());
  const PlanKernel& k = plan.kernels[0];
  EXPECT_EQ(plan.program.dims[k.red_dim], "n");
  EXPECT_EQ(plan.program.dims[k.row_dim], "m");
  EXPECT_EQ(plan.program.dim_list(k.elim), "[d, e]");
  // One running max and two online sums (the normalizer and o's numerator).
  int maxes = 0, online = 0;
  for (const Accumulator& a : k.accs) {
    maxes += a.op == Op::Max;
    online += a.op == Op::Sum && a.rescale_by.size() == 1;
  }
  EXPECT_EQ(maxes, 1);
  EXPECT_EQ(online, 2);
  // The causal mask is found and classified per tile.
  EXPECT_GE(k.tiles.mask, 0);
  EXPECT_TRUE(k.tiles.skip_empty);
  // q·k is a tensor-core contraction.
  bool contraction = false;
  for (const PlanValue& v : k.values) contraction = contraction || v.contraction;
  EXPECT_TRUE(contraction);
}

TEST(Plan, DiffAttnHasTwoRunningMaxesInOneKernel) {
  Plan plan = plan_of(example("diff_attn"));
  ASSERT_EQ(plan.kernel_count(), 1);
  int maxes = 0;
  for (const Accumulator& a : plan.kernels[0].accs) maxes += a.op == Op::Max;
  EXPECT_EQ(maxes, 2);
}

// Each online sum carries the exp(x - safe(M)) factor fuse recognized, with its max M among
// rescale_by: the one-pass form as data for the later stages (the CUDA lowering reads it).
TEST(Plan, OnlineSumsCarryTheirExpFactor) {
  Plan plan = plan_of(example("diff_attn"));
  const Program& p = plan.program;
  int sums = 0;
  for (const Accumulator& a : plan.kernels[0].accs) {
    if (a.op != Op::Sum) {
      EXPECT_TRUE(a.exp_factors.empty());
      continue;
    }
    ++sums;
    ASSERT_EQ(a.exp_factors.size(), 1u) << node_text(p, a.node);
    ASSERT_EQ(a.rescale_by.size(), 1u);
    const Node& e = p.nodes[a.exp_factors[0]];
    ASSERT_EQ(e.op, Op::Exp);
    const Node& sub = p.nodes[e.args[0]];
    ASSERT_EQ(sub.op, Op::Sub);
    EXPECT_EQ(sub.args[0], p.nodes[a.rescale_by[0]].args[0]);  // exp(x - safe(max(x)))
  }
  EXPECT_GE(sums, 4);  // two groups: a row sum and a P.V sum each
}

TEST(Plan, LseSharesTheNormalizerWithO) {
  Plan plan = plan_of(example("lse"));
  ASSERT_EQ(plan.kernel_count(), 1);
  EXPECT_EQ(plan.writes(0), (std::vector<std::string>{"o", "lse"}));
}

TEST(Plan, QNormalizationAndTwoValueTensorsFuse) {
  Program p = source(R"(
program qknorm(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], w: bf16[b, h, n, e]) {
  qn = q / sqrt(sum(q * q, d))
  s = where(n <= m, sum(qn * k, d), -inf)
  p = softmax(s, n)
  out o: bf16[b, h, m, e] = sum(p * v, n)
  out o2: f32[b, h, m, e] = sum(p * w, n) * 2
})");
  EXPECT_EQ(kernel_count(p, {}), 1) << explain(p, {});
}

TEST(Plan, NonOnePassProgramMaterializesOnlyRowStatisticsWithAReason) {
  Program p = source(R"(
program peak(q: f32[b, m, d], k: f32[b, n, d]) {
  out top: f32[b, m] = max(softmax(sum(q * k, d), n), n)
})");
  Plan plan = plan_of(p);
  ASSERT_EQ(plan.kernel_count(), 2);
  ASSERT_FALSE(plan.materialized().empty());
  for (int b : plan.materialized()) {
    // Only [b, m] row statistics, never an [m, n] matrix.
    EXPECT_EQ(plan.program.dim_list(plan.buffers[b].dims), "[b, m]");
    EXPECT_NE(plan.buffers[b].reason.find("loop over n"), std::string::npos)
        << plan.buffers[b].reason;
  }
  EXPECT_EQ(plan.writes(1), (std::vector<std::string>{"top"}));
  CompileOptions strict;
  strict.strict = true;
  EXPECT_THROW(explain(p, strict), ProgramError);
  EXPECT_NE(explain(p, {}).find("materialized"), std::string::npos);
}

// An output whose node a kernel materializes (the row max both outputs need before the second
// loop) is stored by that kernel, beside the intermediate the next kernel loads; one that no
// kernel loads (a cut seeded by lowering: the first cluster's output) needs no intermediate. The
// CPU backend runs the plan against the reference.
TEST(Plan, AnOutputAKernelMaterializesIsStoredByThatKernel) {
  Program p = source(R"(
program pk(q: f32[b, m, d], k: f32[b, n, d]) {
  s = sum(q * k, d)
  out top: f32[b, m] = max(softmax(s, n), n)
  out mx: f32[b, m] = max(s, n)
})");
  Plan plan = plan_of(p);
  ASSERT_EQ(plan.kernel_count(), 2);
  EXPECT_EQ(plan.writes(0), (std::vector<std::string>{"tmp0", "mx", "tmp1"}));
  EXPECT_EQ(plan.writes(1), (std::vector<std::string>{"top"}));
  ASSERT_EQ(plan.materialized().size(), 2u);
  std::mt19937_64 rng(7);
  TensorMap in;
  in["q"] = testing::random_float_tensor(DType::f32, {2, 5, 8}, rng);
  in["k"] = testing::random_float_tensor(DType::f32, {2, 70, 8}, rng);
  const TensorMap want = evaluate_reference(p, in), got = run_cpu(p, in);
  for (const char* o : {"top", "mx"})
    EXPECT_EQ(testing::compare_tensors(got.at(o), want.at(o), 1e-5), "") << o;
  // seeded (lowering's cuts): an output no other value reads, in a kernel of its own, stored
  // there, with no intermediate; the note says why
  Program two = source(R"(
program two(q: f32[b, m, d], k: f32[b, n, d], v: f32[b, n, e]) {
  s = sum(q * k, d)
  out mx: f32[b, m] = max(s, n)
  out o: f32[b, m, e] = sum(softmax(s * 2.0, n) * v, n)
})");
  const Compiled c = compile_program(two, {}, "fuse");
  const Plan seeded =
      make_plan(c.rewritten, {}, {{{c.rewritten.outputs.at(0).node}, "for the test"}});
  ASSERT_EQ(seeded.kernel_count(), 2);
  EXPECT_EQ(seeded.writes(0), (std::vector<std::string>{"mx"}));
  EXPECT_EQ(seeded.writes(1), (std::vector<std::string>{"o"}));
  EXPECT_TRUE(seeded.materialized().empty());
  for (const PlanBuffer& b : seeded.buffers)
    if (b.kind == PlanBuffer::Output)
      EXPECT_EQ(b.reason, b.name == "mx" ? "stored by the kernel that materializes it: for the test"
                                         : "")
          << b.name;
}

// classify_tiles decides once which gathers of a mask the tile classifiers bound by the data a
// tile reads (TileClasses::data_ranges; lowering, the CPU printer and explain read it): plain
// dim indices, at most one over the row or key dim; over grid dims only it is one value per
// block; a computed index or a gather over both rows and keys is not bounded.
TEST(Plan, MaskDataBoundedPerTileIsDecidedOnce) {
  Plan doc = compile_program(example("document"), {}, "classify_tiles").plan;
  const Program& p = doc.program;
  const PlanKernel& k = doc.kernels.at(0);
  ASSERT_EQ(k.tiles.data_ranges.size(), 2u);
  std::set<std::string> over;
  for (const DataRange& r : k.tiles.data_ranges) {
    EXPECT_EQ(p.nodes[r.node].op, Op::Gather);
    EXPECT_EQ(p.params[p.nodes[r.node].param].name, "doc");
    over.insert(p.dims[r.over]);
  }
  EXPECT_EQ(over, (std::set<std::string>{"m", "n"}));
  Plan lens = compile_program(source(R"(
program lens(q: bf16[b, m, d], k: bf16[b, n, d], v: bf16[b, n, e], len: i32[b], keep: bool[m, n],
             shift: i32[t]) {
  s = where(n < len[b] and keep[m, n] and shift[n + 1] > 0, sum(q * k, d), -inf)
  out o: bf16[b, m, e] = sum(softmax(s, n) * v, n)
}
)"), {}, "classify_tiles").plan;
  const PlanKernel& lk = lens.kernels.at(0);
  ASSERT_GE(lk.tiles.mask, 0);
  ASSERT_EQ(lk.tiles.data_ranges.size(), 1u);  // len[b]; not keep[m, n], not shift[n + 1]
  EXPECT_EQ(lens.program.params[lens.program.nodes[lk.tiles.data_ranges[0].node].param].name,
            "len");
  EXPECT_EQ(lk.tiles.data_ranges[0].over, -1);
  EXPECT_NE(lens.str().find("data-bounded %"), std::string::npos) << lens.str();
}

// A parameter read by name at its own dims is data like a gather by those dims: one value per
// block over grid dims (win), a range per tile over the key or row dim (pad over n, lim over m);
// and a plain sum of a bool cast to a number keeps the mask (its summand is 0 where it is false).
TEST(Plan, MaskDataReadByNameIsBoundedAndABoolCountKeepsTheMask) {
  const std::vector<Program> ps =
      parse_file(testing::source_path("tests/programs/masks_and_outputs.attn"));
  auto program = [&](const std::string& name) {
    for (const Program& p : ps)
      if (p.name == name) return p;
    throw std::runtime_error("no program " + name);
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"win_scalar", ""}, {"pad_by_name", "n"}, {"row_limit", "m"}, {"count_cast", ""}};
  for (const auto& [name, over] : cases) {
    Plan plan = compile_program(program(name), {}, "classify_tiles").plan;
    const Program& p = plan.program;
    const PlanKernel& k = plan.kernels.at(0);
    ASSERT_GE(k.tiles.mask, 0) << name << ": " << k.tiles.note;
    EXPECT_TRUE(k.tiles.skip_empty && k.tiles.unmasked_full) << name;
    ASSERT_EQ(k.tiles.data_ranges.size(), 1u) << name;
    const Node& n = p.nodes[k.tiles.data_ranges[0].node];
    EXPECT_EQ(n.op, Op::Param) << name;
    EXPECT_EQ(k.tiles.data_ranges[0].over, over.empty() ? -1 : p.find_dim(over)) << name;
    EXPECT_TRUE(interval_undecided(p, k.tiles.mask, {k.tiles.data_ranges[0].node}).empty())
        << name;
    EXPECT_EQ(deciding_data_ranges(p, k.tiles), k.tiles.data_ranges) << name;
  }
  // Data the rules cannot use gets no pass: under sin (the mask decided by n <= m alone), or in
  // a mask that stays undecided; the lowering then scans no key data either.
  for (const char* cond : {"sin(pos) > 0.0 and n <= m", "sin(pos) > 0.0"}) {
    SCOPED_TRACE(cond);
    const Program prog = parse_source(std::string(R"(
program sinpos(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], pos: f32[b, n]) {
  s = where()") + cond + R"(, sum(q * k, d), -inf)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
)", "sinpos.attn").at(0);
    CompileOptions o;
    o.target = Target::cuda_sm90;
    o.sizes = {{"d", 64}, {"e", 64}};
    Compiled c = compile_program(prog, o, "lower");
    const PlanKernel& k = c.plan.kernels.at(0);
    ASSERT_GE(k.tiles.mask, 0);
    EXPECT_EQ(k.tiles.data_ranges.size(), 1u);  // (the plan lists the read)
    EXPECT_TRUE(deciding_data_ranges(c.plan.program, k.tiles).empty());
    const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
    EXPECT_TRUE(c.lowered.kernels.at(0).tensor_core.data_ranges.empty());
    EXPECT_FALSE(la.scan_by_warps);
  }
}

// Accumulators whose conditions share a conjunct (the attention's keep; a count's
// `keep and s > 0`, a max's `keep and s < 0.5`): the mask is that conjunct, the largest one they
// share (keep, not its n <= m). Conditions that share none keep every tile.
TEST(Plan, ConditionsSharingAConjunctKeepItAsTheTileMask) {
  const std::vector<Program> ps =
      parse_file(testing::source_path("tests/programs/masks_and_outputs.attn"));
  for (const char* name : {"count_where", "capped_peak"}) {
    SCOPED_TRACE(name);
    auto it = std::find_if(ps.begin(), ps.end(), [&](const Program& p) { return p.name == name; });
    ASSERT_NE(it, ps.end());
    Plan plan = compile_program(*it, {}, "classify_tiles").plan;
    const Program& p = plan.program;
    ASSERT_EQ(plan.kernels.size(), 1u);
    const PlanKernel& k = plan.kernels[0];
    ASSERT_GE(k.tiles.mask, 0) << k.tiles.note;
    EXPECT_TRUE(k.tiles.skip_empty && k.tiles.unmasked_full);
    const Node& mask = p.nodes[k.tiles.mask];
    EXPECT_EQ(mask.op, Op::And);  // keep = n <= m and m - n <= win[h]
    EXPECT_EQ(p.nodes[mask.args[0]].op, Op::Le);
    EXPECT_EQ(mask.dims, (DimSet{p.find_dim("h"), p.find_dim("m"), p.find_dim("n")}));
  }
  const Program apart = parse_source(R"(
program apart(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = where(n <= m, sum(q * k, d), -inf)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
  out c: f32[b, h, m] = sum(where(n >= m and q[b, h, m, 0] > 0.0, 1.0, 0.0), n)
}
)", "apart.attn").at(0);
  Plan plan = compile_program(apart, {}, "classify_tiles").plan;
  EXPECT_LT(plan.kernels.at(0).tiles.mask, 0) << plan.kernels.at(0).tiles.note;
  // A count of positive scores of a masked s = where(keep, q.k, -inf) holds only where keep
  // does (-inf > 0 is false): keep is its conjunct too, and the attention beside it still
  // skips tiles (a review's windowed count; head_count's key padding)
  const Program implied = parse_source(R"(
program implied(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = where(n <= m and n + 128 > m, sum(q * k, d), -inf)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
  out c: f32[b, h, m] = sum(f32(s > 0.0), n)
  out c2: f32[b, h, m] = sum(f32(-1.0 <= s), n)
}
)", "implied.attn").at(0);
  const Plan ip = compile_program(implied, {}, "classify_tiles").plan;
  ASSERT_EQ(ip.kernels.size(), 1u);
  ASSERT_GE(ip.kernels[0].tiles.mask, 0) << ip.kernels[0].tiles.note;
  EXPECT_EQ(ip.program.nodes[ip.kernels[0].tiles.mask].op, Op::And);
  // (s >= -inf holds where s is masked: it counts every key, no tile is skipped)
  const Program all_keys = parse_source(R"(
program all_keys(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = where(n <= m, sum(q * k, d), -inf)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
  out c: f32[b, h, m] = sum(f32(s >= -inf), n)
}
)", "all.attn").at(0);
  const Plan ap = compile_program(all_keys, {}, "classify_tiles").plan;
  EXPECT_LT(ap.kernels.at(0).tiles.mask, 0) << ap.kernels.at(0).tiles.note;
}

// An output over fewer dims than the attention, reduced over a dim of the attention's grid
// (tests/programs/partials.attn): the attention's kernel keeps its grid and stores the partial,
// an intermediate over that grid; a second kernel reduces it over the rest and stores the
// output. Where the attention's output reads the reduction (head_norm), the attention's result
// is materialized on its grid and the max over heads is cut there.
TEST(Plan, AReductionOverAnotherOutputsGridIsCut) {
  const std::vector<Program> ps =
      parse_file(testing::source_path("tests/programs/partials.attn"));
  struct Case {
    const char* program;
    Op op;
    std::vector<std::string> attention_grid, partial_dims, partial_reduce, rest;
  };
  const std::vector<Case> cases = {
      {"head_count", Op::Sum, {"b", "h", "m"}, {"b", "h", "m"}, {"n"}, {"h"}},
      {"head_peak", Op::Max, {"b", "h", "m"}, {"b", "h", "m"}, {"n"}, {"h"}},
      {"mean_lse", Op::Sum, {"b", "h", "m"}, {"b", "h", "m"}, {}, {"h"}},
      {"group_min", Op::Min, {"b", "g", "r", "m"}, {"b", "g", "r", "m"}, {"n"}, {"r"}},
      {"int_count", Op::Sum, {"b", "h", "m"}, {"b", "h", "m"}, {"n"}, {"h"}},
      {"head_mix", Op::Sum, {"b", "h", "m"}, {"b", "h", "m", "e"}, {}, {"h"}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.program);
    const Program* prog = nullptr;
    for (const Program& p : ps)
      if (p.name == c.program) prog = &p;
    ASSERT_NE(prog, nullptr);
    const Plan plan = compile_program(*prog, {}, "fuse").plan;
    const Program& p = plan.program;
    auto dims = [&](const std::vector<std::string>& names) {
      DimSet ds;
      for (const std::string& n : names) ds = dimset_union(ds, {p.find_dim(n)});
      return ds;
    };
    ASSERT_EQ(plan.kernels.size(), 2u) << plan.str();
    const std::vector<int> mat = plan.materialized();
    ASSERT_EQ(mat.size(), 1u) << plan.str();
    const PlanBuffer& tmp = plan.buffers[mat[0]];
    const Node& part = p.nodes[tmp.node];
    EXPECT_EQ(part.dims, dims(c.partial_dims));
    if (!c.partial_reduce.empty()) {
      EXPECT_EQ(part.op, c.op);
      EXPECT_EQ(part.reduce, dims(c.partial_reduce));
    }
    EXPECT_NE(tmp.reason.find("runs in a kernel of its own"), std::string::npos) << tmp.reason;
    // kernel 0: the attention over its own grid, storing the partial beside o
    const PlanKernel& att = plan.kernels[0];
    std::vector<int> grid = att.grid;
    std::sort(grid.begin(), grid.end());
    EXPECT_EQ(grid, dims(c.attention_grid)) << p.dim_list(att.grid);
    const std::vector<std::string> w0 = plan.writes(0);
    EXPECT_NE(std::find(w0.begin(), w0.end(), tmp.name), w0.end());
    EXPECT_NE(std::find(w0.begin(), w0.end(), "o"), w0.end());
    // kernel 1: reads the partial and reduces it over the rest
    const PlanKernel& rest = plan.kernels[1];
    EXPECT_EQ(rest.red_dim, p.find_dim(c.rest[0]));
    const std::vector<std::string> r1 = plan.reads(1);
    EXPECT_EQ(r1, std::vector<std::string>{tmp.name});
  }
  // head_norm's o reads the reduction over heads of the attention's o1: o1 is materialized on
  // the attention's grid, and the max over heads and keys is cut at that kernel (the partial
  // max over keys stored beside o1); o and the rest of the max read them after
  const Program* norm = nullptr;
  for (const Program& p : ps)
    if (p.name == "head_norm") norm = &p;
  ASSERT_NE(norm, nullptr);
  const Plan plan = compile_program(*norm, {}, "fuse").plan;
  ASSERT_EQ(plan.kernels.size(), 2u) << plan.str();
  const Program& np = plan.program;
  std::vector<int> grid = plan.kernels[0].grid;
  std::sort(grid.begin(), grid.end());
  const DimSet bhm{np.find_dim("b"), np.find_dim("h"), np.find_dim("m")};
  EXPECT_EQ(grid, bhm);
  EXPECT_EQ(plan.kernels[0].red_dim, np.find_dim("n"));
  ASSERT_EQ(plan.materialized().size(), 2u) << plan.str();
  std::vector<std::string> tmps;
  for (int b : plan.materialized()) {
    const PlanBuffer& t = plan.buffers[b];
    tmps.push_back(t.name);
    const Node& n = np.nodes[t.node];
    if (n.op == Op::Max) {  // the partial: a max over the keys on the attention's grid
      EXPECT_EQ(n.reduce, DimSet{np.find_dim("n")});
      EXPECT_EQ(n.dims, bhm);
      EXPECT_NE(t.reason.find("stored by the kernel of the materialized"), std::string::npos)
          << t.reason;
    } else {
      EXPECT_EQ(n.dims, dimset_union(bhm, {np.find_dim("e")}));
    }
  }
  std::sort(tmps.begin(), tmps.end());
  std::vector<std::string> w0 = plan.writes(0), r1 = plan.reads(1);
  std::sort(w0.begin(), w0.end());
  std::sort(r1.begin(), r1.end());
  EXPECT_EQ(w0, tmps);
  EXPECT_EQ(r1, tmps);
  // --strict: one kernel, h held whole
  CompileOptions strict;
  strict.strict = true;
  EXPECT_EQ(compile_program(*norm, strict, "fuse").plan.kernels.size(), 1u);
}

// A reduction of the attention's result over a dim its own kernel keeps in the grid (a norm
// over heads, a mean over rows, a mixture of heads as the only output, a softmax over heads of
// the log-sum-exp, an RMS norm over a group's query heads): the result is materialized by a
// kernel over the attention's grid that streams the keys (never the heads with every key held
// whole), and what reads it runs after; --strict holds the dim whole instead (nothing
// materialized). Softmaxes over a root's dim inside a sum over keys (over heads, over a group's
// query heads) stay one kernel, and so does a norm over a dim only the keys' parameters have
// (linear attention's e).
TEST(Plan, AReductionOfTheAttentionOverItsGridMaterializesIt) {
  const std::vector<Program> ps =
      parse_file(testing::source_path("tests/programs/after_attention.attn"));
  ASSERT_EQ(ps.size(), 6u);
  for (const Program& prog : ps) {
    SCOPED_TRACE(prog.name);
    const Plan plan = compile_program(prog, {}, "fuse").plan;
    const Program& p = plan.program;
    ASSERT_EQ(plan.kernels.size(), 2u) << plan.str();
    const PlanKernel& att = plan.kernels[0];
    EXPECT_EQ(att.red_dim, p.find_dim("n")) << plan.str();
    // the attention's grid: every dim of q but the head dim d
    DimSet want;
    for (int d : p.params[0].dims)
      if (p.dims[d] != "d") want = dimset_union(want, {d});
    std::vector<int> grid = att.grid;
    std::sort(grid.begin(), grid.end());
    EXPECT_EQ(grid, want) << p.dim_list(att.grid);
    // it stores what the rest reads; no later kernel reads q, k or v (the attention runs
    // once: norm_peak's max over heads and keys is cut, its partial stored beside o1)
    bool stores_materialized = false;
    for (int b : plan.materialized()) {
      const std::vector<std::string> w0 = plan.writes(0);
      stores_materialized = stores_materialized ||
                            std::find(w0.begin(), w0.end(), plan.buffers[b].name) != w0.end();
    }
    EXPECT_TRUE(stores_materialized) << plan.str();
    for (size_t ki = 1; ki < plan.kernels.size(); ++ki)
      for (const std::string& r : plan.reads(static_cast<int>(ki)))
        EXPECT_TRUE(r != "v" && r != "q" && r != "k")
            << r << " read by kernel " << ki;
    CompileOptions strict;  // (nothing materialized; head_softmax's two outputs apart)
    strict.strict = true;
    EXPECT_TRUE(compile_program(prog, strict, "fuse").plan.materialized().empty());
  }
  // (a review's programs: the softmax's dim is the output's, which no kernel can stream)
  const std::vector<Program> inner = parse_source(R"(
program hsoft(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  out o: f32[b, h, m, e] = sum(softmax(sum(q * k, d), h) * v, n)
}
program rsoft(q: bf16[b, g, r, m, d], k: bf16[b, g, n, d], v: bf16[b, g, n, e]) {
  s = sum(q * k, d)
  out o: f32[b, g, r, m, e] = sum(softmax(s, r) * softmax(s, n) * v, n)
}
program lin_norm(k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  st = sum(k * v, n)
  out o: f32[b, h, d, e] = st / sqrt(sum(st * st, e))
}
program keys_and_heads(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  out o: f32[b, m, e] = sum(softmax(sum(q * k, d), n) * v, n, h)
}
)", "inner.attn");
  for (const Program& prog : inner) {
    SCOPED_TRACE(prog.name);
    const Plan plan = compile_program(prog, {}, "fuse").plan;
    EXPECT_EQ(plan.kernels.size(), 1u) << plan.str();
    EXPECT_TRUE(plan.materialized().empty());
  }
  // (a review's programs: what a reduction over heads reads mixes the attention's o with a
  // softmax over heads of its log-sum-exp; o and the lse are materialized, in one kernel, and
  // a second kernel does the rest -- not a dependency cycle)
  const std::vector<Program> pools = parse_source(R"(
program headpool_lse(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  o1 = sum(softmax(s, n) * v, n)
  out a: f32[b, m, e] = sum(softmax(logsumexp(s, n), h) * o1, h)
}
program gpool(q: bf16[b, g, r, m, d], k: bf16[b, g, n, d], v: bf16[b, g, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  o1 = sum(softmax(s, n) * v, n)
  out a: f32[b, g, m, e] = sum(softmax(logsumexp(s, n), r) * o1, r)
}
)", "pools.attn");
  for (const Program& prog : pools) {
    SCOPED_TRACE(prog.name);
    const Plan plan = compile_program(prog, {}, "fuse").plan;
    ASSERT_EQ(plan.kernels.size(), 2u) << plan.str();
    EXPECT_EQ(plan.materialized().size(), 2u) << plan.str();
    EXPECT_EQ(plan.kernels[0].red_dim, plan.program.find_dim("n"));
    for (const std::string& r : plan.reads(1)) EXPECT_TRUE(r != "q" && r != "k" && r != "v") << r;
  }
  // Not where what the reduction reads is a running max over the keys (the kernel's online
  // sums rescale by it: reading it back would make them two passes), nor where a root needs
  // another accumulator per head besides (a review's sweep: both held h whole before and
  // still do)
  const std::vector<Program> kept = parse_source(R"(
program max_pool(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  o1 = sum(softmax(s, n) * v, n)
  out o: f32[b, h, m, e] = o1 / max(max(s, n), h)
}
program back_in(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  o1 = sum(softmax(s, n) * v, n)
  out o: f32[b, h, m, e] = sum(softmax(s, n) * sum(o1, h), n)
}
)", "kept.attn");
  for (const Program& prog : kept) {
    SCOPED_TRACE(prog.name);
    const Plan plan = compile_program(prog, {}, "fuse").plan;
    EXPECT_EQ(plan.kernels.size(), 1u) << plan.str();
  }
  // Of two dims one reduction reduces (a count over heads and keys alone), the keys are
  // streamed (q lacks them; every parameter has h), not the heads with every key held whole
  const Program count = parse_source(R"(
program cnt_only(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  out cnt: i64[b, m] = sum(i64(s > 0.0), h, n)
}
)", "cnt.attn").at(0);
  const Plan cp = compile_program(count, {}, "fuse").plan;
  ASSERT_EQ(cp.kernels.size(), 1u);
  EXPECT_EQ(cp.kernels[0].red_dim, cp.program.find_dim("n"));
}

// A reduction over a dim of the grid of a kernel that materializes the attention's result (a
// norm over heads beside a max over heads and keys, with one output or two; the result also an
// output, beside a max over batch, rows and keys; a sum over heads, rows and keys) is cut at
// that kernel: its partial over the keys is stored beside the result, and the attention runs
// once -- one kernel reads q, k and v, and it reads nothing back (a partial that is the
// softmax's running max goes in the same kernel, not one before it). A partial over nothing
// that would cover the rows is not cut: a value per (row, key) is cheaper recomputed than stored.
TEST(Plan, APartialIsCutAtTheKernelThatMaterializesTheAttention) {
  const std::vector<Program> ps = parse_source(R"(
program one_out(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  o1 = sum(softmax(s, n) * v, n)
  out o: f32[b, h, m, e] = o1 * rsqrt(sum(o1 * o1, h, e)) / max(s, h, n)
}
program also_out(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  o1 = sum(softmax(s, n) * v, n)
  out o: bf16[b, h, m, e] = o1
  out tot: f32[e] = sum(o1, b, h, m)
  out ph: f32[h] = max(s, b, m, n)
}
program over_rows(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = where(n <= m, sum(q * k, d) / sqrt(size(d)), -inf)
  o1 = sum(softmax(s, n) * v, n)
  out o: f32[b, h, m, e] = o1 - mean(o1, h)
  out z: f32[b] = sum(exp(s), h, m, n)
}
program group_peak(q: bf16[b, g, r, m, d], k: bf16[b, g, n, d], v: bf16[b, g, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  o1 = sum(softmax(s, n) * v, n)
  out o: f32[b, g, r, m, e] = o1 / sqrt(mean(o1 * o1, r) + 1e-6)
  out pk: f32[b, g, m] = min(s, r, n)
}
)", "beside.attn");
  for (const Program& prog : ps) {
    SCOPED_TRACE(prog.name);
    const Plan plan = compile_program(prog, {}, "fuse").plan;
    const Program& p = plan.program;
    ASSERT_GE(plan.kernels.size(), 2u) << plan.str();
    EXPECT_EQ(plan.kernels[0].red_dim, p.find_dim("n"));
    bool partial = false;
    for (int b : plan.materialized()) {
      const Node& n = p.nodes[plan.buffers[b].node];
      if (is_reduction(n.op)) {
        partial = true;
        EXPECT_EQ(n.reduce, DimSet{p.find_dim("n")}) << plan.str();
      }
    }
    EXPECT_TRUE(partial) << plan.str();
    for (size_t ki = 0; ki < plan.kernels.size(); ++ki)
      for (const std::string& r : plan.reads(static_cast<int>(ki))) {
        const bool input = r == "q" || r == "k" || r == "v";
        EXPECT_EQ(input, ki == 0) << r << " read by kernel " << ki << "\n" << plan.str();
      }
  }
  // Not a partial that needs the kernel's own accumulators over the keys (a review's
  // programs: the sum of a softmax over keys, a max of s minus its lse, a max of s times a sum
  // of o1): fused with o1 it would split the attention into kernels of their own or, with
  // lowering's cuts, close a dependency cycle. The attention runs in one kernel (one reads v),
  // and the CUDA lowering plans without an internal error.
  const std::vector<Program> own = parse_source(R"(
program sm_sum(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  o1 = sum(softmax(s, n) * v, n)
  out o: f32[b, h, m, e] = o1 * rsqrt(sum(o1 * o1, h, e))
  out z: f32[b, m] = sum(softmax(s, n), h, n)
}
program lse_max(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  o1 = sum(softmax(s, n) * v, n)
  out o: f32[b, h, m, e] = o1 * rsqrt(sum(o1 * o1, h, e))
  out z: f32[b, m] = max(s - logsumexp(s, n), h, n)
}
program o_max(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  o1 = sum(softmax(s, n) * v, n)
  out o: f32[b, h, m, e] = o1
  out z: f32[b, m] = max(s * sum(o1, e), h, n)
}
)", "own.attn");
  for (const Program& prog : own) {
    SCOPED_TRACE(prog.name);
    const Plan plan = compile_program(prog, {}, "fuse").plan;
    int reads_v = 0;
    for (size_t ki = 0; ki < plan.kernels.size(); ++ki)
      for (const std::string& r : plan.reads(static_cast<int>(ki))) reads_v += r == "v";
    EXPECT_EQ(reads_v, 1) << plan.str();
    CompileOptions cuda;
    cuda.target = Target::cuda_sm90;
    cuda.sizes = {{"d", 64}, {"e", 64}};
    EXPECT_NO_THROW(compile_program(prog, cuda, "lower"));
  }
  const Program rows = parse_source(R"(
program rows(a: f32[m, d], c: f32[n, d]) {
  out o: f32[m] = max(sum(a * c, d), n)
  out z: f32[m, n] = sum(a * c, d) * 2.0
}
)", "rows.attn").at(0);
  EXPECT_TRUE(compile_program(rows, {}, "fuse").plan.materialized().empty());
}

// Where the cut does not apply (a review's programs): a partial the attention's kernel cannot
// compute (it needs the max over heads first), one that is no accumulator of the kernel's loop
// (a query norm over d), one that does not lie on its grid (a key norm per batch); a value dim
// held whole beside the keys keeps outputs over it in the attention's kernel; two outputs
// that cut the same max share one partial; a count over [m] alone is a kernel of its own (not
// the attention's grid shrunk to [m]); --strict cuts nothing.
TEST(Plan, APartialIsCutOnlyWhereTheOutputsKernelComputesIt) {
  const std::string head = R"(
  s = sum(q * k, d) / sqrt(size(d))
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
)";
  auto plan_of = [&](const std::string& params, const std::string& body, bool strict = false) {
    CompileOptions o;
    o.strict = strict;
    const Program p = parse_source(
        "program t(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]" + params +
            ") {" + head + body + "}\n",
        "t.attn").at(0);
    return compile_program(p, o, "fuse").plan;
  };
  struct Case {
    std::string params, body;
    size_t kernels, materialized;
  };
  const std::vector<Case> cases = {
      // the exp's max is over heads: only the max itself is cut (the attention's own max)
      {"", "  mx = max(s, h, n)\n  out l: f32[b, m] = mx + log(sum(exp(s - mx), h, n))\n", 3, 2},
      {"", "  out qn: f32[b, m] = sum(f32(q) * f32(q), h, d)\n", 2, 0},
      {"", "  out kn: f32[b] = sum(f32(k) * f32(k), h, n, d)\n", 2, 0},
      {", g: bf16[b, h, m, e]", "  out z: f32[b, h, m, e] = f32(g) * logsumexp(s, n)\n", 1, 0},
      {"", "  out p1: f32[b, m] = max(s, h, n)\n  out p2: f32[m] = max(s, b, h, n)\n", 3, 1},
      // a count over fewer dims than the attention (b and h held whole by a joint kernel)
      {"", "  out cnt: i64[m] = sum(i64(n <= m), n)\n", 2, 0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    const Plan plan = plan_of(c.params, c.body);
    EXPECT_EQ(plan.kernels.size(), c.kernels) << plan.str();
    EXPECT_EQ(plan.materialized().size(), c.materialized) << plan.str();
    // the attention's kernel keeps its grid
    for (const PlanKernel& k : plan.kernels)
      if (std::find_if(k.writes.begin(), k.writes.end(), [&](int b) {
            return plan.buffers[b].name == "o";
          }) != k.writes.end())
        EXPECT_EQ(k.grid.size(), 3u) << plan.str();
  }
  const Plan strict = plan_of("", "  out cnt: f32[b, m] = sum(f32(s > 0.0), h, n)\n", true);
  EXPECT_TRUE(strict.materialized().empty()) << strict.str();
}

TEST(Explain, JsonHasKernelsWithReadsAndWrites) {
  CompileOptions opt;
  opt.sizes = {{"b", 1}, {"h", 8}, {"m", 2048}, {"n", 2048}, {"d", 64}, {"e", 64}};
  auto j = nlohmann::json::parse(explain_json(example("causal"), opt));
  ASSERT_EQ(j["kernels"].size(), 1u);
  EXPECT_EQ(j["kernels"][0]["reads"], nlohmann::json({"q", "k", "v"}));
  EXPECT_EQ(j["kernels"][0]["writes"], nlohmann::json({"o"}));
  // 4·b·h·m·n·d for the two contractions, plus element-wise work.
  double flops = j["kernels"][0]["flops"];
  EXPECT_GE(flops, 4.0 * 8 * 2048 * 2048 * 64);
  EXPECT_TRUE(j["materialized"].empty());
}

TEST(Explain, TextNamesGridLoopAndMask) {
  std::string text = explain(example("sliding_window"), {});
  EXPECT_NE(text.find("1 kernel"), std::string::npos) << text;
  EXPECT_NE(text.find("loop:      over n"), std::string::npos) << text;
  EXPECT_NE(text.find("empty tiles skipped"), std::string::npos) << text;
}

// A mask the interval rules can never decide (a boolean tensor over rows and keys, a sine of
// the positions) is named as such, not as skipping tiles; one side of an `and` or `where` that
// the rules bound is enough to decide tiles. JSON: `mask_undecided_by`.
TEST(Explain, MasksTheIntervalRulesCannotDecideSaySo) {
  std::vector<Program> ps = parse_source(R"(
program keep2d(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e], keep: bool[m, n]) {
  s = where(keep[m, n], sum(q * k, d), -inf)
  out o: bf16[h, m, e] = sum(softmax(s, n) * v, n)
}
program sine(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e]) {
  s = where(sin(f32(n - m)) > 0.0, sum(q * k, d), -inf)
  out o: bf16[h, m, e] = sum(softmax(s, n) * v, n)
}
program keepcausal(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e], keep: bool[m, n]) {
  s = where(keep[m, n] and n <= m, sum(q * k, d), -inf)
  out o: bf16[h, m, e] = sum(softmax(s, n) * v, n)
}
program switch(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e], keep: bool[m, n]) {
  s = where(where(m < 10, keep[m, n], n <= m), sum(q * k, d), -inf)
  out o: bf16[h, m, e] = sum(softmax(s, n) * v, n)
}
)", "t.attn");
  const std::vector<std::vector<std::string>> ops = {{"gather"}, {"sin"}, {}, {}};
  for (size_t i = 0; i < ps.size(); ++i) {
    SCOPED_TRACE(ps[i].name);
    const nlohmann::json j = nlohmann::json::parse(explain_json(ps[i], {}));
    const nlohmann::json& k = j["kernels"][0];
    ASSERT_FALSE(k["mask"].is_null());
    const auto undecided = k["mask_undecided_by"].get<std::vector<std::string>>();
    ASSERT_EQ(undecided.size(), ops[i].size());
    for (size_t u = 0; u < undecided.size(); ++u)
      EXPECT_NE(undecided[u].find(" = " + ops[i][u] + " "), std::string::npos) << undecided[u];
    const std::string text = explain(ps[i], {});
    EXPECT_EQ(text.find("empty tiles skipped") != std::string::npos, ops[i].empty()) << text;
    EXPECT_EQ(text.find("every tile computed with the mask") != std::string::npos,
              !ops[i].empty()) << text;
  }
}

// A mask over per-batch data (len[b]) names its one value per tile, in text and JSON, for every
// target.
TEST(Explain, PerBatchMaskDataIsOneValuePerTile) {
  Program p = parse_source(R"(
program lens(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], len: i32[b]) {
  s = where(n < len[b] and m < len[b], sum(q * k, d) / sqrt(size(d)), -inf)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
)", "lens.attn").at(0);
  for (Target t : {Target::cpu, Target::cuda_sm80}) {
    CompileOptions opt;
    opt.target = t;
    opt.sizes = {{"d", 64}, {"e", 64}};
    const std::string text = explain(p, opt);
    EXPECT_NE(text.find("len[%"), std::string::npos) << text;
    EXPECT_NE(text.find("one value per tile"), std::string::npos) << text;
    EXPECT_NO_THROW(nlohmann::json::parse(explain_json(p, opt)));
  }
}

// At the sizes of a call, explain says what flash-decoding does on the target's SMs: a decode
// step runs the few-rows kernel with its key loop split; a long prefill runs the full kernel
// unsplit; without the lengths it says nothing.
TEST(Explain, FlashDecodingAtTheGivenSizes) {
  CompileOptions opt;
  opt.target = Target::cuda_sm90;
  opt.sizes = {{"b", 8}, {"h", 32}, {"m", 1}, {"n", 16384}, {"d", 128}, {"e", 128}};
  auto j = nlohmann::json::parse(explain_json(example("vanilla"), opt));
  const auto& cuda = j["kernels"][0]["cuda"];
  EXPECT_EQ(cuda["path"], "tensor_core");
  EXPECT_EQ(cuda["few_rows"], true);
  EXPECT_GT(cuda["key_split"].get<int>(), 1);
  EXPECT_EQ(cuda["sm_count_assumed"], 132);
  EXPECT_NE(explain(example("vanilla"), opt).find("split across"), std::string::npos);
  opt.sizes["m"] = opt.sizes["n"] = 4096;
  j = nlohmann::json::parse(explain_json(example("vanilla"), opt));
  EXPECT_EQ(j["kernels"][0]["cuda"]["few_rows"], false);
  EXPECT_EQ(j["kernels"][0]["cuda"]["key_split"], 1);
  EXPECT_EQ(j["kernels"][0]["cuda"]["walk"], false);  // a long key loop: a block per item
  EXPECT_EQ(j["kernels"][0]["cuda"]["persistent"], true);
  EXPECT_EQ(j["kernels"][0]["cuda"]["items_differ"], false);
  EXPECT_EQ(j["kernels"][0]["cuda"]["walk_entry"], "vanilla_k0_walk");
  {  // causal: items of unequal work walk at a long key loop too
    const nlohmann::json jc = nlohmann::json::parse(explain_json(example("causal"), opt));
    EXPECT_EQ(jc["kernels"][0]["cuda"]["items_differ"], true);
    EXPECT_EQ(jc["kernels"][0]["cuda"]["walk"], true);
  }
  EXPECT_EQ(j["kernels"][0]["cuda"]["walk_pipelined"], true);
  EXPECT_EQ(j["kernels"][0]["cuda"]["pipelined"], false);
  // a short one: the blocks walk the work items
  opt.sizes["b"] = 32;
  opt.sizes["h"] = 16;
  opt.sizes["m"] = opt.sizes["n"] = 512;
  j = nlohmann::json::parse(explain_json(example("vanilla"), opt));
  EXPECT_EQ(j["kernels"][0]["cuda"]["walk"], true);
  EXPECT_NE(explain(example("vanilla"), opt).find("blocks walking the work items"),
            std::string::npos);
  opt.sizes = {{"d", 128}, {"e", 128}};
  j = nlohmann::json::parse(explain_json(example("vanilla"), opt));
  EXPECT_FALSE(j["kernels"][0]["cuda"].contains("key_split"));
}

// explain's JSON carries the Hopper kernel's warp specialization: 12 warps, the ring's stages
// (3 at d = 128, 4 at d = 64: as many as shared memory holds), Q's buffers and K/V by TMA;
// cuda-sm80 has none of them.
TEST(Explain, HopperKernelsNameTheirProducerWarpgroupAndStages) {
  CompileOptions opt;
  opt.target = Target::cuda_sm90;
  for (int64_t d : {128, 64}) {
    opt.sizes = {{"d", d}, {"e", d}};
    auto j = nlohmann::json::parse(explain_json(example("causal"), opt));
    const auto& cuda = j["kernels"][0]["cuda"];
    EXPECT_EQ(cuda["products"], "wgmma");
    EXPECT_EQ(cuda["warp_specialized"], true);
    EXPECT_EQ(cuda["warps"], 12);
    EXPECT_EQ(cuda["stages"], d == 128 ? 3 : 4) << "d=" << d;
    // a second Q buffer beside the stages at d = 64 (16 KiB); at d = 128 the three stages and
    // Q leave no 32 KiB
    EXPECT_EQ(cuda["q_buffers"], d == 128 ? 1 : 2) << "d=" << d;
    EXPECT_EQ(cuda["tma"], true);
    EXPECT_FALSE(cuda.contains("diag_copies"));  // no values per tile line
    // ALiBi's slope * (n - m), a value per diagonal: a copy per stage at d = 64 (shared memory
    // holds them), at least two
    auto a = nlohmann::json::parse(explain_json(example("alibi"), opt))["kernels"][0]["cuda"];
    ASSERT_TRUE(a.contains("diag_copies"));
    if (d == 64) EXPECT_EQ(a["diag_copies"], a["stages"]);
    EXPECT_GE(a["diag_copies"].get<int>(), 2);
    EXPECT_LE(a["diag_copies"].get<int>(), a["stages"].get<int>());
  }
  opt.target = Target::cuda_sm80;
  auto j = nlohmann::json::parse(explain_json(example("causal"), opt));
  EXPECT_EQ(j["kernels"][0]["cuda"]["warp_specialized"], false);
  EXPECT_EQ(j["kernels"][0]["cuda"]["stages"], 2);
  EXPECT_FALSE(j["kernels"][0]["cuda"].contains("q_buffers"));
  EXPECT_EQ(j["kernels"][0]["cuda"]["tma"], false);
  EXPECT_EQ(j["kernels"][0]["cuda"]["pieces"], 1);
  EXPECT_TRUE(j["kernels"][0]["cuda"]["split_operands"].empty());
}

// f32 operands: explain names the operands split into 3 bf16 pieces and the mma.sync products.
TEST(Explain, F32OperandsAreSplitIntoBf16Pieces) {
  Program p = parse_source(R"(
program f32s(q: f32[b, h, m, d], k: f32[b, h, n, d], v: f32[b, h, n, e]) {
  out o: f32[b, h, m, e] = sum(softmax(sum(q * k, d), n) * v, n)
}
)", "f32s.attn").at(0);
  CompileOptions opt;
  opt.target = Target::cuda_sm90;
  opt.sizes = {{"d", 64}, {"e", 64}};
  auto j = nlohmann::json::parse(explain_json(p, opt));
  const auto& cuda = j["kernels"][0]["cuda"];
  EXPECT_EQ(cuda["path"], "tensor_core");
  EXPECT_EQ(cuda["products"], "mma.sync");
  EXPECT_EQ(cuda["pieces"], 3);
  EXPECT_EQ(cuda["split_operands"], nlohmann::json::array({"q", "k", "v"}));
}

TEST(Pipeline, DumpAfterEveryStage) {
  Program p = example("vanilla");
  for (const std::string& s : pipeline_stage_names())
    EXPECT_FALSE(dump_after(p, s, {}).empty()) << s;
  EXPECT_THROW(dump_after(p, "nope", {}), ProgramError);
  EXPECT_EQ(dump_after(p, "canonicalize", {}).find("softmax"), std::string::npos);
}

}  // namespace
}  // namespace flashgen
