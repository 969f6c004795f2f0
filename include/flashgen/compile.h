// The compiler: Program -> canonical program -> fused plan -> generated kernels.
//
// The pipeline is one function (src/compiler/pipeline.cpp) running the passes in src/passes/
// in order; each pass has a name usable with --dump-after.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flashgen/ir.h"
#include "flashgen/ref.h"
#include "flashgen/tensor.h"

namespace flashgen {

enum class Target { cpu, cuda_sm80, cuda_sm90 };
const char* target_name(Target t);  // "cpu", "cuda-sm80", "cuda-sm90"
std::optional<Target> parse_target(std::string_view s);

struct CompileOptions {
  Target target = Target::cpu;
  // Extents known at compile time (may be empty). Only "head" dimensions (those the plan
  // eliminates into a tile) may specialize a kernel; long dims never cause a recompile.
  Extents sizes;
  bool strict = false;  // a materialized intermediate is an error (ProgramError)
};

// The names of the pipeline's stages, in order (valid values of --dump-after).
std::vector<std::string> pipeline_stage_names();
// The text form of the program or plan after stage `stage` (ProgramError if unknown).
std::string dump_after(const Program& p, const std::string& stage, const CompileOptions& opt);

// A human-readable report of the plan: kernels, ops, grid, reduction loop, reads/writes,
// estimated FLOPs and bytes (when sizes are given), materialized intermediates and why.
std::string explain(const Program& p, const CompileOptions& opt);
// The same as a JSON object: {"program":..., "kernels":[{"name","reads":[...],"writes":[...],
// ...}], "materialized":[...]}
std::string explain_json(const Program& p, const CompileOptions& opt);

// The number of kernels the plan has (tests assert fusion through this and plan.h).
int kernel_count(const Program& p, const CompileOptions& opt);

// Generated source for a target (C++ for cpu, CUDA C++ for cuda-*).
std::string emit_source(const Program& p, const CompileOptions& opt);

// Runs on the CPU backend (compiles with the host compiler, cached on disk).
TensorMap run_cpu(const Program& p, const TensorMap& inputs, const Extents& extra = {});
// Compiles several programs (distinct names) into one host library, so later run_cpu calls
// on them start at once (one compiler run instead of one per program).
void precompile_cpu(const std::vector<Program>& programs);

}  // namespace flashgen
