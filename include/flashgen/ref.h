// The reference evaluator: executes any valid Program directly, unfused, in f64, with exactly
// docs/language.md's semantics. It is the oracle of every test.
#pragma once

#include <map>
#include <string>

#include "flashgen/ir.h"
#include "flashgen/tensor.h"

namespace flashgen {

// The extents of every dimension of a program, bound from its inputs (and for dimensions that
// no input binds, from `extra`, e.g. SIZES on the CLI).
using Extents = std::map<std::string, int64_t>;

// Checks the inputs against the program's parameters and returns every dimension's extent.
// Throws CallError naming the parameter and dimension (missing input, wrong rank/dtype kind,
// extents that disagree, an unbound dimension). Float inputs of any float dtype are accepted
// and rounded to the declared dtype by prepare_inputs.
Extents bind_extents(const Program& p, const TensorMap& inputs, const Extents& extra = {});
// CallError unless every parameter and output has at most 2^kMaxElementsLog2 elements under
// these extents (dimensions missing from `extents` count as 0); the message names the value and
// the extents whose product is too large. bind_extents and random_inputs call it.
void check_call_sizes(const Program& p, const Extents& extents);
// Returns the inputs converted to each parameter's declared dtype (contiguous). CallError when an
// integer value does not fit its parameter's type (check_input_values).
TensorMap prepare_inputs(const Program& p, const TensorMap& inputs);
// The value checks of prepare_inputs alone (an i64 value given to an i32 parameter must fit), so
// run() can fail a bad call before any backend starts.
void check_input_values(const Program& p, const TensorMap& inputs);

// Evaluates in f64. Outputs are tensors of their declared dtype, in their declared dim order,
// holding values rounded to that dtype. Throws CallError on an out-of-range gather (naming the
// parameter).
TensorMap evaluate_reference(const Program& p, const TensorMap& inputs, const Extents& extra = {});
// The same, but float outputs kept as unrounded f64 (for error measurements of other
// backends); integer and bool outputs are of their declared type, as above.
TensorMap evaluate_reference_f64(const Program& p, const TensorMap& inputs,
                                 const Extents& extra = {});

// Random inputs for every parameter given extents: floats ~ N(0,1) rounded to dtype, bool
// ~ Bernoulli(0.8 true), integers uniform in [0, 4) unless a gather uses them as an index, in
// which case they are uniform over the valid range of every dimension they index.
TensorMap random_inputs(const Program& p, const Extents& extents, uint64_t seed);

}  // namespace flashgen
