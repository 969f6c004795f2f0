// flashgen's library entry points: parse, compile and run attention programs on a backend.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "flashgen/builder.h"
#include "flashgen/error.h"
#include "flashgen/frontend.h"
#include "flashgen/ir.h"
#include "flashgen/ref.h"
#include "flashgen/tensor.h"

namespace flashgen {

const char* version();

enum class Backend { ref, cpu, cuda };
const char* backend_name(Backend b);
std::optional<Backend> parse_backend(std::string_view s);

struct RunOptions {
  Backend backend = Backend::ref;
  Extents extra_extents;  // dims no input binds
};

// Runs a program: validates the inputs (CallError), converts them to the declared dtypes and
// runs the backend. Outputs have their declared dtype and dim order.
TensorMap run(const Program& p, const TensorMap& inputs, const RunOptions& opt = {});

// The shape of every output a call with these inputs gives (CallError as run, before any
// backend work).
std::map<std::string, std::vector<int64_t>> output_shapes(const Program& p,
                                                          const TensorMap& inputs,
                                                          const Extents& extra = {});
// Runs a program into outputs the caller allocated: `outputs` holds one tensor per output of
// the program (usually Tensor::borrow views of numpy or torch memory, any strides), of its
// declared dtype and shape; anything else is a CallError that names the output. The CPU
// backend reads inputs of their declared dtype in place and writes the outputs in place; the
// other backends compute into their own memory and copy the result over.
void run_into(const Program& p, const TensorMap& inputs, TensorMap& outputs,
              const RunOptions& opt = {});

}  // namespace flashgen
