// The tensor-core printer: a kernel lowered by lower_tensor_core (lower/tensor_core.h, with its
// launch in lower/launch.h) -> one CUDA translation unit that instantiates
// fg::attn_fwd_sm80<Spec> (fg_attn_sm80.cuh), printing what lowering decided and deciding nothing
// (src/codegen/cuda/README.md: the plan -> Spec mapping).
// Tests: tests/cuda/nvrtc_examples_test.cpp (every example compiles through NVRTC for sm_80 and
// sm_90a), tests/gpu/cuda_examples_test.cpp (results against the reference on the GPU).
#pragma once

#include <string>

#include "lower/tensor_core.h"
#include "plan/plan.h"

namespace flashgen {

// Its CUDA translation unit; `storage`: how the plan's buffers are held in device memory
// (LoweredCuda::storage: the intermediates it reads and writes).
std::string print_tensor_core(const Plan& plan, const TensorCoreKernel& tc,
                              const std::vector<DType>& storage);

}  // namespace flashgen
