// The lowered kernel description: each plan kernel, lowered for a GPU target and a device
// budget, as plain data that says what the printers print and why.
//
// A kernel takes one of two paths:
//   tensor_core  the sm80 FlashAttention template takes it (lower/tensor_core.h, printed by
//                codegen/cuda/emit_sm80.cpp): a
//                streamed key loop fed by bf16/f16 tensor-core contractions, online softmax
//                groups, P.V accumulators. Its launch (Sm80Launch) records the structure the
//                template recognized (Sm80Structure: scores, groups, P.V accumulators) and its
//                tuning: warps, rows per warp, keys per tile, staged tiles, the value split.
//   element      every other kernel the compiler accepts: element code for every value, one
//                thread block per grid point (grid-stride over the points), each value's
//                elements spread over the block's threads, accumulators updated per element
//                in the plan's order (the CPU backend's order, so f32 sums round alike), the
//                local arrays in a per-block workspace (shared memory when it fits the
//                block's budget, else device memory), tile classes evaluated per key tile.
// `why` says why the path was taken (for the element path: what the template did not take).
//
// Text form: LoweredCuda::str (`flashgen print --dump-after lower`). Tests on the fields:
// tests/lower/lower_test.cpp.
#pragma once

#include <string>
#include <vector>

#include "lower/launch.h"
#include "lower/tensor_core.h"
#include "plan/plan.h"

