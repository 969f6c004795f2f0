// The CUDA backend's host side in steps (src/compiler/run_cuda.cpp): load a program's kernel,
// bind a call's buffers, launch, check the kernel's error word, download the outputs. run_cuda,
// bench_cuda and profile (src/compiler/profile.cpp) are each a few of these steps.
// Tests: tests/gpu/cuda_examples_test.cpp, tests/gpu/profile_gpu_test.cpp.
#pragma once

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lower/launch.h"
#include "lower/lower.h"
#include "flashgen/profile.h"
#include "plan/plan.h"
#include "runtime/cuda_driver.h"
#include "runtime/nvrtc.h"

namespace flashgen {

// The builds of a kernel (one source, a macro each): plain (what runs), count_tiles (the kernel
// counts its key tiles: profile), careful (the strong zero of masked keys for V holding inf or
// NaN: run again after the plain build flagged a non-finite accumulator).
enum class CudaBuild { plain, count_tiles, careful };

// A kernel compiled from `source` with `options` at its first use (once; thread-safe), and
// optionally a second entry of the same module (the few-rows kernel's combine).
class LazyCudaKernel {
 public:
  LazyCudaKernel(std::string source, NvrtcOptions options, std::string entry,
                 std::string second_entry = "")
      : source_(std::move(source)), options_(std::move(options)), entry_(std::move(entry)),
        second_entry_(std::move(second_entry)) {}
  const CudaKernel& get() const;
  const CudaKernel& second() const;  // (compiles as get() does)
  bool compiled() const;  // whether get() has run
  const std::string& entry() const { return entry_; }
  // NVRTC's time for this build's cubin once get() has run (0 from the disk cache or before)
  double nvrtc_ms() const { return nvrtc_ms_; }
  // Starts compiling on a thread of its own (get() then loads that cubin): a call that will run
  // this build compiles it beside the main builds.
  void prefetch() const;

