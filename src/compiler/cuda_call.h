// The CUDA backend's host side in steps (src/compiler/run_cuda.cpp): load a program's kernel,
// bind a call's buffers, launch, check the kernel's error word, download the outputs. run_cuda,
// bench_cuda and profile (src/compiler/profile.cpp) are each a few of these steps.
// Tests: tests/gpu/cuda_examples_test.cpp, tests/gpu/profile_gpu_test.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "codegen/cuda/emit_sm80.h"
#include "flashgen/profile.h"
#include "plan/plan.h"
#include "runtime/cuda_driver.h"

namespace flashgen {

// A loaded kernel of a program for the running GPU and the head dims of a call.
struct CudaLoaded {
  Plan plan;
  CudaKernelSource src;
  CudaKernel kernel;
  std::string arch;           // "sm_90a"
  double compile_ms = 0;      // emit + NVRTC (or its disk cache) + module load
  bool from_disk_cache = false;
  bool count_tiles = false;   // compiled with FG_COUNT_TILES (the kernel counts its tiles)
};

// The kernel for program `p` at the head extents in `ext` (other extents are ignored), compiled
// once per process; *from_process_cache says whether this call found it loaded already.
// count_tiles compiles the variant that counts tiles (profile); it is cached apart.
std::shared_ptr<const CudaLoaded> cuda_load(const Program& p, const Extents& ext,
                                            bool count_tiles = false,
                                            bool* from_process_cache = nullptr);

// Device state of one call: buffers, params, launch geometry.
struct CudaBound {
  std::vector<DeviceBuffer> bufs;
  DeviceBuffer err;  // i64[8]: [0] error kind, [1..3] what; [4..6] tile counts (FG_COUNT_TILES)
  std::vector<int64_t> params;
  Dim3 grid, block;
  bool empty = false;  // nothing to launch (a zero extent)
  std::vector<int64_t> extv;
};

// Checks the call against the device's limits (CallError), uploads the inputs in their declared
// dtype and poisons the outputs.
CudaBound cuda_bind(const CudaLoaded& L, const Program& p, const TensorMap& inputs,
                    const Extents& ext);
void cuda_launch(const CudaLoaded& L, CudaBound& b, CudaStreamHandle stream);
// After a synchronize: the kernel's out-of-range gather or x % 0 as a CallError.
void cuda_check_errors(const Program& p, const Plan& plan, const CudaBound& b);
// The outputs, of their declared dtype.
TensorMap cuda_download_outputs(const CudaLoaded& L, const CudaBound& b);

// Tiles the FG_COUNT_TILES kernel counted over the whole grid since the error word was zeroed:
// key tiles computed, skipped as empty, and computed without mask code (full). Every block of a
// value-column split counts its own tiles.
TileCounts cuda_tile_counts(const CudaBound& b);

}  // namespace flashgen
