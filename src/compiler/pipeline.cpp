// The compiler pipeline: one readable function running the named stages in order.
//
//   canonicalize    passes/lower_sugar.cpp, passes/fold_constants.cpp
//   online_rewrite  passes/online_rewrite.cpp
//   fuse            passes/fuse.cpp + plan/build_plan.cpp (kernels, grid, eliminated dims)
//   classify_tiles  plan/tile_classes.cpp (block sparsity from mask expressions)
//   lower           lower/lower_cuda.cpp (CUDA targets: each kernel's path, launch, workspace);
//                   then two plan-level decisions, each fusing and lowering again with values
//                   materialized: lower/split_clusters.cpp (clusters of accumulators that do
//                   not fit one kernel, kept when fewer kernels take the element path or
//                   enough fewer products are done), and lower/cut_head_reductions.cpp (a
//                   query's or a key's reduction over a head dim in a kernel of its own, then
//                   the clusters again; kept when more kernels take the tensor-core path)
//   emit            codegen/ (cpu: codegen/cpu.cpp; cuda: codegen/cuda/emit_element.cpp, which
//                   prints tensor-core kernels by codegen/cuda/emit_sm80.cpp)
//
// `dump_after(p, stage)` prints the program (first two), the plan (next two), the lowered
// kernels (lower) or the source (emit). compile_program lowers and emits only when stopping
// after those stages (compile_to_target); emit_source runs them once.
// Tests: tests/passes/passes_test.cpp (the stage dumps, against tests/passes/golden/),
// tests/plan/plan_test.cpp.
#include "compiler/pipeline.h"

#include "codegen/cpu.h"
#include "codegen/cuda/emit_element.h"
#include "flashgen/error.h"
#include "passes/passes.h"

