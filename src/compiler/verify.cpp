// verify: one program on every backend (ref, cpu, cuda) on the same inputs, each output
// compared with the f64 reference by check_outputs (flashgen/check.h) at its dtype's tolerance
// or a given one. A backend that is not available here (no GPU, no host compiler) is listed with
// why; one that fails
// while it runs where the reference did not (any error: a CallError of its own, a compiler or
// device failure) or differs beyond the tolerance fails the verification.
// Tests: tests/tools/verify_test.cpp (every example; planted differences),
// tests/gpu/profile_gpu_test.cpp (with the CUDA backend).
#include "flashgen/verify.h"

#include <chrono>
#include <exception>
#include <cstdio>
#include <sstream>

#include "compiler/cuda_call.h"
#include "flashgen/error.h"
#include "runtime/cuda_driver.h"
#include "runtime/host_compiler.h"

namespace flashgen {

bool BackendCheck::ok() const {
  if (!ran) return true;
  if (!error.empty()) return false;
  for (const OutputCheck& c : outputs)
    if (!c.ok()) return false;
  return true;
}

bool VerifyReport::ok() const {
  for (const BackendCheck& b : backends)
    if (!b.ok()) return false;
  return true;
}

int VerifyReport::ran() const {
  int n = 0;
  for (const BackendCheck& b : backends) n += b.ran;
  return n;
}

namespace {

// Whether the backend can run this program on this machine, decided before it runs (so an error
// while it runs is a failure, not "not run"); if not, why.
bool available(Backend b, std::string* why) {
  try {
    if (b == Backend::cuda) {
      if (!cuda_available(why)) return false;
    }
    if (b == Backend::cpu) host_compiler_version();
  } catch (const BackendError& e) {
    *why = (b == Backend::cpu ? std::string("no host compiler: ")
                              : std::string("cannot run this program: ")) +
           e.what();
    return false;
  }
  return true;
}

std::string fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

// "[b=0, h=1, m=5, e=3]" for a flat index of output `o`.
std::string index_text(const Program& p, const Output& o, int64_t flat, const Extents& ext) {
  std::vector<int64_t> shape;
  int64_t stride = 1;
  for (int d : o.dims)
    if (!ext.count(p.dims[d])) return "flat index " + std::to_string(flat);
  for (int d : o.dims) {
    shape.push_back(ext.at(p.dims[d]));
    stride *= shape.back();
  }
  std::string s = "[";
  for (size_t k = 0; k < shape.size(); ++k) {
    stride /= shape[k];
    s += (k ? ", " : "") + p.dims[o.dims[k]] + "=" + std::to_string(flat / stride);
    flat %= stride;
  }
  return s + "]";
}

}  // namespace

VerifyReport verify(const Program& p, const TensorMap& inputs, const VerifyOptions& opt) {
  VerifyReport r;
  r.program = p.name;
  r.tolerance = opt.tolerance;
  // The oracle first: a bad call fails here, for every backend alike.
  const TensorMap ref = evaluate_reference_f64(p, inputs);
  const Extents ext = bind_extents(p, inputs);
  for (Backend be : {Backend::ref, Backend::cpu, Backend::cuda}) {
    BackendCheck c;
    c.backend = be;
    c.label = backend_name(be);
    if (!available(be, &c.why_not)) {
      r.backends.push_back(c);
      continue;
    }
    TensorMap in = inputs;
    if (opt.perturb) opt.perturb(be, in);
    RunOptions ro;
    ro.backend = be;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      TensorMap got = run(p, in, ro);
      c.ran = true;
      c.outputs = check_outputs(p, got, ref);
      if (opt.tolerance >= 0)
        for (OutputCheck& o : c.outputs) o.tolerance = opt.tolerance;
    } catch (const std::exception& e) {  // the reference ran this call: an error is a failure
      c.ran = true;
      c.error = e.what();
    }
    c.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
               .count();
    r.backends.push_back(c);
  }
  return r;
}

std::string verify_text(const Program& p, const VerifyReport& r, const Extents& ext) {
  std::ostringstream os;
  os << "program " << r.program << ": every backend against the f64 reference evaluator\n";
  int failed = 0;
  for (const BackendCheck& b : r.backends) {
    os << "\n" << b.label << ": ";
    if (!b.ran) {
      os << "not run: " << b.why_not << "\n";
      continue;
    }
    os << (b.ok() ? "ok" : "FAILED") << " (" << fmt(b.ms) << " ms, compiling included unless "
       << "cached)\n";
    failed += !b.ok();
    if (!b.error.empty()) {
      os << "  error: " << b.error << " (the reference ran without it)\n";
      continue;
    }
    for (size_t i = 0; i < b.outputs.size(); ++i) {
      const OutputCheck& c = b.outputs[i];
      const Output& o = p.outputs[i];
      os << "  " << c.name << ": max abs err " << fmt(c.max_abs) << ", max rel err "
         << fmt(c.max_rel) << " (of max |ref| " << fmt(c.scale) << ")";
      if (c.worst >= 0 && c.max_abs > 0) os << " at " << index_text(p, o, c.worst, ext);
      os << "; tolerance " << fmt(c.tolerance) << " ("
         << (r.tolerance >= 0 ? "given" : dtype_name(c.precision)) << ")";
      if (c.nonfinite_mismatch)
        os << "; " << c.nonfinite_mismatch << " NaN/inf values differ from the reference";
      os << (c.ok() ? "" : "  FAILED") << "\n";
    }
  }
  os << "\n"
     << r.ran() << " of " << r.backends.size() << " backends ran; "
     << (failed ? std::to_string(failed) + " differ from the reference beyond the tolerance"
                : std::string("all that ran agree with the reference within the tolerance"))
     << "\n";
  return os.str();
}

}  // namespace flashgen
