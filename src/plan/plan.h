// The plan IR: a program's kernels as loop nests over tiles.
//
// A Plan holds the program it was built from (the canonical, online-rewritten program: every
// node id below refers to it), the buffers that live in memory (inputs, outputs, materialized
// intermediates) and an ordered list of kernels. Each kernel is, for every point of its
// logical grid:
//
//   for each grid point g (parallel; the row dim is tiled by row_tile):
//     prologue:  values over grid + eliminated dims (no reduction dim): loads, q-normalization
//     for each tile of the reduction dim (red_tile wide; skipped/unmasked per tile class):
//       body:    values with the reduction dim: contractions, score element code, masks,
//                gathers (each element knows its (row, r) indices)
//       update:  accumulators (running max/min/sum; online sums rescaled by exp(Mold - Mnew))
//     epilogue:  values after the loop (divisions, log, gates) and the stores
//
// A kernel has at most one reduction dim (red_dim) that is streamed; eliminated dims (elim)
// are held whole in a tile (head dims d, e). A value's `local_dims` are its dims minus the
// grid dims other than the row dim, in the order (row, red, elim...); its local array has
// extent row_tile / red_tile / full extent along them. `inlined` values have no array: the
// emitter expands them into the single consumer that reads them (a contraction's product).
//
// Tile classification (block sparsity): `mask` names the condition
// that kills every accumulator's contribution where it is false; the emitter evaluates it by
// interval arithmetic over a tile's index ranges (plan/tile_classes.cpp) and skips empty tiles
// and mask evaluation on full ones.
#pragma once

#include <string>
#include <vector>

#include "flashgen/compile.h"
#include "flashgen/ir.h"

namespace flashgen {

enum class Phase : uint8_t { Prologue, Body, Epilogue };
const char* phase_name(Phase p);

struct PlanBuffer {
  enum Kind : uint8_t { Input, Output, Intermediate };
  Kind kind = Input;
  std::string name;        // parameter, output, or "tmp<N>" name
  int param = -1;          // Input: the parameter index
  int node = -1;           // Output / Intermediate: the node stored
  DType type = DType::f32;
  std::vector<int> dims;   // memory order (contiguous for outputs and intermediates)
  std::string reason;      // Intermediate: why it is materialized; Output: why the kernel
                           // that materializes its node stores it, if one does
};

// Nodes a kernel of their own computes and stores (make_plan's `materialize`: lowering's
// kernels per softmax cluster), and why. with_outputs: computed and stored by the kernel of the
// outputs they share a grid with instead (passes/partial_reductions.cpp's partials).
// whys: one reason per node where they differ (a materialized value and the partial stored
// beside it), else `why` for all.
struct Materialize {
  std::vector<int> nodes;
  std::string why;
  bool with_outputs = false;
  std::vector<std::string> whys = {};
};

struct PlanValue {
  int node = -1;
  Phase phase = Phase::Prologue;
  std::vector<int> local_dims;  // (row, red, elim...) subset, see above
  bool inlined = false;          // expanded into its consumer, no local array
  int load_buffer = -1;          // >= 0: read from this (intermediate) buffer, not computed
  bool contraction = false;      // sum over elim dims of a product of two loads that line up
  bool online = false;           // Body: uses a running max, so computed after the max update
};

struct Accumulator {
  int node = -1;                 // a Sum/Max/Min whose reduce set contains red_dim
  Op op = Op::Sum;
  // Online sums: the Max accumulators (node ids) whose factor exp(x - safe(M)) the summand
  // carries, one entry per factor (a max twice when two factors carry it); on a new running
  // max the sum is rescaled by exp(safe(Mold) - safe(Mnew)) for each entry.
  std::vector<int> rescale_by;
  // The factors exp(x - safe(M)) of the summand that carry those maxima (exp_factors[i] carries
  // rescale_by[i]): the one-pass form as fuse recognized it, so later stages read it instead of
  // matching it again.
  std::vector<int> exp_factors;
};

// A data read in a tile mask (a gather by plain dim indices, or a parameter read by name at its
// own dims) that the tile classifiers bound by the data a tile reads (doc[m],
// doc[n], len[b]): every index is a plain dim index, at most one of them over the row or the key
// dim (`over`), the others over grid dims. With `over` = -1 (indices over grid dims only:
// len[b], offset[b, h]) the gather is one value over the tile, and its bounds are that value
// (NaN, or an integer past 2^53, where doubles stop being exact, leaves it unknown). (A gather
// over both the row and the key dim would need a 2-D pass per tile: left unknown.)
struct DataRange {
  int node, over;
  bool operator==(const DataRange&) const = default;
};

struct TileClasses {
  int mask = -1;        // a bool node over (row, red, ...) or -1: every tile is "partial"
  std::vector<DataRange> data_ranges;  // the mask's data reads bounded by the data they read
  bool skip_empty = false;      // tiles where `mask` is false everywhere contribute nothing
  bool unmasked_full = false;   // tiles where `mask` is true everywhere skip its evaluation
  std::string note;             // why (or why not)
};

struct PlanKernel {
  std::string name;
  std::vector<int> grid;         // logical grid dims, outermost first (includes row_dim)
  int row_dim = -1, row_tile = 1;
  int red_dim = -1, red_tile = 1;
  std::vector<int> elim;         // eliminated dims
  std::vector<PlanValue> values; // every node computed or loaded here, topological order
  std::vector<Accumulator> accs; // in update order (max/min before the sums they rescale)
  std::vector<int> reads;        // buffer ids read
  std::vector<int> writes;       // buffer ids written
  TileClasses tiles;
  std::vector<std::string> notes;  // fusion decisions worth reporting

  const PlanValue* value(int node) const;
};

struct Plan {
  Program program;                 // canonical + online-rewritten
  std::vector<PlanBuffer> buffers;
  std::vector<PlanKernel> kernels;
  std::vector<std::string> notes;  // program-level notes (e.g. why a split happened)

  int kernel_count() const { return static_cast<int>(kernels.size()); }
  std::vector<std::string> reads(int kernel) const;   // buffer names
  std::vector<std::string> writes(int kernel) const;
  std::vector<int> materialized() const;              // Intermediate buffer ids
  std::string str() const;                            // text form (--dump-after)
};

// Builds the plan of a canonical, online-rewritten program (passes/fuse.cpp decides the
// kernels; plan/build_plan.cpp lays out each). Tile classes are left empty. `materialize`:
// node sets to materialize besides those fusion needs, each set one kernel's roots (lowering's
// kernels per softmax cluster).
Plan make_plan(const Program& canonical, const CompileOptions& opt,
               const std::vector<Materialize>& materialize = {});
// Fills every kernel's TileClasses (plan/tile_classes.cpp).
void classify_tiles(Plan& plan);
// The one-line text of a node ("sum %4 over [d] : f32[b, h, m, n]").
std::string node_text(const Program& p, int id);

}  // namespace flashgen
