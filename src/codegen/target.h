// Per-target tables of the one C-like emitter (codegen/element_code.cpp). Everything that
// differs between the CPU's C++ and CUDA C++ in element code is an entry here: scalar types,
// math intrinsics, qualifiers, the restrict keyword, and a prelude of small helpers
// (conversions bf16/f16/f8 -> float, rounding casts, floor-mod, div-or-zero, ...). Kernel
// skeletons (loops, OpenMP or thread indexing, tiles) are per backend: codegen/cpu.cpp; the
// CUDA backend adds its own in codegen/cuda/.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "flashgen/compile.h"
#include "flashgen/ir.h"

namespace flashgen {

struct TargetTable {
  Target target = Target::cpu;
  std::string float_t = "float";      // arithmetic type of every float value (f32 math)
  std::string index_t = "int64_t";    // integers
  std::string bool_t = "bool";
  std::string restrict_kw = "__restrict__";
  std::string fn_qualifier = "static inline";   // helpers
  std::string kernel_qualifier = "extern \"C\"";  // entry points
  std::map<Op, std::string> float_fn;  // Exp -> "expf", ...: called with float args
  std::string prelude;                 // helper definitions, emitted once per source
  // Largest extent of any dim the target's runtime accepts: index values lie in [0, this).
  // Integer element code whose range then provably fits 32 bits computes in `int` (CUDA's
  // 64-bit integer ops and conversions cost several instructions each).
  int64_t max_extent = INT64_MAX;
};

// The table of a target (cpu; cuda-sm80/cuda-sm90 share the CUDA entries).
const TargetTable& target_table(Target t);

}  // namespace flashgen
