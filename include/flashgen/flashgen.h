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

}  // namespace flashgen
