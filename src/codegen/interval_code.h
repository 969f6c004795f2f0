// Emits the interval arithmetic that classifies a tile against a mask: for
// every node under the mask, C code computing its lower and upper bound over the tile's index
// ranges (`l<ID>`, `h<ID>`, doubles; bools as 0/1). The rules for operations live here once;
// each target only says how its leaves (indices, sizes, constants, data) are bounded.
// Soundness: a bound pair [l, h] promises every element's value lies in it and is not NaN; NaN
// bounds mean "unknown, maybe NaN" and decide nothing (every comparison with them is false,
// maximum/minimum propagate them). Integer nodes whose bounds leave their type's range (the
// reference wraps i32) or ±2^53 (where doubles stop being exact) become unknown; float sums and
// products are widened by one rounding error of their type unless the type holds the bound
// exactly, quotients (but by a constant power of two) by the GPU's approximate division, bounds
// past the type's largest value are unknown and subnormal ones reach 0 (flushed by fast math);
// casts to f32 round their bounds like the values, casts to narrower floats are unknown.
// Not modelled: an integer promoted to f32 without a cast node past 2^24 (the element code
// rounds it, the bounds do not). Rules:
// + - * /, neg, floor, ceil, abs, relu, maximum, minimum, clamp, % of integers, casts (float to
// integer truncates), comparisons, and/or/not, where, and the monotone functions exp, exp2,
// log, log2, sqrt, rsqrt, tanh, sigmoid (widened by 2^-10 relative for fast math's
// approximations); sin, cos, pow and casts to narrower floats are unknown.
// Used by codegen/cpu.cpp and codegen/cuda/emit_sm80.cpp; shown by tests/cpu/
// cpu_examples_test.cpp (masked examples; DataMasksMatchTheReference;
// TileClassesHoldOnHardData: i64 ids above 2^53, i32 wrap, rounding casts, NaN, inf - inf) and
// tests/tools/profile_test.cpp (IndexMasksThroughArithmeticSkipTheDeadTiles: tile counts).
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "flashgen/ir.h"
#include "plan/plan.h"

namespace flashgen {

struct IntervalTarget {
  std::string indent;
  // Bounds of a leaf (Const, Size, Index, or data the target bounds itself); nullopt for an
  // operation, which the shared rules handle (or bound as unknown). Leaf bounds must be exact
  // values of the node's type (a NaN pair for unknown).
  std::function<std::optional<std::pair<std::string, std::string>>(int node)> leaf;
};

// The mask's data reads (gathers, parameters read by name) a target bounds by the data a tile
// reads are the plan's
// (TileClasses::data_ranges, plan/tile_classes.cpp): the target renders the pass over
// [start, end) of `over` and returns the node's bounds from its leaf.
// The declarations of r<ID>lo / r<ID>hi for a DataRange with over = -1, from the C expression
// `value` of its one value: that value, or NaN (unknown) for a NaN or an integer past 2^53.
std::string data_value_bounds(const Program& p, int node, const std::string& value,
                              const std::string& indent, const std::string& note);

// Whether the rules can ever decide a tile of `mask` (empty or full), given the gathers the
// target bounds by their data (`ranged`: TileClasses::data_ranges): the nodes that keep it
// undecided (operations without a rule, data read elsewhere: keep[m, n], or a non-f32 float
// constant) if none of its parts decides; empty if the mask can be decided. An `and` is decided
// (false) by either side, an `or` (true) by either side, a `where` by its condition and a branch.
std::vector<int> interval_undecided(const Program& p, int mask, const std::set<int>& ranged);

// The plan's data ranges (TileClasses::data_ranges) worth a pass over the data: those the rules
// reach from the mask (not under an operation without a rule, as sin of the data), and none
// where the mask stays undecided with them (every tile computed anyway). The targets bound these
// and no others (the lowering's Sm80Launch data ranges, the loop printer's).
std::vector<DataRange> deciding_data_ranges(const Program& p, const TileClasses& tiles);

std::string interval_lo(int node);  // "l<ID>"
std::string interval_hi(int node);  // "h<ID>"
// The declarations of l<ID>/h<ID> for `mask` and everything it depends on, in topological order.
// The code uses NAN (<cmath> or the CUDA prelude).
std::string emit_interval_bounds(const Program& p, int mask, const IntervalTarget& t);

}  // namespace flashgen
