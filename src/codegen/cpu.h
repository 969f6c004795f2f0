// The CPU backend's kernel skeleton: each plan kernel as a C++ function with OpenMP over its
// logical grid (see cpu.cpp for the ABI).
#pragma once

#include <string>

#include "plan/plan.h"

namespace flashgen {

// The whole C++ source of a plan (prelude + one extern "C" function per kernel, named
// PlanKernel::name). ABI of each function:
//   void NAME(void* const* bufs, const int64_t* strides, const int64_t* ext, int64_t* err)
// bufs[i]: buffer i of the plan (inputs in their dtype's encoding, outputs and intermediates
// as double); strides: for each buffer in order, one stride (in elements) per dim of its
// memory order; ext: the extent of every program dim by id; err[0..3]: set to
// {1, param, dim position, index} by the first out-of-range gather, or {2, 0, 0, node} by the
// first integer `x % 0` (node: its id in plan.program).
std::string emit_cpu_source(const Plan& plan);
// The parts: the helpers every source starts with, and one program's kernels (several
// programs with distinct names may share one source: tests batch compilations that way).
std::string emit_cpu_prelude();
std::string emit_cpu_kernels(const Plan& plan);

}  // namespace flashgen
