// The compiler: Program -> canonical program -> fused plan -> generated kernels.
//
// The pipeline is one function (src/compiler/pipeline.cpp) running the passes in src/passes/
// in order; each pass has a name usable with --dump-after.
#pragma once

#include <map>
#include <memory>
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
  // CUDA targets: the shared memory of the GPU the kernels are for, in bytes (0: the target's
  // default device, an A100 for cuda-sm80 and an H100/H200 for cuda-sm90); run_cuda passes
  // the running GPU's.
  int smem_per_sm = 0, smem_per_block = 0;
  // CUDA targets: lowering may run a kernel per softmax cluster (docs/design.md); false keeps
  // one kernel (the runtime's choice for decode calls where that reads less).
  bool cluster_split = true;
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
// The same, writing into `outputs` (checked by run_into, flashgen.h) in place.
void run_cpu_into(const Program& p, const TensorMap& inputs, const Extents& extra,
                  TensorMap& outputs);
// Compiles several programs (distinct names) into one host library, so later run_cpu calls
// on them start at once (one compiler run instead of one per program).
// `extra_flags` go to the host compiler after its defaults (tests pass -O1 to compile faster).
void precompile_cpu(const std::vector<Program>& programs,
                    const std::vector<std::string>& extra_flags = {});

// ---- The CUDA backend (src/compiler/run_cuda.cpp) ----
// Generated CUDA source of every kernel for cuda-sm80 / cuda-sm90: each lowered kernel on the
// tensor-core path (specialized for the head-dim extents in `sizes`: the dims the plan
// eliminates; others are ignored) or the element path (`flashgen print --dump-after lower`
// says which and why).
std::string emit_cuda(const Program& p, Target target, const Extents& sizes);
// Compiles that source with NVRTC for `arch` ("sm_80", "sm_90a"; empty: sm_80 for cuda-sm80,
// sm_90a for cuda-sm90) and returns the cubin (one kernel; more is a BackendError). Needs no GPU.
std::string compile_cuda_cubin(const Program& p, Target target, const Extents& sizes,
                               const std::string& arch = "");
// Which path each kernel of the plan takes on a CUDA target at these sizes (the lowered
// description: "tensor_core" or "element") and why, in plan order.
struct CudaKernelPath {
  std::string kernel, path, why;
};
std::vector<CudaKernelPath> cuda_paths(const Program& p, Target target, const Extents& sizes);
// The same for a plan of any number of kernels: one cubin each, in plan order.
std::vector<std::string> compile_cuda_cubins(const Program& p, Target target,
                                             const Extents& sizes, const std::string& arch = "");
// Runs on the GPU (compiled for the running GPU's arch). Inputs of another dtype are converted;
// any strides are accepted (packed before upload).
TensorMap run_cuda(const Program& p, const TensorMap& inputs, const Extents& extra = {});
// A tensor in GPU memory of the current device's primary context (a torch or CuPy CUDA
// tensor that crossed by DLPack): strides in elements.
struct DeviceTensor {
  DType type = DType::f32;
  std::vector<int64_t> shape, strides;
  uint64_t ptr = 0;
};
using DeviceTensorMap = std::map<std::string, DeviceTensor>;
// Launches the program on GPU memory in place, on `stream` (a CUstream; 0 is the legacy
// default stream), and returns without synchronizing: a CUDA graph capture records it. Inputs
// and outputs have their declared dtype and shape, packed in declared dim order and 16-byte
// aligned (CallError naming the tensor otherwise). `err` is kCudaErrorWords zeroed int64 of
// device memory, one per call in flight (a call's kernels count on it), where the kernel
// reports an out-of-range gather or x % 0 (err[0..3], decoded by cuda_raise_error_word) and a
// non-finite accumulator (err[7]: the plain build does not follow the strong zero of masked
// keys whose V is inf or NaN; the careful build does, slower); err[8..9] are the counter a
// walking kernel hands out its work items by, which it leaves 0 again when it ends.
constexpr int kCudaErrorWords = 16;
// Shape-only host views of device tensors (dtype and shape; their memory is never read), for
// the calls that take a TensorMap only to bind extents: output_shapes, cuda_raise_error_word.
// CallError for a negative extent or more than 2^60 elements.
TensorMap device_shape_views(const DeviceTensorMap& m);
// `cache` (from make_cuda_launch_cache, one per program, optional) keeps the loaded kernels by
// head extents and build, so repeated calls skip the compiler's pipeline.
struct CudaLaunchCache;
std::shared_ptr<CudaLaunchCache> make_cuda_launch_cache();
void cuda_launch_device(const Program& p, const DeviceTensorMap& inputs,
                        const DeviceTensorMap& outputs, uint64_t err, uint64_t stream,
                        bool careful = false, CudaLaunchCache* cache = nullptr);
// The CallError an error word read back from such a call stands for (nothing if err[0] is 0);
// `input_shapes` are the call's inputs (only their shapes are read).
void cuda_raise_error_word(const Program& p, const TensorMap& input_shapes, const int64_t* err);
// Kernels compiled (NVRTC or disk cache) and loaded by this process: a test asserts that
// changing long extents does not raise it.
int cuda_kernel_load_count();

struct CudaBenchResult {
  std::string device;       // "NVIDIA H200"
  std::string kernels;      // per kernel: its path and products, e.g. "tensor_core (wgmma)"
  double median_ms = 0, min_ms = 0;
  double flops = 0;         // unmasked work only: per unmasked (row, key) pair 2*D per score
                            // contraction + 2*DV per P.V accumulator
  double dense_flops = 0;   // the same counting every pair
  double tflops = 0;        // flops / median time
  double peak_tflops = 0;   // dense bf16 tensor-core peak used for the fraction (datasheet;
                            // 0 where the GPU has none here: no fraction)
};
// Times the program on random inputs of `sizes` (median over `iters` warm runs); inputs named
// in `given` (e.g. document ids) replace the random ones.
CudaBenchResult bench_cuda(const Program& p, const Extents& sizes, int warmup = 5,
                           int iters = 30, uint64_t seed = 1, const TensorMap& given = {});

}  // namespace flashgen
