// Checking a backend's outputs against the reference evaluator: the error measures and the
// dtype-based tolerance that `flashgen run --check` applies (docs/cli.md "run").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashgen/ir.h"
#include "flashgen/tensor.h"

namespace flashgen {

struct OutputCheck {
  std::string name;
  DType type = DType::f32;   // the output's declared type
  DType precision = DType::f32;  // the type the tolerance follows (see check_tolerance)
  double max_abs = 0;        // largest |got - ref| over elements finite in both
  double scale = 0;          // largest finite |ref|
  double max_rel = 0;        // max_abs / scale (max_abs when scale is 0)
  int64_t worst = -1;        // flat index (row-major, declared dim order) of max_abs; -1: none
  int64_t nonfinite_mismatch = 0;  // NaN/inf in one and not the same in the other
  double tolerance = 0;      // the bound on max_rel
  bool ok() const { return nonfinite_mismatch == 0 && max_rel <= tolerance; }
};

// The tolerance of an output, relative to its largest reference magnitude: 2 units in the last
// place (at 1) of the least precise float type among the output and the program's float parameters
// (bf16: 2^-6, f16: 2^-9, f8e4m3: 2^-2, f8e5m2: 2^-1), and 2^-13 for f32 (f32 sums of many
// terms round more than a few ulps); integer and bool outputs computed only from integer and bool
// parameters must match exactly. `precision` receives the type it follows.
double check_tolerance(const Program& p, const Output& out, DType* precision = nullptr);

// Compares every output of `got` with the unrounded reference outputs `ref`
// (evaluate_reference_f64), in output order.
std::vector<OutputCheck> check_outputs(const Program& p, const TensorMap& got,
                                       const TensorMap& ref);

}  // namespace flashgen
