// The tensor-core path's lowered kernel: what the sm80 FlashAttention template needs to print a
// plan kernel, decided once by lower_tensor_core (lower/lower_tensor_core.cpp) and printed by
// print_tensor_core (codegen/cuda/emit_sm80.cpp) without further decisions:
// - the structure recognized in the kernel: score contractions (q.k over the head dim, with
//   their operand buffers), softmax groups (an online max of a score expression and the row
//   sums it rescales), P.V accumulators (a group's exp(x - max) times a value tile);
// - the head extents compiled in, rows per warp (mw), the value-column split, whether the
//   rescale may be skipped, the gathers the host checks instead of the device;
// - the tiles staged through shared memory with K/V (fitted to the device's budget), the
//   values computed once per block (hoisted), the mask data bounded per tile (data ranges);
// - the launch (Sm80Launch), with the structure as data (Sm80Structure).
// A kernel the template cannot take is a BackendError that says why.
// Tests: tests/lower/lower_test.cpp (fields), tests/cuda/nvrtc_examples_test.cpp (printed and
// compiled), tests/gpu/cuda_examples_test.cpp (on the GPU).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lower/launch.h"
#include "codegen/interval_code.h"
#include "plan/plan.h"

namespace flashgen {

struct TensorCoreKernel {
  int kernel = -1;  // plan kernel index
  Target target = Target::cuda_sm80;
  // a score contraction: its node, Q and K buffers, the head dim it contracts and that dim's
  // extent (scores may contract dims of their own: MLA's 128 and 64 rotary columns)
  struct Score { int node, qbuf, kbuf, dim = -1; int64_t D = 0; };
  using ScoreStep = Sm80Structure::ScoreStep;
  using Group = Sm80Structure::Group;
  struct Acc { int node, group, vidx; };  // vidx: index into vbufs
  // A read of the score code staged through shared memory with the K/V tiles (fg::load_staged):
  // arg_dims is the index dim per position; param -1: an intermediate (`buffer`, read in its
  // memory order, held as LoweredCuda::storage says).
  struct Staged { int param, buffer, elem_bytes; bool rows; std::vector<int> arg_dims; int node; };
  std::vector<Score> scores;
  std::vector<Group> groups;
  std::vector<int> vbufs;  // distinct V buffers
  std::vector<Acc> pv;     // P.V accumulators
  DType elem = DType::bf16;          // every Q, K and V operand's type (bf16 or f16)
  int cdim = -1, vdim = -1;          // the score contraction dim and the value dim
  int64_t D = 0, DV = 0;             // their extents
  int64_t Dt = 0, DVt = 0;           // tile widths: D, DV rounded up to a multiple of 32 (the
                                     // padding reads as 0; value columns past DV are not stored)
  int64_t DVc = 0;                   // value columns per block (DVt / vsplit)
  int mw = 1, vsplit = 1;            // 16-row m-blocks per warp; value-column chunks
  bool skip = false;                 // kSkipRescale
  std::set<int> unchecked;           // parameters every gather reads by plain dim indices
  std::set<std::pair<int, int>> proved;  // (parameter, position): indices proved in range
  std::vector<Staged> candidates, staged;
  // The staged tile that holds the score code's read of `param` (-1: of the intermediate
  // `buffer`) at index dims `dims`, or -1 (the printer's staged reads and lowering's key clamp).
  int staged_tile(int param, int buffer, const std::vector<int>& dims) const {
    for (size_t t = 0; t < staged.size(); ++t)
      if (staged[t].param == param && staged[t].arg_dims == dims &&
          (param >= 0 || staged[t].buffer == buffer))
        return static_cast<int>(t);
    return -1;
  }
  // Whether gather `node` reads by plain dim indices only (pair[b, h, m, n], doc[n]): the host
  // checks its extents, and only such a gather can be staged.
  static bool by_dim_indices(const Program& p, int node) {
    for (int a : p.nodes[node].args)
      if (p.nodes[a].op != Op::Index) return false;
    return true;
  }
  std::set<int> hoisted;             // nodes make_ctx computes once per block
  // Score code of one value per diagonal of a tile (functions of n - m and per-block values):
  // computed per tile into shared memory (Spec::diagonals); deltas: the n - m (+1) and m - n
  // (-1) nodes inside them, which the diagonal function reads as its argument.
  std::vector<int> diagonal;
  std::map<int, int> deltas;
  // Score code of one value per key (functions of the key index and per-block values) dearer
  // than a shared-memory read (a special function, a gather): computed once per key of a tile
  // beside the diagonal values (Spec::key_values), instead of once per score element.
  std::vector<int> key_values;
  std::vector<DataRange> data_ranges;  // mask data the classifier bounds per tile
  std::set<int> ranged, row_ranged;    // their nodes; those over the row dim (once per block)
  Sm80Launch launch;
};

// The element a plan intermediate of type `t` is held in on the device: integers in i64, and
// floats of at most 4 bytes in f32 where a tensor-core kernel writes or reads it (its epilogue
// and its score code compute in f32: nothing is rounded that it would not round, and readers
// move half the bytes), else in f64 like the element kernels compute. (device_storage, lower.h)
DType intermediate_storage(DType t, bool tensor_core);

// Lowers kernel `kernel` of `plan` for the tensor-core template (BackendError when it does not
// fit). `sizes` must give the extent of every eliminated (head) dim.
TensorCoreKernel lower_tensor_core(const Plan& plan, int kernel, Target target,
                                   const Extents& sizes, const SmemBudget& budget);
// Flash-decoding, per call: whether a call of `rows` query rows, `par` parallel indices (the
// product of the parallel dims' extents; the chosen kernel's value split multiplies them into
// the grid's y extent before the key split) and `keys` keys runs the few-rows variant (at most 16 rows:
// Sm80Launch::few_entry), and across how many blocks each row tile's key loop is split (then
// the combine kernel merges their partial states): for the few-rows kernel the split that
// takes the fewest waves of its resident blocks (Sm80Launch::few_blocks_per_sm on each of
// `sm_count` SMs) times the tiles of a chunk; for the full kernel, a grid that would leave at
// least half of the SMs' blocks (the launch's blocks per SM, at least 2) idle is split to fill
// them; at least 4 key tiles a chunk either way.
// And whether the blocks walk the work items (a persistent kernel, Sm80Launch::persistent, not
// the few-rows one): when an item's key loop is short, at most kWalkTiles tiles, so that the
// block's start and its epilogue are a large part of its time (the A/B by key-loop length:
// bench/NOTES.md, session 14); a persistent kernel with a tile mask at every length (its
// items' work differs: the blocks take them from a counter, bench/NOTES.md session 36).
struct KeySplit {
  static constexpr int64_t kFewRows = 16;  // calls of at most this many rows: few-rows kernel
  bool few = false;
  int split = 1;
  bool walk = false;
  static constexpr int kWalkTiles = 4;
};
KeySplit choose_key_split(const Sm80Launch& la, int64_t rows, int64_t par, int64_t keys,
                          int sm_count);

// What the lowering and the printer both read of a plan kernel.
class TensorCoreView {
 protected:
  TensorCoreView(const Plan& plan, int kernel)
      : plan_(plan), p_(plan.program), k_(plan.kernels[kernel]) {}
  const Plan& plan_;
  const Program& p_;
  const PlanKernel& k_;

  [[noreturn]] void fail(const std::string& why) const;
  std::string nt(int id) const;  // "%7 (node text)"
  const Node& N(int id) const { return p_.nodes[id]; }
  bool is_par(int d) const;      // a grid dim other than the row dim
  int buffer_of_param(int param) const;
  bool is_acc(int node) const;
  void ancestors(int id, std::set<int>& out) const;
  std::vector<int> arg_dims(int gather) const;  // the dim of each index of a gather
};

}  // namespace flashgen
