// run_cpu: the CPU backend's host side. Compiles the plan's C++ with the host compiler (disk
// cached, runtime/host_compiler.h), binds inputs by pointer + strides (any strides; inputs of
// another dtype are converted first), runs the kernels in order, reports out-of-range gathers
// as CallError naming the parameter, and returns outputs of their declared dtype.
// Test: tests/cpu/cpu_examples_test.cpp.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include "ir/scalar_semantics.h"
#include "codegen/cpu.h"
#include "compiler/cpu_call.h"
#include "compiler/pipeline.h"
#include "flashgen/error.h"
#include "runtime/host_compiler.h"

namespace flashgen {

namespace {

std::mutex& cache_mutex() {
  static std::mutex mu;
  return mu;
}
// Compiled programs of this process, by the program's structural text (and the build variant).
std::map<std::string, std::shared_ptr<const CpuCompiled>>& program_cache() {
  static std::map<std::string, std::shared_ptr<const CpuCompiled>> cache;
  return cache;
}

std::string cache_key(const Program& p, bool count_tiles, const std::vector<std::string>& flags) {
  std::string key = p.str();
  if (count_tiles) key += "\ncount_tiles";
  for (const std::string& f : flags) key += "\n" + f;
  return key;
}

// Compiles `programs` into one host library and caches each under its key.
void compile_into_cache(const std::vector<Program>& programs, bool count_tiles,
                        const std::vector<std::string>& extra_flags) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<CpuCompiled>> cps;
  std::string source = emit_cpu_prelude() + "\n";
  std::set<std::string> names;
  for (const Program& p : programs) {
    if (!names.insert(p.name).second)
      throw BackendError("precompile_cpu: two programs named '" + p.name + "'");
    auto cp = std::make_shared<CpuCompiled>();
    cp->plan = compile_program(p, CompileOptions{}).plan;
    cp->count_tiles = count_tiles;
    source += emit_cpu_kernels(cp->plan);
    cps.push_back(cp);
  }
  HostCompileOptions hopt;
  hopt.extra_flags = extra_flags;
  if (count_tiles) hopt.extra_flags.push_back("-DFG_COUNT_TILES");
  std::shared_ptr<const HostLibrary> lib = host_compile(source, hopt);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(cache_mutex());
  for (size_t i = 0; i < programs.size(); ++i) {
    cps[i]->lib = lib;
    cps[i]->compile_ms = ms;
    for (const PlanKernel& k : cps[i]->plan.kernels)
      cps[i]->fns.push_back(lib->function<CpuKernelFn>(k.name));
    program_cache()[cache_key(programs[i], count_tiles, extra_flags)] = cps[i];
  }
}

}  // namespace

// The builds later run_cpu calls use, by program (precompile_cpu's, whatever their flags);
// cpu_load's keys stay exact, so profile never times a build of other flags than it asked for.
std::map<std::string, std::shared_ptr<const CpuCompiled>>& run_builds() {
  static std::map<std::string, std::shared_ptr<const CpuCompiled>> builds;
  return builds;
}

void precompile_cpu(const std::vector<Program>& programs,
                    const std::vector<std::string>& extra_flags) {
  compile_into_cache(programs, false, extra_flags);
  std::lock_guard<std::mutex> lock(cache_mutex());
  for (const Program& p : programs)
    run_builds()[p.str()] = program_cache().at(cache_key(p, false, extra_flags));
}

std::shared_ptr<const CpuCompiled> cpu_load(const Program& p, bool count_tiles,
                                            const std::vector<std::string>& extra_flags,
                                            bool* from_process_cache) {
  const std::string key = cache_key(p, count_tiles, extra_flags);
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    auto it = program_cache().find(key);
    if (from_process_cache) *from_process_cache = it != program_cache().end();
    if (it != program_cache().end()) return it->second;
  }
  compile_into_cache({p}, count_tiles, extra_flags);
  std::lock_guard<std::mutex> lock(cache_mutex());
  return program_cache().at(key);
}

