// Verifying a program on every backend this machine has against the f64 reference: the same
// inputs, each output's error (max abs / rel, where, non-finite values that differ) and the
// dtype's tolerance (flashgen/check.h). `flashgen verify` prints verify_text.
// See docs/cli.md "verify". Tests: tests/tools/verify_test.cpp, tests/gpu/profile_gpu_test.cpp.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "flashgen/check.h"
#include "flashgen/flashgen.h"

namespace flashgen {

struct BackendCheck {
  Backend backend = Backend::ref;
  std::string label;         // "ref", "cpu", "cuda (sm80 path)"
  bool ran = false;          // false: not available here or cannot run this program (why_not)
  std::string why_not;
  std::string error;         // ran, but failed with this error (the reference did not)
  double ms = 0;             // wall time of the run (compiling included, unless cached)
  std::vector<OutputCheck> outputs;  // in output order, when it ran without error
  bool ok() const;           // not run, or ran without error and every output within tolerance
};

struct VerifyReport {
  std::string program;
  std::vector<BackendCheck> backends;  // ref, cpu, cuda, in this order
  double tolerance = -1;               // the tolerance given (VerifyOptions), or -1
  bool ok() const;                     // every backend that ran is ok
  int ran() const;                     // how many ran
};

struct VerifyOptions {
  // The relative tolerance every output is held to; negative: each output's dtype tolerance
  // (check_tolerance).
  double tolerance = -1;
  // Test hook: changes the inputs one backend receives (to plant a difference).
  std::function<void(Backend, TensorMap&)> perturb;
};

// Runs `p` on `inputs` with every backend (ref, cpu, cuda) and compares each with the f64
// reference. A CallError of the reference (bad inputs) propagates; a backend's own errors are
// in the report.
VerifyReport verify(const Program& p, const TensorMap& inputs, const VerifyOptions& opt = {});
// The report as `flashgen verify` prints it; `ext` (bind_extents) names the worst indices.
std::string verify_text(const Program& p, const VerifyReport& r, const Extents& ext);

}  // namespace flashgen
