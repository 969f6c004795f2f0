// run_cpu: the CPU backend's host side. Compiles the plan's C++ with the host compiler (disk
// cached, runtime/host_compiler.h), binds inputs by pointer + strides (any strides; inputs of
// another dtype are converted first), runs the kernels in order, reports out-of-range gathers
// as CallError naming the parameter, and returns outputs of their declared dtype.
// Test: tests/cpu/cpu_examples_test.cpp.
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "ir/scalar_semantics.h"
#include "codegen/cpu.h"
#include "compiler/pipeline.h"
#include "flashgen/error.h"
#include "runtime/host_compiler.h"

namespace flashgen {

namespace {

using KernelFn = void(void* const*, const int64_t*, const int64_t*, int64_t*);

struct CpuProgram {
  Plan plan;
  std::shared_ptr<const HostLibrary> lib;
  std::vector<KernelFn*> fns;
};

std::mutex& cache_mutex() {
  static std::mutex mu;
  return mu;
}
// Compiled programs of this process, by the program's structural text.
std::map<std::string, std::shared_ptr<const CpuProgram>>& program_cache() {
  static std::map<std::string, std::shared_ptr<const CpuProgram>> cache;
  return cache;
}

std::shared_ptr<const CpuProgram> compiled_for(const Program& p) {
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    auto it = program_cache().find(p.str());
    if (it != program_cache().end()) return it->second;
  }
  precompile_cpu({p});
  std::lock_guard<std::mutex> lock(cache_mutex());
  return program_cache().at(p.str());
}

}  // namespace

void precompile_cpu(const std::vector<Program>& programs,
                    const std::vector<std::string>& extra_flags) {
  std::vector<std::shared_ptr<CpuProgram>> cps;
  std::string source = emit_cpu_prelude() + "\n";
  std::set<std::string> names;
  for (const Program& p : programs) {
    if (!names.insert(p.name).second)
      throw BackendError("precompile_cpu: two programs named '" + p.name + "'");
    auto cp = std::make_shared<CpuProgram>();
    cp->plan = compile_program(p, CompileOptions{}).plan;
    source += emit_cpu_kernels(cp->plan);
    cps.push_back(cp);
  }
  HostCompileOptions hopt;
  hopt.extra_flags = extra_flags;
  std::shared_ptr<const HostLibrary> lib = host_compile(source, hopt);
  std::lock_guard<std::mutex> lock(cache_mutex());
  for (size_t i = 0; i < programs.size(); ++i) {
    cps[i]->lib = lib;
    for (const PlanKernel& k : cps[i]->plan.kernels)
      cps[i]->fns.push_back(lib->function<KernelFn>(k.name));
    program_cache()[programs[i].str()] = cps[i];
  }
}

TensorMap run_cpu(const Program& p, const TensorMap& inputs, const Extents& extra) {
  Extents ext = bind_extents(p, inputs, extra);
  // The one conversion of inputs to their declared types (integer values must fit).
  const TensorMap prepared = prepare_inputs(p, inputs);
  std::shared_ptr<const CpuProgram> cp = compiled_for(p);
  const Plan& plan = cp->plan;
  std::vector<int64_t> extv;
  for (const std::string& d : p.dims) extv.push_back(ext.at(d));

  std::vector<Tensor> held;  // converted inputs
  std::vector<void*> bufs(plan.buffers.size(), nullptr);
  std::vector<int64_t> strides;
  // Written buffers: 8 bytes per element, int64 for integer dtypes and double otherwise (the
  // kernels' out_storage in codegen/cpu.cpp).
  std::vector<std::vector<int64_t>> owned(plan.buffers.size());
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const PlanBuffer& B = plan.buffers[b];
    if (B.kind == PlanBuffer::Input) {
      const Tensor& given = prepared.at(B.name);
      held.push_back(given.dtype() == B.type ? given : given.to(B.type));
      bufs[b] = const_cast<void*>(held.back().data());
      for (int64_t s : held.back().strides()) strides.push_back(s);
    } else {
      std::vector<int64_t> shape;
      for (int d : B.dims) shape.push_back(extv[d]);
      const int64_t n = checked_element_count(shape);
      if (n < 0) {
        throw CallError("the CPU backend cannot hold intermediate '" + B.name + "' of shape " +
                        shape_text(shape) + ": more than 2^" + std::to_string(kMaxElementsLog2) +
                        " elements");
      }
      std::vector<int64_t> st(B.dims.size());
      int64_t acc = 1;  // at most n: no overflow
      for (int i = static_cast<int>(B.dims.size()) - 1; i >= 0; --i) {
        st[i] = acc;
        acc *= extv[B.dims[i]];
      }
      check_fits_memory(static_cast<uint64_t>(n) * 8,
                        "the CPU backend's buffer for '" + B.name + "'");
      try {
        owned[b].assign(static_cast<size_t>(n), 0);  // 0 and 0.0 share their bits
      } catch (const std::bad_alloc&) {
        throw BackendError("out of memory: the CPU backend needs " + std::to_string(8 * n) +
                           " bytes for " + (B.kind == PlanBuffer::Output ? "output '" : "'") +
                           B.name + "'");
      }
      bufs[b] = owned[b].data();
      strides.insert(strides.end(), st.begin(), st.end());
    }
  }
  // held may reallocate: take data pointers after all inputs are in place.
  size_t hi = 0;
  for (size_t b = 0; b < plan.buffers.size(); ++b)
    if (plan.buffers[b].kind == PlanBuffer::Input) bufs[b] = const_cast<void*>(held[hi++].data());

  for (size_t k = 0; k < cp->fns.size(); ++k) {
    int64_t err[4] = {0, 0, 0, 0};
    cp->fns[k](bufs.data(), strides.data(), extv.data(), err);
    if (err[0] == 2)  // integer x % 0 (fg_mod_e): err[3] = node id in plan.program
      scalar::throw_mod_by_zero(plan.program.nodes[err[3]].loc);
    if (err[0]) {
      const Parameter& P = p.params[err[1]];
      throw CallError("index " + std::to_string(err[3]) + " is out of range [0, " +
                      std::to_string(ext.at(p.dims[P.dims[err[2]]])) + ") in a read of parameter '" +
                      P.name + "' (dimension '" + p.dims[P.dims[err[2]]] + "')");
    }
  }
  TensorMap out;
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const PlanBuffer& B = plan.buffers[b];
    if (B.kind != PlanBuffer::Output) continue;
    std::vector<int64_t> shape;
    for (int d : B.dims) shape.push_back(extv[d]);
    Tensor t(B.type, shape);
    const std::vector<int64_t>& src = owned[b];
    if (B.type == DType::i64) {
      if (!src.empty()) std::memcpy(t.data(), src.data(), 8 * src.size());
    } else if (B.type == DType::i32) {  // i32 values are already wrapped to 32 bits
      auto* dst = static_cast<int32_t*>(t.data());
      for (size_t i = 0; i < src.size(); ++i) dst[i] = static_cast<int32_t>(src[i]);
    } else {
      for (size_t i = 0; i < src.size(); ++i) {
        double v;
        std::memcpy(&v, &src[i], 8);
        t.set(static_cast<int64_t>(i), v);
      }
    }
    out[B.name] = t;
  }
  return out;
}

}  // namespace flashgen