 private:
  std::string source_;
  NvrtcOptions options_;
  std::string entry_, second_entry_;
  mutable std::once_flag once_;
  mutable CudaKernel kernel_, second_;
  mutable std::atomic<bool> done_{false};
  mutable double nvrtc_ms_ = 0;
  mutable std::mutex mu_;
  // last: destroyed first, waiting for a compile that reads source_ and options_
  mutable std::shared_future<Cubin> pending_;
};

// A lowered kernel compiled and loaded for the running GPU.
struct CudaLoadedKernel {
  LoweredKernel low;
  CudaKernel kernel;
  CudaKernel combine;  // tensor_core: the split-key combine (the same module as `kernel`)
  // tensor_core: the few-rows variant and its combine (second()), its own module, compiled at
  // the first call that runs it
  std::shared_ptr<const LazyCudaKernel> few_rows;
  // tensor_core with TMA operands: the full kernel copying K/V by cp.async (FG_KV_CP_ASYNC),
  // for calls whose tensors no map describes, compiled at the first such call
  std::shared_ptr<const LazyCudaKernel> cp_async;
  // tensor_core with a walking build of its own (Sm80Launch::walk_entry): for calls whose
  // blocks walk the work items (FG_ONLY_WALK; and by cp.async, for calls with no tensor maps),
  // compiled at the first such call; null where the main build walks
  std::shared_ptr<const LazyCudaKernel> walking, walking_cp_async;
  // tensor_core with operands in pieces (Sm80Launch::pieces): fg::split_pieces (same module)
  CudaKernel split;
  double nvrtc_ms = 0;  // NVRTC's time for the main build's cubin (0 from the disk cache)
  const CudaKernel& few() const { return few_rows->get(); }
};
struct CudaBoundKernel;
// The kernel a bound call launches: the few-rows kernel, the full kernel or its walking build,
// either built to copy K/V by cp.async when the call has no tensor maps.
const CudaKernel& launched_kernel(const CudaLoadedKernel& k, const CudaBoundKernel& bk);
// The build compiled at its first call that launched_kernel comes from; null: the main build.
const LazyCudaKernel* launched_build(const CudaLoadedKernel& k, const CudaBoundKernel& bk);
// The combine kernel of its split key loops (the few-rows kernel's own, or the full kernel's).
const CudaKernel& launched_combine(const CudaLoadedKernel& k, const CudaBoundKernel& bk);
// Its entry point's name (the few-rows, walking or main entry).
const std::string& launched_entry(const CudaLoadedKernel& k, const CudaBoundKernel& bk);

// The kernels of a program for the running GPU and the head dims of a call, in plan order.
struct CudaLoaded {
  Plan plan;
  std::vector<CudaLoadedKernel> kernels;
  std::string arch;           // "sm_90a"
  double compile_ms = 0;      // the pipeline + NVRTC (or its disk cache) + module loads
  bool from_disk_cache = false;  // every kernel came from the disk cache
  CudaBuild build = CudaBuild::plain;
  bool checks_gathers = false;  // every gather checked per element (FG_CHECK_GATHERS)
  // The lowering's kernels per softmax cluster (zero: not split), and whether this is the
  // program's one-kernel build (CompileOptions::cluster_split false), which decode calls run
  // where it reads less (decode_runs_one_kernel).
  LoweredCuda::ClusterSplit cluster_split;
  std::vector<DType> storage;  // LoweredCuda::storage: how each buffer is held on the device
  bool one_kernel = false;
  // that one-kernel build, loaded at the first decode call (cuda_load_for_call)
  struct Sibling {
    std::once_flag once;
    std::shared_ptr<const CudaLoaded> L;
  };
  std::shared_ptr<Sibling> one_kernel_build;
};

// The kernels of program `p` at the head extents in `ext`, compiled once per process and build;
// *from_process_cache says whether this call found them loaded. Where `ext` fails a range
// condition of a kernel (Sm80Launch::range_conditions), the build that checks every gather.
std::shared_ptr<const CudaLoaded> cuda_load(const Program& p, const Extents& ext,
                                            CudaBuild build = CudaBuild::plain,
                                            bool* from_process_cache = nullptr);

// The kernels for a call at extents `ext`: L; or the program's one-kernel build, for a decode
// call where L runs a kernel per softmax cluster and one kernel reads less
// (decode_runs_one_kernel; loaded once per L); and of those, the build with every gather
// checked when the call fails one of the range conditions of its kernels. cuda_load does the
// same. L is a build cuda_load (or cuda_load_build) gave, not one this returned: a one-kernel
// build has no cluster split to choose from, so it would run prefill calls too.
std::shared_ptr<const CudaLoaded> cuda_load_for_call(std::shared_ptr<const CudaLoaded> L,
                                                     const Program& p, const Extents& ext,
                                                     bool* from_process_cache = nullptr);

// The NVRTC options that make a tensor-core kernel's source the few-rows (decode) build the
// runtime compiles at the first call of at most 16 rows: its entries only (FG_ONLY_FEW), at
// ptxas -O1. That kernel is bound by K/V's bytes; at -O1 its SASS keeps -O3's tensor-core, copy
// and exponential instructions without -O3's spills, and NVRTC takes markedly less time: the
// first decode call's compile (bench/NOTES.md, session 31).
std::vector<std::string> few_rows_build_options();

// compile_cuda_cubin for a given build (CI compiles every build of every example).
std::vector<std::string> cuda_compile_build(const Program& p, Target target,
                                            const Extents& sizes, const std::string& arch,
                                            CudaBuild build);

// One kernel's launch in a call: its parameter words and geometry.
struct CudaBoundKernel {
  std::vector<int64_t> params;
  Dim3 grid, block;
  std::size_t smem = 0;
  bool empty = false;         // nothing to launch (a zero extent)
  int64_t scratch_bytes = 0;  // device memory it needs: the element path's workspaces (0:
                              // shared), a split key loop's partial states
  bool few = false;           // tensor_core: launch the few-rows variant
  int key_split = 1;          // tensor_core: blocks per row tile's key loop (> 1: combine)
  bool walk = false;          // tensor_core: the blocks walk the work items (persistent)
  bool tma = false;           // tensor_core: Params hold the K/V maps (tma_map_shapes); without
                              // them a kernel with TMA operands runs its cp.async build
  Dim3 combine_grid, combine_block;
  // tensor_core with operands in pieces: a launch of the split kernel per split operand (its
  // fg::SplitArgs words), before the kernel; their pieces live in the call's scratch, before
  // the partial states of a split key loop.
  struct Split {
    std::vector<int64_t> args;
    Dim3 grid, block;
  };
  std::vector<Split> splits;
};

// The grid of a tensor-core kernel's call of m_tiles row tiles (of the full kernel, or of the
// few-rows one) and P parallel indices (the value split of the kernel launched and the key
// split included), as choose_key_split chose:
// (m_tiles, P over y and z); blocks that walk the work items (ks.walk) as many as are resident
// at once (sm_count x min_blocks), or fewer when there are fewer items, (x, 1, 1).
Dim3 sm80_grid(const Sm80Launch& la, const KeySplit& ks, int64_t m_tiles, int64_t P,
               int sm_count);

// A tensor map of one K or V operand of a call (Sm80Launch::tma): 5 dims innermost first (the
// column, key and parallel dims, then 1s), the byte strides of dims 1..4, boxes of 64 columns x
// the key tile, at `base`.
struct TmaMapShape {
  DevicePtr base = 0;
  std::uint64_t dims[5] = {1, 1, 1, 1, 1};
  std::uint64_t strides_bytes[4] = {};
  std::uint32_t box[5] = {1, 1, 1, 1, 1};
};
// The maps of a call's K/V operands for buffers at `ptrs` with `strides` (elements) and extents
// `extv`; empty, with the reason in `why`, when a map cannot describe one of them (TMA needs
// 16-byte aligned bases, a column stride of 1, other strides positive multiples of 16 bytes
// below 2^40, extents from 1 to 2^32): the producer then copies by cp.async.
std::vector<TmaMapShape> tma_map_shapes(const Sm80Launch& la, const std::vector<DevicePtr>& ptrs,
                                        const std::vector<std::vector<int64_t>>& strides,
                                        const std::vector<int64_t>& extv, std::string* why);

// Device state of one call: buffers, kernels' launches.
struct CudaBound {
  std::vector<DeviceBuffer> bufs;
  // i64[kCudaErrorWords]: [0] error kind, [1..3] what; [4..6] tile counts (FG_COUNT_TILES); [7]
  // a block's accumulators ended non-finite (the plain build; run the careful one); [8..9] a
  // walking kernel's item counter (0 again after each launch)
  DeviceBuffer err;
  DeviceBuffer scratch;  // the element kernels' device workspaces (one at a time: in order)
  std::vector<CudaBoundKernel> kernels;
  std::vector<int64_t> extv;
};

// An element kernel's parameter words (cuda_element_params) and geometry for buffers at `ptrs`
// with `strides` (in elements, one list per plan buffer): one block per grid point up to
// `most_blocks` (the lowered blocks per SM times the device's SMs), the workspace in shared
// memory when it fits the lowered limit, else in the scratch at `scratch` (bk.scratch_bytes
// says how much it needs; bind with scratch 0 to size it). CallError for extents whose
// workspace or grid overflow. Needs no GPU (tests/cuda/element_emulation_test.cpp binds
// host memory).
void bind_element(const Plan& plan, const PlanKernel& k, const ElementLaunch& e,
                  const std::vector<DevicePtr>& ptrs,
                  const std::vector<std::vector<int64_t>>& strides, DevicePtr err,
                  DevicePtr scratch, const std::vector<int64_t>& extv, int64_t most_blocks,
                  CudaBoundKernel& bk);

// A tensor-core kernel's parameter words (Params: lower/launch.h) and geometry for buffers at
// `ptrs` with `strides` (one per plan buffer): the variant and key split of the call
// (choose_key_split for `sm_count` SMs), the split launches of operands in bf16 pieces, whose
// pieces come first in the scratch at `scratch`, then a split key loop's partial states
// (bk.scratch_bytes says how much it needs; bind with scratch 0 to size it). Needs no GPU
// unless the launch has TMA operands (tests/cuda/element_emulation_test.cpp binds host memory).
void bind_sm80(const Sm80Launch& la, const Program& p, const std::vector<DevicePtr>& ptrs,
               const std::vector<std::vector<int64_t>>& strides, DevicePtr err,
               DevicePtr scratch, const std::vector<int64_t>& extv, int sm_count,
               CudaBoundKernel& bk);

// Checks the call against the device's limits (CallError), uploads the inputs in their declared
// dtype and poisons the outputs.
CudaBound cuda_bind(const CudaLoaded& L, const Program& p, const TensorMap& inputs,
                    const Extents& ext);
// Compiles the kernels a bound call launches that compile at their first use (the few-rows
// kernel, the cp.async build), so that timing a call (bench, profile) leaves their compile out.
void cuda_prepare(const CudaLoaded& L, const CudaBound& b);
// Launches every kernel in order on `stream`; `only` >= 0 launches that kernel alone.
void cuda_launch(const CudaLoaded& L, CudaBound& b, CudaStreamHandle stream, int only = -1);
// An error word's out-of-range gather or x % 0 (err[0..3]) as a CallError; nothing if err[0]
// is 0.
void cuda_raise_error_word(const Program& p, const Plan& plan, const std::vector<int64_t>& extv,
                           const int64_t* err);
// After a synchronize: the kernel's out-of-range gather or x % 0 as a CallError.
void cuda_check_errors(const Program& p, const Plan& plan, const CudaBound& b);
// Runs the call to completion: the plain build, then, if it flagged a non-finite accumulator,
// the careful build over the same buffers; errors as cuda_check_errors. Synchronizes.
void cuda_run(const Program& p, const Extents& ext, const CudaLoaded& plain, CudaBound& b);
// The outputs, of their declared dtype.
TensorMap cuda_download_outputs(const CudaLoaded& L, const CudaBound& b);

// Tiles the FG_COUNT_TILES kernel counted over the whole grid since the error word was zeroed:
// key tiles computed, skipped as empty, and computed without mask code (full). Every block of a
// value-column split counts its own tiles.
TileCounts cuda_tile_counts(const CudaBound& b);

}  // namespace flashgen
