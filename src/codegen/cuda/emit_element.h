// The CUDA printer of lowered kernels: the element path's source (the shared prelude, the
// helpers below, gather helpers, the parameter struct and the loop-nest printer's cuda_block
// kernel), and for either path the source that NVRTC compiles.
// Tests: tests/cuda/element_emulation_test.cpp (host emulation), tests/gpu/element_gpu_test.cpp (GPU).
#pragma once

#include <string>

#include "lower/lower.h"

namespace flashgen {

// One translation unit per lowered kernel (its entry is LoweredKernel::entry); `storage`:
// how the plan's buffers are held in device memory (LoweredCuda::storage).
std::string emit_lowered_kernel(const Plan& plan, const LoweredKernel& lk,
                                const std::vector<DType>& storage);

}  // namespace flashgen
