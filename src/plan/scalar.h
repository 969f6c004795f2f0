// Scalar semantics of the element-wise ops in double precision (constant folding uses it; the
// emitted code follows the same rules). Integer results are exact, float results are rounded to
// the node's type (f32 etc.), bools are 0/1.
#pragma once

#include <vector>

#include "flashgen/ir.h"

namespace flashgen {

double eval_scalar(Op op, DType result, const std::vector<double>& args,
                   const std::vector<DType>& arg_types);

}  // namespace flashgen
