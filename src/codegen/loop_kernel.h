// The loop-nest printer of plan kernels as element code, for two skeletons that share every
// rule of what is computed when (phases, accumulator order, online refreshes, tile classes,
// gathers, stores):
//   cpu         a C++ function (codegen/cpu.h gives its ABI): OpenMP over the grid points,
//               per-thread heap arrays, reductions vectorized with their last local dim
//               innermost (bit-identical per element), compile-time head extents for the
//               commonest size
//   cuda_block  a CUDA kernel of the element path (lower/lower.h): one block per grid point
//               (grid-stride), each value's elements spread over the block's threads with a
//               barrier after each, the arrays in the block's workspace (shared or device
//               memory, offsets from the host), outputs stored in their declared dtype,
//               intermediates as lowering holds them (LoweredCuda::storage: double / int64
//               where an element kernel writes them, like the CPU's)
// Tests: tests/cpu/cpu_examples_test.cpp, tests/property/random_programs_test.cpp (cpu);
// tests/cuda/element_emulation_test.cpp (host emulation), tests/gpu/element_gpu_test.cpp (GPU).
#pragma once

#include <string>

#include "lower/lower.h"
#include "plan/plan.h"

namespace flashgen {

enum class LoopSkeleton { cpu, cuda_block };

// The source of kernel `k` (helpers excluded: see loop_gather_helpers and the preludes).
// `element` is the lowered launch of a cuda_block kernel (its arrays and thread count), and
// `storage` how the plan's buffers are held in device memory (LoweredCuda::storage; the cpu
// skeleton holds intermediates in wide_storage).
std::string emit_loop_kernel(const Plan& plan, const PlanKernel& k, LoopSkeleton s,
                             const ElementLaunch* element = nullptr,
                             const std::vector<DType>* storage = nullptr);
// One checked read helper per gathered parameter of the plan (G<param>(err, idx...)).
std::string loop_gather_helpers(const Plan& plan, LoopSkeleton s);
// The CUDA element kernel's parameter struct for kernel `k` (fields in this order, all 8
// bytes): buf[buffers], st[sum of buffer ranks], ext[dims], err, scratch, ws, use_smem,
// off[arrays] (then, a block per point or a lanes kernel, the reduction slots' offset; a
// lanes kernel, its lanes a point: ElementParamLayout::lanes). run_cuda binds it.
std::string cuda_element_params(const Plan& plan, const PlanKernel& k, const ElementLaunch& e);
// The word counts of that struct's arrays (each at least 1) and where each field starts.
struct ElementParamLayout {
  size_t bufs = 1, strides = 1, dims = 1, arrays = 1;
  size_t st() const { return bufs; }
  size_t ext() const { return bufs + strides; }
  size_t err() const { return ext() + dims; }
  size_t scratch() const { return err() + 1; }
  size_t ws() const { return err() + 2; }
  size_t use_smem() const { return err() + 3; }
  size_t off() const { return err() + 4; }
  size_t words() const { return off() + arrays; }
  size_t lanes() const { return words() - 1; }  // (a lanes kernel's last word)
};
ElementParamLayout element_param_layout(const Plan& plan, const ElementLaunch& e);

}  // namespace flashgen
