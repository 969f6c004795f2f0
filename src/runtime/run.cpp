// The library's entry points (flashgen.h): version, backend names, and run(), which validates
// a call once, up front, and dispatches to a backend. Every backend returns outputs of their
// declared dtype in declared dim order. Tests: tests/cli/cli_test.cpp (through the CLI).
#include "flashgen/compile.h"
#include "flashgen/flashgen.h"

namespace flashgen {

const char* version() { return FLASHGEN_VERSION; }

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::ref: return "ref";
    case Backend::cpu: return "cpu";
    case Backend::cuda: return "cuda";
  }
  return "?";
}

std::optional<Backend> parse_backend(std::string_view s) {
  for (Backend b : {Backend::ref, Backend::cpu, Backend::cuda})
    if (s == backend_name(b)) return b;
  return std::nullopt;
}

TensorMap run(const Program& p, const TensorMap& inputs, const RunOptions& opt) {
  // Validate before any backend work (compiling) starts: a bad call fails fast and the same way
  // on every backend.
  bind_extents(p, inputs, opt.extra_extents);
  check_input_values(p, inputs);
  switch (opt.backend) {
    case Backend::ref:
      return evaluate_reference(p, inputs, opt.extra_extents);
    case Backend::cpu:
      return run_cpu(p, inputs, opt.extra_extents);
    case Backend::cuda:
      return run_cuda(p, inputs, opt.extra_extents);
  }
  throw BackendError("unknown backend");
}

std::map<std::string, std::vector<int64_t>> output_shapes(const Program& p,
                                                          const TensorMap& inputs,
                                                          const Extents& extra) {
  const Extents ext = bind_extents(p, inputs, extra);
  std::map<std::string, std::vector<int64_t>> out;
  for (const Output& o : p.outputs) {
    std::vector<int64_t>& shape = out[o.name];
    for (int d : o.dims) shape.push_back(ext.at(p.dims[d]));
  }
  return out;
}

void run_into(const Program& p, const TensorMap& inputs, TensorMap& outputs,
              const RunOptions& opt) {
  const auto shapes = output_shapes(p, inputs, opt.extra_extents);
  check_input_values(p, inputs);
  for (const auto& [name, t] : outputs)
    if (!shapes.count(name))
      throw CallError("'" + name + "' is not an output of program '" + p.name + "'");
  for (const Output& o : p.outputs) {
    auto it = outputs.find(o.name);
    if (it == outputs.end()) throw CallError("missing output '" + o.name + "'");
    const Tensor& t = it->second;
    if (t.dtype() != o.type)
      throw CallError("output '" + o.name + "' is " + dtype_name(t.dtype()) + "; the program " +
                      "declares " + dtype_name(o.type));
    const std::vector<int64_t>& want = shapes.at(o.name);
    if (t.shape() != want) {
      std::string dims;
      for (size_t i = 0; i < o.dims.size(); ++i) dims += (i ? ", " : "") + p.dims[o.dims[i]];
      throw CallError("output '" + o.name + "' has shape " + shape_text(t.shape()) + "; this " +
                      "call gives [" + dims + "] = " + shape_text(want));
    }
  }
  if (opt.backend == Backend::cpu) {
    run_cpu_into(p, inputs, opt.extra_extents, outputs);
    return;
  }
  TensorMap result = run(p, inputs, opt);
  for (auto& [name, t] : outputs) t.copy_from(result.at(name));
}

}  // namespace flashgen
