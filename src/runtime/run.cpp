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

}  // namespace flashgen
