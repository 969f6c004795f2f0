// The work a plan kernel must do, from the plan and the extents alone: FLOPs, compulsory bytes,
// and the fraction of (row, key) pairs that its tile mask keeps. explain, profile and bench read
// these; none of them counts work a second way.
// Test: tests/plan/cost_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "flashgen/ref.h"
#include "flashgen/tensor.h"
#include "plan/plan.h"

namespace flashgen {

struct KernelCost {
  bool known = false;      // false when an extent the count needs is not in `sizes`
  double flops = 0;        // every value over its whole dim set (dense: masks ignored)
  double body_flops = 0;   // the part inside the reduction loop (values over the key dim)
  double bytes = 0;        // each buffer read or written once (compulsory traffic)
};

// FLOPs: one per element-wise result element and per reduction input element (a contraction
// sum(q*k, d) is 2 per (m, n, d): the product and the add). Bytes: each buffer the kernel reads
// or writes, once; intermediates at 4 bytes per element.
KernelCost kernel_cost(const Plan& plan, const PlanKernel& k, const Extents& sizes);

// The fraction of (row, key) pairs where the kernel's tile mask holds, evaluated exactly on the
// host at up to `max_rows` evenly spaced rows (fewer when rows x keys would pass 2^22), every
// key, and index 0 of every other dim (mask
// data such as document ids are read from `inputs`). 1 without a mask; a node the host cannot
// evaluate counts as kept. `ext` holds every dim's extent, in the program's dim order.
double mask_fraction(const Plan& plan, const PlanKernel& k, const TensorMap& inputs,
                     const std::vector<int64_t>& ext, int64_t max_rows = 512);

// The FLOPs the kernel must do: its body FLOPs over kept (row, key) pairs only, plus the rest.
inline double must_flops(const KernelCost& c, double kept_fraction) {
  return c.flops - c.body_flops * (1 - kept_fraction);
}

}  // namespace flashgen