CpuBound cpu_bind(const CpuCompiled& c, const Program& p, const TensorMap& inputs,
                  const Extents& extra) {
  CpuBound b;
  b.ext = bind_extents(p, inputs, extra);
  // The one conversion of inputs to their declared types (integer values must fit).
  const TensorMap prepared = prepare_inputs(p, inputs);
  const Plan& plan = c.plan;
  for (const std::string& d : p.dims) b.extv.push_back(b.ext.at(d));
  const std::vector<int64_t>& extv = b.extv;
  b.bufs.assign(plan.buffers.size(), nullptr);
  // Written buffers: 8 bytes per element, int64 for integer dtypes and double otherwise (the
  // kernels' out_storage in codegen/cpu.cpp).
  b.owned.resize(plan.buffers.size());
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const PlanBuffer& B = plan.buffers[i];
    if (B.kind == PlanBuffer::Input) {
      const Tensor& given = prepared.at(B.name);
      b.held.push_back(given.dtype() == B.type ? given : given.to(B.type));
      for (int64_t s : b.held.back().strides()) b.strides.push_back(s);
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
      for (int j = static_cast<int>(B.dims.size()) - 1; j >= 0; --j) {
        st[j] = acc;
        acc *= extv[B.dims[j]];
      }
      check_fits_memory(static_cast<uint64_t>(n) * 8,
                        "the CPU backend's buffer for '" + B.name + "'");
      try {
        b.owned[i].assign(static_cast<size_t>(n), 0);  // 0 and 0.0 share their bits
      } catch (const std::bad_alloc&) {
        throw BackendError("out of memory: the CPU backend needs " + std::to_string(8 * n) +
                           " bytes for " + (B.kind == PlanBuffer::Output ? "output '" : "'") +
                           B.name + "'");
      }
      b.bufs[i] = b.owned[i].data();
      b.strides.insert(b.strides.end(), st.begin(), st.end());
    }
  }
  // held may reallocate: take data pointers after all inputs are in place.
  size_t hi = 0;
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (plan.buffers[i].kind == PlanBuffer::Input)
      b.bufs[i] = const_cast<void*>(b.held[hi++].data());
  return b;
}

TileCounts cpu_run_kernel(const CpuCompiled& c, CpuBound& b, const Program& p, int k) {
  // [0] error kind, [1..3] what; [4..6] the tile counts of a FG_COUNT_TILES build.
  int64_t err[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  c.fns[k](b.bufs.data(), b.strides.data(), b.extv.data(), err);
  if (err[0] == 2)  // integer x % 0 (fg_mod_e): err[3] = node id in plan.program
    scalar::throw_mod_by_zero(c.plan.program.nodes[err[3]].loc);
  if (err[0]) {
    const Parameter& P = p.params[err[1]];
    throw CallError("index " + std::to_string(err[3]) + " is out of range [0, " +
                    std::to_string(b.ext.at(p.dims[P.dims[err[2]]])) +
                    ") in a read of parameter '" + P.name + "' (dimension '" +
                    p.dims[P.dims[err[2]]] + "')");
  }
  return {err[4], err[5], err[6]};
}

void cpu_write_outputs(const CpuCompiled& c, const CpuBound& b, TensorMap& outputs) {
  const Plan& plan = c.plan;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const PlanBuffer& B = plan.buffers[i];
    if (B.kind != PlanBuffer::Output) continue;
    Tensor& t = outputs.at(B.name);
    const std::vector<int64_t>& src = b.owned[i];
    const int64_t n = static_cast<int64_t>(src.size());
    if (B.type == DType::i64 && t.is_contiguous()) {
      if (n) std::memcpy(t.data(), src.data(), 8 * src.size());
    } else if (is_integer(B.type)) {  // i32 values are already wrapped to 32 bits
      for (int64_t j = 0; j < n; ++j) t.set_int(j, src[static_cast<size_t>(j)]);
    } else {
      for (int64_t j = 0; j < n; ++j) {
        double v;
        std::memcpy(&v, &src[static_cast<size_t>(j)], 8);
        t.set(j, v);
      }
    }
  }
}

TensorMap cpu_outputs(const CpuCompiled& c, const CpuBound& b) {
  TensorMap out;
  for (size_t i = 0; i < c.plan.buffers.size(); ++i) {
    const PlanBuffer& B = c.plan.buffers[i];
    if (B.kind != PlanBuffer::Output) continue;
    std::vector<int64_t> shape;
    for (int d : B.dims) shape.push_back(b.extv[d]);
    out[B.name] = Tensor(B.type, shape);
  }
  cpu_write_outputs(c, b, out);
  return out;
}

namespace {
// A call's kernels run to completion (the bound buffers hold the outputs).
std::pair<std::shared_ptr<const CpuCompiled>, CpuBound> cpu_call(const Program& p,
                                                                 const TensorMap& inputs,
                                                                 const Extents& extra) {
  bind_extents(p, inputs, extra);  // a bad call fails before anything is compiled
  std::shared_ptr<const CpuCompiled> c;
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    auto it = run_builds().find(p.str());
    if (it != run_builds().end()) c = it->second;
  }
  if (!c) c = cpu_load(p);
  CpuBound b = cpu_bind(*c, p, inputs, extra);
  for (size_t k = 0; k < c->fns.size(); ++k) cpu_run_kernel(*c, b, p, static_cast<int>(k));
  return {c, std::move(b)};
}
}  // namespace

TensorMap run_cpu(const Program& p, const TensorMap& inputs, const Extents& extra) {
  auto [c, b] = cpu_call(p, inputs, extra);
  return cpu_outputs(*c, b);
}

void run_cpu_into(const Program& p, const TensorMap& inputs, const Extents& extra,
                  TensorMap& outputs) {
  auto [c, b] = cpu_call(p, inputs, extra);
  cpu_write_outputs(*c, b, outputs);
}

}  // namespace flashgen
