// Index ranges: whether an integer index expression stays inside [0, extent(D)) wherever it is
// evaluated, from its structure alone (extents are run-time values), and which relations
// between extents the proof needs. A gather whose index is proved needs no check per element:
// the host checks the relations once per call from the extents.
//
// Bounds are symbolic: a value is at least a constant and at most the largest of a few terms,
// each extent(X) + c or a constant. Rules per op: leaves (constants, dim indices in
// [0, extent - 1], sizes), + and - with a bounded side, min/max/clamp/where by their operands
// (clamp(x, lo, hi) is lo, hi or x between them, whatever x is), floor modulo (x % b lies in
// [0, b - 1] for b >= 1), widening casts. Integer wrap-around is excluded: arithmetic is bounded
// only over operands bounded on both sides (below 2^62 in magnitude), i32 arithmetic only with
// constant bounds inside i32.
// Example: clamp(n - m + 64, 0, size(r) - 1) is in [0, extent(r)) when extent(r) >= 1 (for
// extent(r) = 0 the clamp gives 0); its proof is the one condition 1 <= extent(r).
// Used by lower_tensor_core (src/lower/lower_tensor_core.cpp); tests: tests/ir/index_range_test.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flashgen/ir.h"

namespace flashgen {

// extent(dim) + plus <= extent(target)   (dim -1: plus <= extent(target))
struct ExtentCondition {
  int dim = -1;
  int64_t plus = 0;
  int target = -1;
  bool holds(const std::vector<int64_t>& extents) const;
  std::string str(const Program& p) const;  // e.g. "1 <= extent(r)", "extent(m) + 1 <= extent(t)"
  bool operator==(const ExtentCondition&) const = default;
};

// The conditions under which node `node` (an integer expression of `p`) lies in
// [0, extent(dim)) at every point where it is evaluated (empty: always), or nullopt when the
// rules above do not prove it.
std::optional<std::vector<ExtentCondition>> prove_index_in_range(const Program& p, int node,
                                                                int dim);

}  // namespace flashgen