namespace flashgen {

// One local array of an element kernel: a value's elements at one grid point (or the previous
// running max of an online Max accumulator, `old_max`), extents row_tile / red_tile / the
// dim's extent along `dims` (the plan value's local dims).
struct ElementArray {
  int node = -1;
  bool old_max = false;
  std::string ctype;       // float, int64_t or bool
  int elem_bytes = 4;
  std::vector<int> dims;
  // Storage order (a permutation of dims): dims, except that a tile-loaded parameter (k)
  // contracted over eliminated dims into a value whose innermost dim is the reduction dim keeps
  // the reduction dim innermost (k as [d][n]): that contraction then runs unit-stride over n,
  // a vector loop on the CPU and a warp's 32 keys in 32 shared-memory banks on CUDA (stored
  // [n][d], d floats apart, they would share one bank).
  std::vector<int> layout;
  bool operator==(const ElementArray&) const = default;
};

struct ElementLaunch {
  int threads = 256;                  // per block
  int blocks_per_sm = 4;              // the grid covers at most sm_count * this many blocks
  std::vector<ElementArray> arrays;   // workspace order; each starts 16-byte aligned (a block
                                      // per point: then 8 bytes a thread, where the block's
                                      // threads combine a reduction's partials)
  int smem_limit = 0;                 // bytes: a workspace up to this stays in shared memory
  // Each thread computes a grid point of its own, no barriers: where every array holds one
  // element per point (a block per point would leave all threads but one idle), or where the
  // kernel has no key loop or row tile and its stored buffers have a grid dim innermost
  // (adjacent threads, adjacent addresses). Arrays of one element are registers; an array over
  // local dims is in the workspace, threads * its elements a block, element i of thread t at
  // i * threads + t.
  bool thread_per_point = false;
  // Lanes of a point (thread_per_point kernels that reduce a value of one element over the
  // point's whole dims, such as a mean over the rows of a materialized result): these dims'
  // extents at the call give each point `lanes` threads (lanes_for), the block threads / lanes
  // points, a point's slot the fast thread index (adjacent points, adjacent addresses). The
  // lanes take a point's elements in turn and combine a reduction's partials in a tree in the
  // block's reduction slots; every array is in the workspace, point-major within an element.
  // Empty: one thread a point.
  std::vector<int> lane_dims;
  // Values computed where they are stored, with no array (element_stored_direct): an output
  // that is not a reduction, written once and read by no other value of the kernel.
  std::vector<int> stored_direct;
};

// The values of element kernel `k` that its stores compute (ElementLaunch::stored_direct).
std::vector<int> element_stored_direct(const Plan& plan, const PlanKernel& k);

// The lanes of each point of a lanes kernel (ElementLaunch::lane_dims) at the call's extents
// (by dim id): a power of two, at most 32, leaving each lane at least kLaneTerms of the
// product of the lane dims' extents and the block at least 8 points; 1 for other kernels.
inline constexpr int64_t kLaneTerms = 16;
int lanes_for(const ElementLaunch& e, const std::vector<int64_t>& extv);

struct LoweredKernel {
  int plan_kernel = -1;
  std::string entry;                  // extern "C" name
  enum class Path : uint8_t { tensor_core, element } path = Path::element;
  std::string why;
  TensorCoreKernel tensor_core;       // tensor_core: the template's kernel (launch: .launch)
  ElementLaunch element;              // element
};
const char* path_name(LoweredKernel::Path p);

struct LoweredCuda {
  Target target = Target::cuda_sm80;
  std::vector<LoweredKernel> kernels;  // one per plan kernel, in plan order
  // Where the plan runs a kernel per softmax cluster (lower/split_clusters.cpp; compile_program
  // planned it; all zero otherwise): the product_cost of the one kernel and of the kernels per
  // cluster, and their few_key_reads; the row dim of the kernel split.
  struct ClusterSplit {
    double fused_cost = 0, split_cost = 0;
    int64_t fused_few_reads = 0, split_few_reads = 0;
    int fused_element_kernels = 0, split_element_kernels = 0;  // kernels on the element path
    int row_dim = -1;
  } cluster_split;
  // How each plan buffer is held in device memory (plan.buffers order; device_storage).
  std::vector<DType> storage;
  std::string str(const Plan& plan) const;
};

// How many of `lowered`'s kernels take `path`.
int kernels_on_path(const LoweredCuda& lowered, LoweredKernel::Path path);

// The device dtype of each plan buffer: inputs and outputs their declared dtype; an
// intermediate as intermediate_storage says (tensor_core.h): f32 where a tensor-core kernel
// writes or reads it and its dtype is a float of at most 4 bytes, else 8 bytes like the element
// kernels compute: i64 for integers, f64 for the rest.
std::vector<DType> device_storage(const Plan& plan, const std::vector<LoweredKernel>& kernels);

// The local arrays of plan kernel `k` (values that are neither inlined nor loaded, then the
// old running maxima of rescaled sums), as both loop skeletons name them (A<node>, O<node>).
std::vector<ElementArray> element_arrays(const Plan& plan, const PlanKernel& k);

// Lowers every kernel of `plan` for a CUDA target. `heads` gives the extents of the head dims
// (cuda_head_dims) the tensor-core template specializes on; a kernel whose head extent is
// missing, or that the template does not take, takes the element path.
LoweredCuda lower_cuda(const Plan& plan, Target target, const Extents& heads,
                       const SmemBudget& budget);

// Lowering's plan-level decision for clusters (lower/split_clusters.cpp): the epilogue values
// that move the independent clusters of a kernel's accumulators (softmax or plain groups), all
// but its last, into kernels of their own: one set per moved cluster, the roots of its kernel
// (make_plan's `materialize`; empty: no kernel of two clusters). compile_program keeps the
// split where cluster_split_pays.
std::vector<Materialize> cluster_cuts(const Plan& plan, const LoweredCuda& lowered);
// Lowering's decision for reductions over a head dim other than the score contraction
// (lower/cut_head_reductions.cpp): the values per row or per key of element-path kernels (a
// query's or a key's norm) that kernels of their own compute, one set per kernel and dim set
// (make_plan's `materialize`; empty: none; a value two kernels read is named once).
// compile_program keeps the plan with them where head_cuts_pay: more kernels take the
// tensor-core path than without them (each plan after its own kernels per cluster).
std::vector<Materialize> head_reduction_cuts(const Plan& plan, const LoweredCuda& lowered);
bool head_cuts_pay(const LoweredCuda& fused, const LoweredCuda& cut);
// Multiply-adds per (row, key) pair of the tensor-core kernels (each value chunk computes the
// scores again), the products by mma.sync on cuda-sm90 counted at the rate they run at against
// wgmma's (about 360 against 790 TFLOP/s on an H200 in bf16).
double product_cost(const LoweredCuda& lowered);
inline constexpr double kMmaSyncRateOnSm90 = 360.0 / 790.0;
// The clusters split where the split kernels' product_cost is at most this fraction of the one
// kernel's: the margin pays for writing and reading the values cut (4 bytes, per row and
// value column: device_storage) and the value tiles every cluster's kernel loads again.
inline constexpr double kClusterSplitPays = 2.0 / 3.0;
// Whether the lowering of the plan with kernels per cluster (`split`) replaces the one-kernel
// lowering (`fused`): fewer kernels on the element path, or as many and product costs within
// that bound.
bool cluster_split_pays(const LoweredCuda& fused, const LoweredCuda& split);
// The comparison the split plan keeps (LoweredCuda::cluster_split), the row dim that of the
// last kernel on the tensor-core path (the last cluster's, which reads the cuts).
LoweredCuda::ClusterSplit cluster_split_of(const Plan& split_plan, const LoweredCuda& fused,
                                           const LoweredCuda& split);
// Elements of K and V the tensor-core kernels' few-rows (decode) builds read per key and
// parallel index: each value chunk reads the K tiles again.
int64_t few_key_reads(const LoweredCuda& lowered);
// Whether a call of `rows` query rows runs the program's one-kernel lowering (CompileOptions::
// cluster_split false) instead of the kernels per cluster: a decode call (the few-rows kernels,
// at most KeySplit::kFewRows rows) where the one kernel reads fewer K and V elements a key
// (diff_attn d128/e256: 768 against 1024, the kernels per cluster reading v twice) and takes
// the element path no more often.
bool decode_runs_one_kernel(const LoweredCuda::ClusterSplit& split, int64_t rows);
// The split's comparison in words, for the lower dump and explain ("" when not split).
std::string cluster_split_text(const LoweredCuda::ClusterSplit& split, const Plan& plan,
                               Target target);

// Bytes of an element kernel's workspace per block at the call's extents (by dim id), with
// each array's byte offset in `offsets` (16-byte aligned); -1 past 2^62.
int64_t element_workspace(const PlanKernel& k, const ElementLaunch& e,
                          const std::vector<int64_t>& extv, std::vector<int64_t>* offsets);

}  // namespace flashgen
