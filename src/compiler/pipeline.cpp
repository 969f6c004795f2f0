// The compiler pipeline: one readable function running the named stages in order.
//
//   canonicalize    passes/lower_sugar.cpp, passes/fold_constants.cpp
//   online_rewrite  passes/online_rewrite.cpp
//   fuse            passes/fuse.cpp + plan/build_plan.cpp (kernels, grid, eliminated dims)
//   classify_tiles  plan/tile_classes.cpp (block sparsity from mask expressions)
//   emit            codegen/ (cpu: codegen/cpu.cpp; cuda: codegen/cuda/)
//
// `dump_after(p, stage)` prints the program (first two) or plan (next two) or source (emit).
// compile_program runs the emitter only when stopping after "emit"; emit_source runs it once.
// Tests: tests/passes/golden_test.cpp, tests/plan/plan_test.cpp.
#include "compiler/pipeline.h"

#include "codegen/cpu.h"
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
  return {"canonicalize", "online_rewrite", "fuse", "classify_tiles", "emit"};
}

namespace {

std::string emit_for(const Plan& plan, Target t) {
  if (t == Target::cpu) return emit_cpu_source(plan);
  if (&emit_cuda_source == nullptr)
    throw BackendError(std::string("no emitter for target ") + target_name(t) +
                       " in this build");
  return emit_cuda_source(plan, t);
}

}  // namespace

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
  c.rewritten = online_rewrite(c.canonical);
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
  // Source is generated only when asked for (stop_after == "emit" or emit_source): compiling
  // for a run or for explain must not pay for an emitter pass whose text is thrown away.
  if (stop_after == "emit") stop("emit", emit_for(c.plan, opt.target));
  return c;
}

std::string dump_after(const Program& p, const std::string& stage, const CompileOptions& opt) {
  std::string out;
  CompileOptions o = opt;
  if (stage != "emit") o.strict = false;
  compile_program(p, o, stage, &out);
  return out;
}

int kernel_count(const Program& p, const CompileOptions& opt) {
  CompileOptions o = opt;
  o.strict = false;
  return compile_program(p, o).plan.kernel_count();
}

std::string emit_source(const Program& p, const CompileOptions& opt) {
  std::string src;
  compile_program(p, opt, "emit", &src);
  return src;
}

}  // namespace flashgen
