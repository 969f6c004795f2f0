// Emits the interval arithmetic that classifies a tile against a mask (DESIGN idea 5): for
// every node under the mask, C code computing its lower and upper bound over the tile's index
// ranges (`l<ID>`, `h<ID>`, doubles; bools as 0/1). The rules for operations live here once;
// each target only says how its leaves (indices, sizes, constants, data) are bounded and how it
// spells max/min. Used by codegen/cpu.cpp and codegen/cuda/emit_sm80.cpp; shown by
// tests/cpu (masked examples skip and unmask tiles) and tests/cuda (the classifier compiles).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "flashgen/ir.h"

namespace flashgen {

struct IntervalTarget {
  std::string max_fn, min_fn;          // "std::max" / "fmax"
  std::string unknown_lo, unknown_hi;  // bounds of an unknown number
  std::string indent;
  // Bounds of a leaf (Const, Size, Index, or a value the target cannot see through); nullopt
  // for an operation, which the shared rules handle (or bound as unknown).
  std::function<std::optional<std::pair<std::string, std::string>>(int node)> leaf;
};

std::string interval_lo(int node);  // "l<ID>"
std::string interval_hi(int node);  // "h<ID>"
// The declarations of l<ID>/h<ID> for `mask` and everything it depends on, in topological order.
std::string emit_interval_bounds(const Program& p, int mask, const IntervalTarget& t);

}  // namespace flashgen
