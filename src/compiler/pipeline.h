// The compiler pipeline as one function (see pipeline.cpp) and what it produces.
#pragma once

#include <string>

#include "flashgen/compile.h"
#include "plan/plan.h"

namespace flashgen {

struct Compiled {
  Program canonical;   // after canonicalize
  Program rewritten;   // after online_rewrite
  Plan plan;           // after fuse/plan and classify_tiles
};

// Runs the stages in order. With `stop_after` set, stops after that stage and puts its text
// form in *dump (ProgramError for an unknown stage name). Honors opt.strict.
Compiled compile_program(const Program& p, const CompileOptions& opt,
                         const std::string& stop_after = "", std::string* dump = nullptr);

// The CUDA emitter (src/codegen/cuda/) defines this; until it is linked in,
// emit_source for a CUDA target is a BackendError.
std::string emit_cuda_source(const Plan& plan, Target target) __attribute__((weak));

}  // namespace flashgen
