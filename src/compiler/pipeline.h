// The compiler pipeline as one function (see pipeline.cpp) and what it produces.
#pragma once

#include <string>

#include "flashgen/compile.h"
#include "lower/lower.h"
#include "plan/plan.h"

namespace flashgen {

struct Compiled {
  Program canonical;   // after canonicalize
  Program rewritten;   // after online_rewrite
  Plan plan;           // after fuse/plan and classify_tiles
  LoweredCuda lowered; // after lower (CUDA targets)
  // After emit: the target code, one translation unit per kernel on CUDA (lowered.kernels'
  // order), one for the whole plan on the CPU.
  std::vector<std::string> sources;
};

// Runs the stages in order. With `stop_after` set, stops after that stage and puts its text
// form in *dump (ProgramError for an unknown stage name). Without it, stops after
// classify_tiles (explain, cost and kernel counts need no target code). Honors opt.strict.
Compiled compile_program(const Program& p, const CompileOptions& opt,
                         const std::string& stop_after = "", std::string* dump = nullptr);
// The whole pipeline, through target code (stop_after = "emit").
Compiled compile_to_target(const Program& p, const CompileOptions& opt);
// The shared memory budget of opt (its fields, or the target's default device).
SmemBudget smem_budget(const CompileOptions& opt);
// The head-dim extents of `sizes` (cuda_head_dims of the plan): what CUDA kernels compile in.
Extents head_extents(const Plan& plan, const Extents& sizes);

}  // namespace flashgen