namespace flashgen {

const char* target_name(Target t) {
  switch (t) {
    case Target::cpu: return "cpu";
    case Target::cuda_sm80: return "cuda-sm80";
    case Target::cuda_sm90: return "cuda-sm90";
  }
  return "?";
}

std::optional<Target> parse_target(std::string_view s) {
  for (Target t : {Target::cpu, Target::cuda_sm80, Target::cuda_sm90})
    if (s == target_name(t)) return t;
  return std::nullopt;
}

std::vector<std::string> pipeline_stage_names() {
  return {"canonicalize", "online_rewrite", "fuse", "classify_tiles", "lower", "emit"};
}

SmemBudget smem_budget(const CompileOptions& opt) {
  SmemBudget b = smem_budget(opt.target == Target::cpu ? Target::cuda_sm80 : opt.target);
  if (opt.smem_per_sm > 0) b.per_sm = opt.smem_per_sm;
  if (opt.smem_per_block > 0) b.per_block = opt.smem_per_block;
  return b;
}

Extents head_extents(const Plan& plan, const Extents& sizes) {
  Extents out;
  for (const std::string& d : cuda_head_dims(plan)) {
    auto it = sizes.find(d);
    if (it != sizes.end()) out[d] = it->second;
  }
  return out;
}

Compiled compile_program(const Program& p, const CompileOptions& opt,
                         const std::string& stop_after, std::string* dump) {
  if (!stop_after.empty()) {
    bool known = false;
    for (const auto& s : pipeline_stage_names()) known = known || s == stop_after;
    if (!known) {
      std::string names;
      for (const auto& s : pipeline_stage_names()) names += (names.empty() ? "" : ", ") + s;
      throw ProgramError(p.loc, "unknown stage '" + stop_after + "' (stages: " + names + ")");
    }
  }
  auto stop = [&](const std::string& stage, const std::string& text) {
    if (stop_after != stage) return false;
    if (dump) *dump = text;
    return true;
  };
  Compiled c;
  c.canonical = canonicalize(p);
  if (stop("canonicalize", c.canonical.str())) return c;
  c.rewritten = online_rewrite(c.canonical, /*distribute_values=*/opt.target != Target::cpu);
  if (stop("online_rewrite", c.rewritten.str())) return c;
  c.plan = make_plan(c.rewritten, opt);
  if (stop("fuse", c.plan.str())) return c;
  classify_tiles(c.plan);
  if (stop("classify_tiles", c.plan.str())) return c;
  if (opt.strict && !c.plan.materialized().empty()) {
    std::string msg = "program '" + p.name + "' does not fuse into one kernel (--strict):";
    for (int b : c.plan.materialized())
      msg += "\n  " + c.plan.buffers[b].name + " is materialized: " + c.plan.buffers[b].reason;
    throw ProgramError(p.loc, msg);
  }
  // Lowering and source only when asked for (stop_after "lower" or "emit"): compiling for
  // explain or a cost must not pay for passes whose result is thrown away.
  if (stop_after != "lower" && stop_after != "emit") return c;
  const bool cuda = opt.target != Target::cpu;
  if (cuda) {
    const Extents heads = head_extents(c.plan, opt.sizes);
    c.lowered = lower_cuda(c.plan, opt.target, heads, smem_budget(opt));
    // Lowering's plan-level decisions (not under --strict, which asks for one kernel): each
    // names values to materialize; the program is planned and lowered again with them.
    struct Candidate {
      Plan plan;
      LoweredCuda lowered;
      std::vector<Materialize> kept;
    };
    auto replan = [&](const std::vector<Materialize>& cuts) {
      Candidate next{make_plan(c.rewritten, opt, cuts), {}, cuts};
      classify_tiles(next.plan);
      next.lowered = lower_cuda(next.plan, opt.target, heads, smem_budget(opt));
      return next;
    };
    // lower/split_clusters.cpp: clusters of accumulators that do not fit one kernel together
    // run as kernels of their own, where that puts fewer kernels on the element path or does
    // enough fewer products.
    auto split_clusters = [&](Candidate& cand) {
      if (!opt.cluster_split) return;
      const std::vector<Materialize> cuts = cluster_cuts(cand.plan, cand.lowered);
      if (cuts.empty()) return;
      std::vector<Materialize> all = cand.kept;
      all.insert(all.end(), cuts.begin(), cuts.end());
      Candidate next = replan(all);
      if (!cluster_split_pays(cand.lowered, next.lowered)) return;
      next.lowered.cluster_split = cluster_split_of(next.plan, cand.lowered, next.lowered);
      cand = std::move(next);
    };
    if (!opt.strict) {
      const std::vector<Materialize> head = head_reduction_cuts(c.plan, c.lowered);
      Candidate best{std::move(c.plan), std::move(c.lowered), {}};
      split_clusters(best);
      // lower/cut_head_reductions.cpp: a query's or a key's reduction over a head dim (a
      // norm) in a kernel of its own, then the clusters again; kept where more kernels take
      // the tensor-core path than without it. (The one-kernel build of decode calls,
      // cluster_split false, weighs the cut without the clusters. The ClusterSplit that
      // decode_runs_one_kernel reads describes this plan's unsplit lowering: that build
      // wherever the cut pays without the clusters too, which a review found no program
      // to break.)
      if (!head.empty()) {
        Candidate cut = replan(head);
        split_clusters(cut);
        if (head_cuts_pay(best.lowered, cut.lowered)) best = std::move(cut);
      }
      c.plan = std::move(best.plan);
      c.lowered = std::move(best.lowered);
    }
  }
  if (stop_after == "lower") {
    stop("lower", cuda ? c.lowered.str(c.plan)
                       : "lowered for cpu: every kernel prints as a loop nest (the cpu skeleton "
                         "of codegen/loop_kernel.h)\n");
    return c;
  }
  std::string all;
  if (cuda) {
    for (const LoweredKernel& lk : c.lowered.kernels) {
      c.sources.push_back(emit_lowered_kernel(c.plan, lk, c.lowered.storage));
      all += c.sources.back();
    }
  } else {
    c.sources.push_back(emit_cpu_source(c.plan));
    all = c.sources.back();
  }
  stop("emit", all);
  return c;
}

Compiled compile_to_target(const Program& p, const CompileOptions& opt) {
  return compile_program(p, opt, "emit", nullptr);
}

std::string dump_after(const Program& p, const std::string& stage, const CompileOptions& opt) {
  std::string out;
  CompileOptions o = opt;
  if (stage != "emit" && stage != "lower") o.strict = false;
  compile_program(p, o, stage, &out);
  return out;
}

int kernel_count(const Program& p, const CompileOptions& opt) {
  CompileOptions o = opt;
  o.strict = false;
  // (CUDA targets: after lowering, which may run a kernel per softmax cluster)
  return compile_program(p, o, o.target == Target::cpu ? "" : "lower").plan.kernel_count();
}

std::string emit_source(const Program& p, const CompileOptions& opt) {
  std::string src;
  compile_program(p, opt, "emit", &src);
  return src;
}

}  // namespace flashgen
