// The CPU backend's host side in steps (src/compiler/run_cpu.cpp): load a program's compiled
// kernels, bind a call's buffers, run one kernel (reporting its errors), take the outputs.
// run_cpu and profile (src/compiler/profile.cpp) are each a few of these steps.
// Tests: tests/cpu/cpu_examples_test.cpp, tests/tools/profile_test.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "flashgen/profile.h"
#include "plan/plan.h"
#include "runtime/host_compiler.h"

namespace flashgen {

using CpuKernelFn = void(void* const*, const int64_t*, const int64_t*, int64_t*);

struct CpuCompiled {
  Plan plan;
  std::shared_ptr<const HostLibrary> lib;
  std::vector<CpuKernelFn*> fns;  // one per plan kernel
  double compile_ms = 0;          // emit + host compile (or its disk cache) + dlopen
  bool count_tiles = false;       // compiled with -DFG_COUNT_TILES (kernels count their tiles)
};

// The compiled kernels of `p`, once per process (and flags); *from_process_cache says whether
// this call found them loaded. count_tiles builds the variant that counts key tiles (profile).
std::shared_ptr<const CpuCompiled> cpu_load(const Program& p, bool count_tiles = false,
                                            const std::vector<std::string>& extra_flags = {},
                                            bool* from_process_cache = nullptr);

// One call's buffers: the inputs converted to their declared types, the outputs and
// intermediates allocated (8 bytes per element), every buffer's strides.
struct CpuBound {
  Extents ext;
  std::vector<int64_t> extv;       // in the program's dim order
  std::vector<Tensor> held;        // converted inputs
  std::vector<void*> bufs;         // per plan buffer
  std::vector<int64_t> strides;    // every buffer's, concatenated
  std::vector<std::vector<int64_t>> owned;  // written buffers
};
CpuBound cpu_bind(const CpuCompiled& c, const Program& p, const TensorMap& inputs,
                  const Extents& extra);
// Runs kernel k; an out-of-range gather or x % 0 is a CallError. Returns the tiles it counted
// (zero unless c.count_tiles).
TileCounts cpu_run_kernel(const CpuCompiled& c, CpuBound& b, const Program& p, int k);
// The outputs, of their declared dtype.
TensorMap cpu_outputs(const CpuCompiled& c, const CpuBound& b);
// Writes the outputs into `outputs` (one tensor per output, of its dtype and shape, any strides).
void cpu_write_outputs(const CpuCompiled& c, const CpuBound& b, TensorMap& outputs);

}  // namespace flashgen
