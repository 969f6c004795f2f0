// run_cuda: the CUDA backend's host side. Compiles a program through the whole pipeline for the
// running GPU (compile_to_target: plan, lowered kernels on the tensor-core or the element path,
// one CUDA source each) with NVRTC (sm_90a on Hopper, sm_<cc> otherwise; disk-cached by
// runtime/nvrtc), loads the kernels once per (program, head dims, arch) in this process, uploads
// inputs packed in their declared dtype and dim order, poisons outputs (NaN) so an unwritten
// element cannot pass a test, launches the kernels in plan order (intermediates in device
// memory), reports out-of-range gathers as CallError naming the parameter, and downloads
// outputs of their declared dtype. bench_cuda times the same launches with device events.
// Tests: tests/gpu/cuda_examples_test.cpp, tests/gpu/element_gpu_test.cpp (GPU),
// tests/cuda/nvrtc_examples_test.cpp, tests/cuda/element_emulation_test.cpp (host emulation).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <map>
#include <future>
#include <memory>
#include <mutex>
#include <system_error>

#include "codegen/cuda/embedded_headers.h"
#include "lower/launch.h"
#include "codegen/loop_kernel.h"
#include "codegen/target.h"
#include "compiler/cuda_call.h"
#include "compiler/pipeline.h"
#include "plan/cost.h"
#include "flashgen/error.h"
#include "ir/scalar_semantics.h"
#include "runtime/compile_cache.h"
#include "runtime/cuda_driver.h"
#include "runtime/nvrtc.h"

namespace flashgen {

namespace {

Plan cuda_plan(const Program& p, Target target, const Extents& sizes) {
  CompileOptions opt;
  opt.target = target;
  opt.sizes = sizes;
  return compile_program(p, opt).plan;
}

NvrtcOptions nvrtc_options(const std::string& arch, const LoweredKernel& lk, CudaBuild build,
                           bool check_gathers = false) {
  NvrtcOptions o;
  o.arch = arch;
  o.options = {"-std=c++17", "-default-device", "--disable-warnings"};
  // The tensor-core path: fast math (approximate division/exp/tanh, errors ~1e-6 relative, far
  // inside bf16's 4e-3; IEEE division by non-constant scales costs as much as the softmax).
  // The element path computes at f32 accuracy, as the CPU backend does.
  if (lk.path == LoweredKernel::Path::tensor_core) o.options.push_back("--use_fast_math");
  const std::string& name = lk.entry;
  o.cuda_include = false;  // the tile library includes nothing
  o.name = name + ".cu";
  int n = 0;
  const cuda::EmbeddedHeader* h = cuda::embedded_headers(&n);
  for (int i = 0; i < n; ++i) o.headers.push_back({h[i].name, h[i].source});
  if (build == CudaBuild::count_tiles) o.options.push_back("-DFG_COUNT_TILES");
  if (build == CudaBuild::careful) o.options.push_back("-DFG_CAREFUL");
  // Gathers proved in range under extent conditions (Sm80Launch::range_conditions) are checked
  // per element only in the careful build and in builds for calls that fail a condition.
  if (build == CudaBuild::careful || check_gathers) o.options.push_back("-DFG_CHECK_GATHERS");
  return o;
}

std::mutex g_mu;
int g_loads = 0;

}  // namespace

std::vector<std::string> few_rows_build_options() {
  return {"-DFG_ONLY_FEW", "--ptxas-options=-O1"};
}

namespace {

// The pipeline's options for the running GPU: its target and shared memory, the head extents.
// A Hopper GPU (compute capability 9.x) gets the cuda-sm90 kernels (wgmma), others the sm80
// path; FLASHGEN_CUDA_PATH=sm80 forces the sm80 path on Hopper too (both stay tested there).
CompileOptions cuda_options(const Extents& heads) {
  const CudaDeviceInfo& dev = cuda_device_info();
  CompileOptions opt;
  const char* force = std::getenv("FLASHGEN_CUDA_PATH");
  if (force && *force && std::string(force) != "sm80" && std::string(force) != "auto")
    throw BackendError("FLASHGEN_CUDA_PATH is '" + std::string(force) + "' (sm80 or auto)");
  const bool sm80 = force && std::string(force) == "sm80";
  opt.target = dev.cc_major == 9 && !sm80 ? Target::cuda_sm90 : Target::cuda_sm80;
  opt.sizes = heads;
  opt.smem_per_sm = dev.max_smem_per_sm;
  opt.smem_per_block = dev.max_smem_per_block_optin;
  return opt;
}

// Whether the extents of `ext` satisfy every range condition of L's kernels (a dim `ext` does
// not name counts as satisfied: head extents alone, before a call binds the rest).
bool range_conditions_hold(const CudaLoaded& L, const Program& p, const Extents& ext) {
  std::vector<int64_t> extv;
  std::vector<bool> known;
  for (const std::string& d : p.dims) {
    auto it = ext.find(d);
    extv.push_back(it == ext.end() ? 0 : it->second);
    known.push_back(it != ext.end());
  }
  for (const CudaLoadedKernel& k : L.kernels) {
    if (k.low.path != LoweredKernel::Path::tensor_core) continue;
    for (const ExtentCondition& c : k.low.tensor_core.launch.range_conditions)
      if ((c.dim < 0 || known[c.dim]) && known[c.target] && !c.holds(extv)) return false;
  }
  return true;
}

// Starts compiling the build of tensor-core kernel `k` that a call of extents `ext` launches
// where that is one compiled at its first call (the few-rows kernel, or the walking build where
// it has its own), so that it compiles beside the main builds; nothing where an extent is
// missing or zero.
// Whether a call of extents `ext` runs the program's one-kernel build instead of the kernels per
// softmax cluster of `split` (decode_runs_one_kernel; never for the one-kernel build itself).
static bool call_runs_one_kernel(const LoweredCuda::ClusterSplit& split, bool one_kernel,
                                 const Program& p, const Extents& ext) {
  if (one_kernel || split.row_dim < 0) return false;
  auto rows = ext.find(p.dims.at(split.row_dim));
  return rows != ext.end() && decode_runs_one_kernel(split, rows->second);
}

static void prefetch_call_build(const CudaLoadedKernel& k, const Program& p, const Extents& ext) {
  const Sm80Launch& la = k.low.tensor_core.launch;
  auto extent = [&](int d) {
    auto it = ext.find(p.dims.at(d));
    return it == ext.end() ? int64_t{0} : it->second;
  };
  int64_t P = 1;
  for (int d : la.par_dims) P *= extent(d);
  const int64_t M = extent(la.row_dim), keys = extent(la.key_dim);
  if (P <= 0 || M <= 0 || keys <= 0) return;
  const KeySplit ks = choose_key_split(la, M, P, keys, cuda_device_info().sm_count);
  if (ks.few) k.few_rows->prefetch();
  else if (ks.walk && k.walking) k.walking->prefetch();
}

std::shared_ptr<const CudaLoaded> cuda_load_build(const Program& p, const Extents& ext,
                                                  CudaBuild build, bool check_gathers,
                                                  bool* from_process_cache,
                                                  bool one_kernel = false) {
  static std::map<std::string, std::shared_ptr<const CudaLoaded>> cache;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string arch = cuda_device_arch();
  const Extents heads = head_extents(cuda_plan(p, Target::cuda_sm80, {}), ext);
  CompileOptions opt = cuda_options(heads);
  opt.cluster_split = !one_kernel;
  std::string key = p.str() + "\n" + arch + " " + target_name(opt.target) + " smem " +
                    std::to_string(opt.smem_per_sm) + "/" +
                    std::to_string(opt.smem_per_block) +
                    (build == CudaBuild::count_tiles ? " count_tiles"
                     : build == CudaBuild::careful   ? " careful"
                                                     : "") +
                    (check_gathers ? " check_gathers" : "") + (one_kernel ? " one_kernel" : "");
  for (const auto& [n, e] : heads) key += "\n" + n + "=" + std::to_string(e);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = cache.find(key);
    if (from_process_cache) *from_process_cache = it != cache.end();
    if (it != cache.end()) return it->second;
  }
  Compiled c = compile_to_target(p, opt);
  auto L = std::make_shared<CudaLoaded>();
  L->plan = std::move(c.plan);
  L->arch = arch;
  L->from_disk_cache = true;
  // The main build of every kernel, compiled at once (nvrtc_compile_each); the builds compiled
  // at their first call (LazyCudaKernel) that this call runs start beside them.
  std::vector<NvrtcJob> mains;
  for (size_t i = 0; i < c.lowered.kernels.size(); ++i) {
    const LoweredKernel& lk = c.lowered.kernels[i];
    const bool tc = lk.path == LoweredKernel::Path::tensor_core;
    NvrtcOptions o = nvrtc_options(arch, lk, build, check_gathers);
    NvrtcOptions few = o;
    if (tc) {
      o.options.push_back("-DFG_ONLY_MAIN");
      for (const std::string& f : few_rows_build_options()) few.options.push_back(f);
    }
    mains.push_back({c.sources[i], o});
    CudaLoadedKernel k;
    k.low = lk;
    if (tc) {
      if (!lk.tensor_core.launch.tma.empty()) {
        NvrtcOptions cp = o;
        cp.options.push_back("-DFG_KV_CP_ASYNC");
        k.cp_async = std::make_shared<const LazyCudaKernel>(c.sources[i], std::move(cp), lk.entry);
      }
      const Sm80Launch& la = lk.tensor_core.launch;
      if (!la.walk_entry.empty()) {
        NvrtcOptions walk = nvrtc_options(arch, lk, build, check_gathers);
        walk.options.push_back("-DFG_ONLY_WALK");
        if (!la.tma.empty()) {
          NvrtcOptions cp = walk;
          cp.options.push_back("-DFG_KV_CP_ASYNC");
          k.walking_cp_async =
              std::make_shared<const LazyCudaKernel>(c.sources[i], std::move(cp), la.walk_entry);
        }
        k.walking =
            std::make_shared<const LazyCudaKernel>(c.sources[i], std::move(walk), la.walk_entry);
      }
      k.few_rows = std::make_shared<const LazyCudaKernel>(
          c.sources[i], std::move(few), la.few_entry, la.few_combine_entry);
    }
    L->kernels.push_back(std::move(k));
  }
  // not where the call runs another build: a decode call the one-kernel build
  // (cuda_load_for_call), a call out of a range condition the build checking every gather
  if ((check_gathers || range_conditions_hold(*L, p, ext)) &&
      !call_runs_one_kernel(c.lowered.cluster_split, one_kernel, p, ext))
    for (const CudaLoadedKernel& k : L->kernels)
      if (k.low.path == LoweredKernel::Path::tensor_core) prefetch_call_build(k, p, ext);
  const std::vector<Cubin> cubins = nvrtc_compile_each(mains);
  for (size_t i = 0; i < L->kernels.size(); ++i) {
    CudaLoadedKernel& k = L->kernels[i];
    CudaModule mod(cubins[i].bytes);
    k.kernel = mod.kernel(k.low.entry);
    k.nvrtc_ms = cubins[i].compile_ms;
    if (k.low.path == LoweredKernel::Path::tensor_core) {
      k.combine = mod.kernel(k.low.tensor_core.launch.combine_entry);
      if (!k.low.tensor_core.launch.split.empty())
        k.split = mod.kernel(k.low.tensor_core.launch.split_entry);
    }
    L->from_disk_cache = L->from_disk_cache && cubins[i].from_cache;
  }
  L->compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  L->build = build;
  L->checks_gathers = check_gathers || build == CudaBuild::careful;
  L->cluster_split = c.lowered.cluster_split;
  L->storage = c.lowered.storage;
  L->one_kernel = one_kernel;
  L->one_kernel_build = std::make_shared<CudaLoaded::Sibling>();
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_loads;
  cache[key] = L;
  return L;
}

}  // namespace

std::vector<TmaMapShape> tma_map_shapes(const Sm80Launch& la, const std::vector<DevicePtr>& ptrs,
                                        const std::vector<std::vector<int64_t>>& strides,
                                        const std::vector<int64_t>& extv, std::string* why) {
  std::vector<TmaMapShape> out;
  auto no = [&](const std::string& w) {
    if (why) *why = w;
    return std::vector<TmaMapShape>{};
  };
  constexpr uint64_t kDimMax = uint64_t{1} << 32, kStrideMax = uint64_t{1} << 40;
  for (const Sm80Launch::TmaOperand& op : la.tma) {
    TmaMapShape m;
    m.base = ptrs.at(op.buffer);
    if (m.base % 16 != 0) return no("a base address that is not a multiple of 16 bytes");
    const std::vector<int64_t>& st = strides.at(op.buffer);
    if (st.at(op.pos[0]) != 1) return no("a column stride other than 1");
    for (size_t j = 0; j < op.pos.size(); ++j) {
      const int64_t e = extv.at(op.dims[j]);
      if (e < 1 || static_cast<uint64_t>(e) > kDimMax) return no("an extent of 0 or past 2^32");
      m.dims[j] = static_cast<uint64_t>(e);
      if (j == 0) continue;
      const int64_t s = st.at(op.pos[j]);
      if (s <= 0 || s >= static_cast<int64_t>(kStrideMax / 2) || (2 * s) % 16 != 0)
        return no("a stride that is not a positive multiple of 16 bytes below 2^40");
      m.strides_bytes[j - 1] = static_cast<uint64_t>(2 * s);
    }
    for (size_t j = op.pos.size(); j < 5; ++j) m.strides_bytes[j - 1] = m.strides_bytes[j - 2];
    m.box[0] = 64;
    m.box[1] = static_cast<uint32_t>(la.block_n);
    out.push_back(m);
  }
  return out;
}

const std::string& launched_entry(const CudaLoadedKernel& k, const CudaBoundKernel& bk) {
  if (bk.few) return k.low.tensor_core.launch.few_entry;
  if (bk.walk && k.walking) return k.low.tensor_core.launch.walk_entry;
  return k.low.entry;
}

const CudaKernel& launched_combine(const CudaLoadedKernel& k, const CudaBoundKernel& bk) {
  return bk.few ? k.few_rows->second() : k.combine;
}

const LazyCudaKernel* launched_build(const CudaLoadedKernel& k, const CudaBoundKernel& bk) {
  if (bk.few) return k.few_rows.get();
  if (bk.walk && k.walking)  // (without a build of its own, the main build walks)
    return k.walking_cp_async && !bk.tma ? k.walking_cp_async.get() : k.walking.get();
  if (k.cp_async && !bk.tma) return k.cp_async.get();
  return nullptr;
}

const CudaKernel& launched_kernel(const CudaLoadedKernel& k, const CudaBoundKernel& bk) {
  const LazyCudaKernel* build = launched_build(k, bk);
  return build ? build->get() : k.kernel;
}

void cuda_prepare(const CudaLoaded& L, const CudaBound& b) {
  for (size_t i = 0; i < L.kernels.size() && i < b.kernels.size(); ++i)
    if (L.kernels[i].low.path == LoweredKernel::Path::tensor_core && !b.kernels[i].empty)
      launched_kernel(L.kernels[i], b.kernels[i]);
}

void LazyCudaKernel::prefetch() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (done_ || pending_.valid()) return;
  try {
    pending_ = std::async(std::launch::async, [this] {
                 return nvrtc_compile(source_, options_);
               }).share();
  } catch (const std::system_error&) {
    // no thread to start: get() compiles it, as without a prefetch
  }
}

const CudaKernel& LazyCudaKernel::get() const {
  std::call_once(once_, [this] {
    std::shared_future<Cubin> pending;
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending = pending_;
    }
    Cubin cubin;
    try {
      cubin = pending.valid() ? pending.get() : nvrtc_compile(source_, options_);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      pending_ = {};  // the next get() compiles again
      throw;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_ = {};  // (the cubin's bytes are loaded below)
    }
    nvrtc_ms_ = cubin.compile_ms;
    CudaModule mod(cubin.bytes);
    kernel_ = mod.kernel(entry_);
    if (!second_entry_.empty()) second_ = mod.kernel(second_entry_);
    done_ = true;
  });
  return kernel_;
}

const CudaKernel& LazyCudaKernel::second() const {
  get();
  return second_;
}

bool LazyCudaKernel::compiled() const { return done_; }

std::shared_ptr<const CudaLoaded> cuda_load(const Program& p, const Extents& ext, CudaBuild build,
                                            bool* from_process_cache) {
  return cuda_load_for_call(cuda_load_build(p, ext, build, false, from_process_cache), p, ext,
                            from_process_cache);
}

std::shared_ptr<const CudaLoaded> cuda_load_for_call(std::shared_ptr<const CudaLoaded> L,
                                                     const Program& p, const Extents& ext,
                                                     bool* from_process_cache) {
  // A decode call of a program split per softmax cluster runs its one kernel where that reads
  // fewer K and V elements a key (decode_runs_one_kernel); that build is loaded once per L
  // (a launch cache keeps L: no planning per call).
  if (call_runs_one_kernel(L->cluster_split, L->one_kernel, p, ext)) {
    const std::shared_ptr<const CudaLoaded> split = L;
    std::call_once(split->one_kernel_build->once, [&] {
      split->one_kernel_build->L = cuda_load_build(p, ext, split->build, split->checks_gathers,
                                                   nullptr, true);
    });
    L = split->one_kernel_build->L;
  }
  // then the build that checks every gather where the call fails a range condition of its own
  if (L->checks_gathers || range_conditions_hold(*L, p, ext)) return L;
  return cuda_load_build(p, ext, L->build, true, from_process_cache, L->one_kernel);
}

Dim3 sm80_grid(const Sm80Launch& la, const KeySplit& ks, int64_t m_tiles, int64_t P,
               int sm_count) {
  if (ks.walk) {
    const int64_t resident = static_cast<int64_t>(sm_count) * la.min_blocks;
    return {static_cast<unsigned>(std::max<int64_t>(1, std::min(m_tiles * P, resident))), 1, 1};
  }
  return {static_cast<unsigned>(m_tiles), static_cast<unsigned>(std::min<int64_t>(P, 65535)),
          static_cast<unsigned>((P + 65534) / 65535)};
}

namespace {

// The call's extents in the program's dim order; rows, keys and the element code's integer
// indices are 32-bit on the device (the emitter narrows index arithmetic by this bound:
// TargetTable::max_extent): every dim of an element kernel, the template's int32_dims.
std::vector<int64_t> cuda_extents(const CudaLoaded& L, const Program& p, const Extents& ext) {
  std::vector<int64_t> extv;
  for (const std::string& d : p.dims) {
    auto it = ext.find(d);
    extv.push_back(it == ext.end() ? 0 : it->second);
  }
  std::vector<int> narrow;
  for (const CudaLoadedKernel& k : L.kernels) {
    if (k.low.path == LoweredKernel::Path::tensor_core)
      narrow.insert(narrow.end(), k.low.tensor_core.launch.int32_dims.begin(),
                    k.low.tensor_core.launch.int32_dims.end());
    else
      for (size_t d = 0; d < p.dims.size(); ++d) narrow.push_back(static_cast<int>(d));
  }
  const int64_t most = target_table(Target::cuda_sm80).max_extent;
  for (int d : narrow)
    if (extv[d] > most)
      throw CallError("dimension '" + p.dims[d] + "' has extent " + std::to_string(extv[d]) +
                      "; the CUDA backend indexes it with 32-bit ints (extents up to 2^30)");
  // (an integer count summed in f32 on the tensor cores: exact up to count_keys_limit keys)
  for (const CudaLoadedKernel& k : L.kernels) {
    if (k.low.path != LoweredKernel::Path::tensor_core) continue;
    const int64_t limit = k.low.tensor_core.launch.count_keys_limit;
    const int key = L.plan.kernels[k.low.plan_kernel].red_dim;
    if (limit > 0 && key >= 0 && extv[key] > limit)
      throw CallError("dimension '" + p.dims[key] + "' has extent " +
                      std::to_string(extv[key]) + "; kernel " + k.low.tensor_core.launch.entry +
                      " counts over it in f32 on the tensor-core path, exact up to " +
                      std::to_string(limit) + " (2^24)");
  }
  return extv;
}

// A buffer's shape at the call's extents (CallError past 2^60 elements).
std::vector<int64_t> buffer_shape(const PlanBuffer& B, const std::vector<int64_t>& extv) {
  std::vector<int64_t> shape;
  for (int d : B.dims) shape.push_back(extv[d]);
  if (checked_element_count(shape) < 0) {
    throw CallError("the CUDA backend cannot hold '" + B.name + "' of shape " +
                    shape_text(shape) + ": more than 2^" + std::to_string(kMaxElementsLog2) +
                    " elements");
  }
  return shape;
}

// Bytes of buffer `b` in device memory, its elements held as lowering chose
// (LoweredCuda::storage: inputs and outputs in their declared dtype).
size_t buffer_bytes(const CudaLoaded& L, int b, const std::vector<int64_t>& extv) {
  const PlanBuffer& B = L.plan.buffers[b];
  const int64_t n = checked_element_count(buffer_shape(B, extv));
  const int64_t w = dtype_bytes(L.storage.at(b));
  if (n > (int64_t{1} << 62) / w)
    throw CallError("the CUDA backend cannot hold '" + B.name + "': too many bytes");
  return static_cast<size_t>(n * w);
}

// Packed strides of buffer i (in elements), or the given ones.
std::vector<int64_t> strides_of(const PlanBuffer& B, const std::vector<int64_t>& extv,
                                const std::vector<int64_t>& given) {
  if (!given.empty()) return given;
  const std::vector<int64_t> shape = buffer_shape(B, extv);
  std::vector<int64_t> st(shape.size());
  int64_t acc = 1;  // at most the element count: no overflow
  for (size_t j = shape.size(); j-- > 0;) st[j] = acc, acc *= shape[j];
  return st;
}

// "b = 2, h = 16, m = 4096, ..." (the extents of the dims `dims`), for errors of calls whose
// extents overflow what a kernel can address.
std::vector<int> dims_with(std::vector<int> dims, int d) {
  dims.push_back(d);
  return dims;
}
std::vector<int> all_dims(const Program& p) {
  std::vector<int> dims(p.dims.size());
  for (size_t d = 0; d < dims.size(); ++d) dims[d] = static_cast<int>(d);
  return dims;
}
std::string extents_text(const Program& p, const std::vector<int64_t>& extv,
                         const std::vector<int>& dims) {
  std::string s;
  for (size_t d = 0; d < extv.size() && d < p.dims.size(); ++d) {
    if (std::find(dims.begin(), dims.end(), static_cast<int>(d)) == dims.end()) continue;
    s += (s.empty() ? "" : ", ") + p.dims[d] + " = " + std::to_string(extv[d]);
  }
  return s;
}

// The words of Params after `part` of a kernel with TMA operands: from the next 64-byte
// boundary one 16-word map per operand; zeros, and bk.tma false (the kernel built to copy by
// cp.async runs), unless `use` and every map fits (the few-rows kernel and the combine kernel
// read the same Params and no map).
void bind_tma(const Sm80Launch& la, const std::vector<DevicePtr>& ptrs,
              const std::vector<std::vector<int64_t>>& strides, const std::vector<int64_t>& extv,
              bool use, CudaBoundKernel& bk) {
  const size_t maps_at = la.params_maps_word();
  bk.params.resize(la.params_words(), 0);
  if (!use) return;
  if (extv.at(la.key_dim) == 0) {  // no key tiles, no copies: no maps needed
    bk.tma = true;
    return;
  }
  const std::vector<TmaMapShape> shapes = tma_map_shapes(la, ptrs, strides, extv, nullptr);
  if (shapes.empty()) return;
  std::vector<CudaTensorMap> maps;
  try {
    for (const TmaMapShape& m : shapes)
      maps.push_back(cuda_tensor_map_16bit(m.base, 5, m.dims, m.strides_bytes, m.box, true));
  } catch (const BackendError&) {
    return;  // a map the driver refuses: cp.async, as for tensors no map describes
  }
  for (size_t i = 0; i < maps.size(); ++i)
    std::memcpy(&bk.params[maps_at + 16 * i], maps[i].words, sizeof maps[i].words);
  bk.tma = true;
}

}  // namespace

void bind_sm80(const Sm80Launch& la, const Program& p, const std::vector<DevicePtr>& ptrs,
               const std::vector<std::vector<int64_t>>& strides, DevicePtr err,
               DevicePtr scratch, const std::vector<int64_t>& extv, int sm_count,
               CudaBoundKernel& bk) {
  const int NB = la.num_buffers, R = la.max_rank;
  const size_t ext0 = NB + NB * R, err_at = ext0 + la.num_dims;
  bk.params.assign(la.params_base_words(), 0);  // err_at + 4 words, then the TMA maps
  for (size_t i = 0; i < ptrs.size(); ++i) {  // the plan's buffers (split operands below)
    for (size_t j = 0; j < strides[i].size(); ++j) bk.params[NB + i * R + j] = strides[i][j];
    bk.params[i] = static_cast<int64_t>(ptrs[i]);
  }
  for (int d = 0; d < la.num_dims; ++d) bk.params[ext0 + d] = extv[d];
  bk.params[err_at] = static_cast<int64_t>(err);
  int64_t P = 1;
  for (int d : la.par_dims) P *= extv[d];
  int64_t M = extv[la.row_dim];
  if (P == 0 || M == 0) {
    bk.empty = true;
    return;
  }
  const KeySplit ks = choose_key_split(la, M, P, extv[la.key_dim], sm_count);
  P *= la.value_split_of(ks.few);  // (each kernel its own value split)
  bk.few = ks.few;
  bk.key_split = ks.split;
  bk.smem = ks.few ? la.few_smem_bytes : la.smem_bytes;
  const int block_m = ks.few ? 16 : la.block_m;
  const int64_t m_tiles = (M + block_m - 1) / block_m;
  bk.params[err_at + 1] = ks.split;
  // Operands in pieces: each split operand's pieces at the start of the scratch (packed over its
  // dims, a row of pieces x its innermost extent), bound to its Params slot; the split kernel
  // writes them from the buffer before the kernel runs. The partial states follow.
  int64_t at = 0;
  for (const Sm80Launch::SplitOperand& o : la.split) {
    const int rank = static_cast<int>(o.dims.size());
    std::vector<int64_t> ext(rank), dst(rank);
    int64_t rows = 1;
    for (int j = 0; j < rank; ++j) ext[j] = extv[o.dims[j]];
    for (int j = 0; j + 1 < rank; ++j) rows *= ext[j];  // (the buffer exists: no overflow)
    int64_t acc = 1;
    for (int j = rank; j-- > 0;) {
      dst[j] = acc;
      acc *= j == rank - 1 ? ext[j] * la.pieces : ext[j];
    }
    if (acc > (INT64_MAX / 4 - at) / 2)
      throw CallError("the bf16 pieces of input '" + o.name + "' overflow 64-bit offsets at " +
                      extents_text(p, extv, o.dims));
    bk.params[o.slot] = scratch ? static_cast<int64_t>(scratch) + at : 0;
    for (int j = 0; j < rank; ++j) bk.params[NB + o.slot * R + j] = dst[j];
    if (acc > 0) {
      CudaBoundKernel::Split sp;
      // fg::SplitArgs (fg_tile.cuh): src, dst, dtype, rank, pieces, rows, then ext[8], the
      // source's strides[8] and the pieces' strides[8]
      sp.args.assign(6 + 3 * 8, 0);
      sp.args[0] = static_cast<int64_t>(ptrs.at(o.buffer));
      sp.args[1] = bk.params[o.slot];
      sp.args[2] = o.type == DType::f32      ? 2
                   : o.type == DType::f16    ? 1
                   : o.type == DType::f8e4m3 ? 3
                   : o.type == DType::f8e5m2 ? 4
                                             : 0;
      sp.args[3] = rank;
      sp.args[4] = la.pieces;
      sp.args[5] = rows;
      for (int j = 0; j < rank; ++j) {
        sp.args[6 + j] = ext[j];
        sp.args[14 + j] = strides.at(o.buffer).at(j);
        sp.args[22 + j] = dst[j];
      }
      const int64_t blocks = std::min<int64_t>((rows + 7) / 8, int64_t{sm_count} * 16);
      sp.grid = {static_cast<unsigned>(std::max<int64_t>(blocks, 1)), 1, 1};
      sp.block = {256, 1, 1};
      bk.splits.push_back(std::move(sp));
    }
    at += (acc * 2 + 255) / 256 * 256;
  }
  bk.scratch_bytes = at;
  bk.params[err_at + 2] = scratch ? static_cast<int64_t>(scratch) + at : 0;
  bk.params[err_at + 3] = ks.walk ? m_tiles : 0;
  bk.walk = ks.walk;
  if (!la.tma.empty()) bind_tma(la, ptrs, strides, extv, !ks.few, bk);
  if (ks.split > 1) {
    const int64_t rows = P * ks.split * M;  // below 2^31 * 64 * 2^31: no overflow
    const int64_t part_row = la.part_row_of(ks.few);
    if (rows > (INT64_MAX / 4) / part_row)
      throw CallError("the partial states of a key loop split " + std::to_string(ks.split) +
                      " ways overflow 64-bit offsets at " +
                      extents_text(p, extv, dims_with(la.par_dims, la.row_dim)));
    bk.scratch_bytes = at + rows * part_row * 4;
    // one per row and padded column pair (per row without accumulators)
    const int64_t threads = M * la.combine_threads_per_row(ks.few);
    bk.combine_grid = {static_cast<unsigned>((threads + 127) / 128),
                       static_cast<unsigned>(std::min<int64_t>(P, 65535)),
                       static_cast<unsigned>((P + 65534) / 65535)};
    bk.combine_block = {128, 1, 1};
  }
  P *= ks.split;
  // Gathers by plain dim indices run unchecked on the device: their range is the index dim's.
  for (const Sm80Launch::GatherCheck& g : la.gather_checks) {
    const Parameter& Pm = p.params[g.param];
    int pd = Pm.dims[g.pos];
    if (extv[g.index_dim] > extv[pd])
      throw CallError("index " + std::to_string(extv[pd]) + " is out of range [0, " +
                      std::to_string(extv[pd]) + ") in a read of parameter '" + Pm.name +
                      "' (dimension '" + p.dims[pd] + "')");
  }
  // The kernel's parallel index y + 65535 * z is an int and reaches P + 65534 in the last
  // grid row (those blocks exit): keep it below 2^31.
  if (P > INT32_MAX - 65535)
    throw CallError(std::to_string(P) + " parallel indices (the product of the batch-like dims" +
                    (la.value_split_of(ks.few) > 1 ? " times the value-column split"
                                                   : std::string()) +
                    ") is more than one grid takes (2^31 - 65536)");
  // A persistent kernel numbers its work items (row tiles x P) in an int.
  if (ks.walk && m_tiles * P > INT32_MAX - 65535)
    throw CallError(std::to_string(m_tiles) + " row tiles x " + std::to_string(P) +
                    " parallel indices is more work items than one grid takes (2^31 - 65536)");
  bk.grid = sm80_grid(la, ks, m_tiles, P, sm_count);
  bk.block = {static_cast<unsigned>(ks.few ? 32 : 32 * la.warps), 1, 1};
}

namespace {

// Every kernel's launch for buffers at `ptrs` (one per plan buffer) with `strides` (one list per
// buffer; empty: packed in dim order), the error word at `err` and device scratch from
// `scratch_for(bytes)` (called once, with the most any kernel needs, when one needs any).
void bind_launch(const CudaLoaded& L, const Program& p, const std::vector<DevicePtr>& ptrs,
                 const std::vector<std::vector<int64_t>>& given, DevicePtr err,
                 const std::function<DevicePtr(int64_t)>& scratch_for, CudaBound& b) {
  std::vector<std::vector<int64_t>> strides;
  for (size_t i = 0; i < L.plan.buffers.size(); ++i)
    strides.push_back(strides_of(L.plan.buffers[i], b.extv, given[i]));
  b.kernels.assign(L.kernels.size(), {});
  int64_t need = 0;
  for (int pass = 0; pass < 2; ++pass) {
    const DevicePtr scratch = pass == 1 && need > 0 ? scratch_for(need) : 0;
    for (size_t i = 0; i < L.kernels.size(); ++i) {
      const LoweredKernel& lk = L.kernels[i].low;
      CudaBoundKernel& bk = b.kernels[i];
      bk = {};
      if (lk.path == LoweredKernel::Path::tensor_core) {
        bind_sm80(lk.tensor_core.launch, p, ptrs, strides, err, scratch, b.extv,
                  cuda_device_info().sm_count, bk);
        need = std::max(need, bk.scratch_bytes);
        continue;
      }
      bind_element(L.plan, L.plan.kernels[lk.plan_kernel], lk.element, ptrs, strides, err,
                   scratch, b.extv,
                   static_cast<int64_t>(cuda_device_info().sm_count) * lk.element.blocks_per_sm,
                   bk);
      need = std::max(need, bk.scratch_bytes);
    }
    if (need == 0) break;
  }
}

}  // namespace

void bind_element(const Plan& plan, const PlanKernel& k, const ElementLaunch& e,
                  const std::vector<DevicePtr>& ptrs,
                  const std::vector<std::vector<int64_t>>& strides, DevicePtr err,
                  DevicePtr scratch, const std::vector<int64_t>& extv, int64_t most_blocks,
                  CudaBoundKernel& bk) {
  const ElementParamLayout l = element_param_layout(plan, e);
  bk.params.assign(l.words(), 0);
  size_t si = 0;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    bk.params[i] = static_cast<int64_t>(ptrs[i]);
    for (int64_t st : strides[i]) bk.params[l.st() + si++] = st;
  }
  for (size_t d = 0; d < extv.size(); ++d) bk.params[l.ext() + d] = extv[d];
  bk.params[l.err()] = static_cast<int64_t>(err);
  std::vector<int64_t> offsets;
  const int64_t ws = element_workspace(k, e, extv, &offsets);
  if (ws < 0)
    throw CallError("the workspace of kernel " + k.name + " overflows 64-bit offsets at " +
                    extents_text(plan.program, extv, all_dims(plan.program)));
  for (size_t i = 0; i < offsets.size(); ++i) bk.params[l.off() + i] = offsets[i];
  int64_t points = 1;
  for (int d : k.grid) {
    const int64_t x = d == k.row_dim ? (extv[d] + k.row_tile - 1) / k.row_tile : extv[d];
    if (x != 0 && points > INT64_MAX / x)
      throw CallError("kernel " + k.name + ": its grid points overflow 64 bits at " +
                      extents_text(plan.program, extv, k.grid));
    points *= x;
  }
  if (points == 0) {
    bk.empty = true;
    return;
  }
  // (a block per point, or a thread per point: enough blocks for every point's thread; a
  // lanes kernel's blocks hold threads / lanes points)
  const int lanes = lanes_for(e, extv);
  if (!e.lane_dims.empty()) bk.params[l.lanes()] = lanes;
  const int64_t per_block = e.thread_per_point ? e.threads / lanes : 1;
  int64_t blocks =
      std::min<int64_t>((points + per_block - 1) / per_block, std::max<int64_t>(1, most_blocks));
  const bool smem = ws <= e.smem_limit;
  // (a thread per point holds every thread's arrays: where they spill to device memory, fewer
  // blocks keep the scratch within kPerThreadScratch; the grid-stride loop covers the rest)
  constexpr int64_t kPerThreadScratch = int64_t{256} << 20;
  if (!smem && e.thread_per_point && ws > 0)
    blocks = std::max<int64_t>(1, std::min<int64_t>(blocks, kPerThreadScratch / ws));
  bk.params[l.ws()] = ws;
  bk.params[l.use_smem()] = smem ? 1 : 0;
  bk.params[l.scratch()] = static_cast<int64_t>(scratch);
  bk.smem = smem ? static_cast<size_t>(ws) : 0;
  bk.scratch_bytes = smem ? 0 : ws * blocks;
  bk.grid = {static_cast<unsigned>(blocks), 1, 1};
  bk.block = {static_cast<unsigned>(e.threads), 1, 1};
}

CudaBound cuda_bind(const CudaLoaded& L, const Program& p, const TensorMap& inputs, const Extents& ext) {
  const Plan& plan = L.plan;
  // The one conversion of inputs to their declared types (integer values must fit).
  const TensorMap prepared = prepare_inputs(p, inputs);
  CudaBound b;
  b.extv = cuda_extents(L, p, ext);
  std::vector<DevicePtr> ptrs;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const PlanBuffer& B = plan.buffers[i];
    const size_t bytes = buffer_bytes(L, static_cast<int>(i), b.extv);
    b.bufs.emplace_back(bytes);
    if (B.kind == PlanBuffer::Input) {
      const Tensor& given = prepared.at(B.name);
      Tensor t = given.dtype() == B.type && given.is_contiguous() ? given : given.to(B.type);
      if (bytes) b.bufs.back().upload(t.data(), bytes);
    } else if (B.kind == PlanBuffer::Intermediate) {
      b.bufs.back().memset(0xff);  // NaN in f32 and f64 (a value no kernel wrote reads as NaN)
    } else if (bytes % 4 == 0) {
      b.bufs.back().fill_u32(0x7fc07fc0u);  // NaN in bf16 pairs and in f32
    } else if (bytes) {
      b.bufs.back().memset(0xff);  // NaN in f16 and bf16
    }
    ptrs.push_back(b.bufs.back().ptr());
  }
  b.err = DeviceBuffer(kCudaErrorWords * sizeof(int64_t));
  b.err.memset(0);
  bind_launch(L, p, ptrs, std::vector<std::vector<int64_t>>(ptrs.size()), b.err.ptr(),
              [&](int64_t bytes) {
                b.scratch = DeviceBuffer(static_cast<size_t>(bytes));
                return b.scratch.ptr();
              },
              b);
  return b;
}

void cuda_launch(const CudaLoaded& L, CudaBound& b, CudaStreamHandle stream, int only) {
  for (size_t i = 0; i < L.kernels.size(); ++i) {
    CudaBoundKernel& bk = b.kernels[i];
    if (bk.empty || (only >= 0 && static_cast<int>(i) != only)) continue;
    void* args[] = {bk.params.data(), nullptr};
    const CudaLoadedKernel& k = L.kernels[i];
    for (CudaBoundKernel::Split& sp : bk.splits) {
      void* sargs[] = {sp.args.data(), nullptr};
      k.split.launch(sp.grid, sp.block, 0, stream, sargs);
    }
    launched_kernel(k, bk).launch(bk.grid, bk.block, bk.smem, stream, args);
    if (bk.key_split > 1)
      launched_combine(k, bk).launch(bk.combine_grid, bk.combine_block, 0, stream, args);
  }
}

void cuda_raise_error_word(const Program& p, const Plan& plan, const std::vector<int64_t>& extv,
                           const int64_t* err) {
  if (!err[0]) return;
  // The word comes from device memory: every field is checked before it indexes anything.
  const auto corrupt = [&] {
    return BackendError("the kernel's error word is not one it writes (" +
                        std::to_string(err[0]) + ", " + std::to_string(err[1]) + ", " +
                        std::to_string(err[2]) + ", " + std::to_string(err[3]) + ")");
  };
  if (err[0] == 2) {  // integer x % 0 (fg_mod_e): err[3] = node id of the program
    if (err[3] < 0 || err[3] >= static_cast<int64_t>(plan.program.nodes.size())) throw corrupt();
    scalar::throw_mod_by_zero(plan.program.nodes[err[3]].loc);
  }
  if (err[0] != 1 || err[1] < 0 || err[1] >= static_cast<int64_t>(p.params.size())) throw corrupt();
  const Parameter& P = p.params[err[1]];
  if (err[2] < 0 || err[2] >= static_cast<int64_t>(P.dims.size())) throw corrupt();
  int d = P.dims[err[2]];
  throw CallError("index " + std::to_string(err[3]) + " is out of range [0, " +
                  std::to_string(extv[d]) + ") in a read of parameter '" + P.name +
                  "' (dimension '" + p.dims[d] + "')");
}

void cuda_check_errors(const Program& p, const Plan& plan, const CudaBound& b) {
  int64_t err[4];
  b.err.download(err, sizeof err);
  cuda_raise_error_word(p, plan, b.extv, err);
}

void cuda_run(const Program& p, const Extents& ext, const CudaLoaded& plain, CudaBound& b) {
  cuda_launch(plain, b, nullptr);
  cuda_synchronize();
  cuda_check_errors(p, plain.plan, b);
  int64_t err[8];
  b.err.download(err, sizeof err);
  if (!err[7]) return;
  std::shared_ptr<const CudaLoaded> careful = cuda_load(p, ext, CudaBuild::careful);
  b.err.memset(0);
  cuda_launch(*careful, b, nullptr);
  cuda_synchronize();
  cuda_check_errors(p, careful->plan, b);
}

TensorMap cuda_download_outputs(const CudaLoaded& L, const CudaBound& b) {
  TensorMap out;
  for (size_t i = 0; i < L.plan.buffers.size(); ++i) {
    const PlanBuffer& B = L.plan.buffers[i];
    if (B.kind != PlanBuffer::Output) continue;
    std::vector<int64_t> shape;
    for (int d : B.dims) shape.push_back(b.extv[d]);
    Tensor t(B.type, shape);
    if (t.nbytes()) b.bufs[i].download(t.data(), t.nbytes());
    out[B.name] = t;
  }
  return out;
}

TileCounts cuda_tile_counts(const CudaBound& b) {
  int64_t err[8];
  b.err.download(err, sizeof err);
  return {err[4], err[5], err[6]};
}

namespace {
Compiled compile_for(const Program& p, Target target, const Extents& sizes) {
  if (target == Target::cpu) throw BackendError("target cpu is not a CUDA target");
  CompileOptions opt;
  opt.target = target;
  opt.sizes = sizes;
  return compile_to_target(p, opt);
}
}  // namespace

std::vector<CudaKernelPath> cuda_paths(const Program& p, Target target, const Extents& sizes) {
  if (target == Target::cpu) throw BackendError("target cpu is not a CUDA target");
  CompileOptions opt;
  opt.target = target;
  opt.sizes = sizes;
  Compiled c = compile_program(p, opt, "lower");
  std::vector<CudaKernelPath> out;
  for (const LoweredKernel& lk : c.lowered.kernels)
    out.push_back({c.plan.kernels[lk.plan_kernel].name, path_name(lk.path), lk.why});
  return out;
}

std::string emit_cuda(const Program& p, Target target, const Extents& sizes) {
  std::string out;
  for (const std::string& s : compile_for(p, target, sizes).sources) out += s;
  return out;
}

std::string compile_cuda_cubin(const Program& p, Target target, const Extents& sizes,
                               const std::string& arch) {
  std::vector<std::string> bins = cuda_compile_build(p, target, sizes, arch, CudaBuild::plain);
  if (bins.size() != 1)
    throw BackendError("program '" + p.name + "' has " + std::to_string(bins.size()) +
                       " kernels: compile_cuda_cubins gives one cubin each");
  return bins[0];
}

std::vector<std::string> compile_cuda_cubins(const Program& p, Target target,
                                             const Extents& sizes, const std::string& arch) {
  return cuda_compile_build(p, target, sizes, arch, CudaBuild::plain);
}

std::vector<std::string> cuda_compile_build(const Program& p, Target target,
                                            const Extents& sizes, const std::string& arch,
                                            CudaBuild build) {
  Compiled c = compile_for(p, target, sizes);
  std::string a = !arch.empty() ? arch : target == Target::cuda_sm90 ? "sm_90a" : "sm_80";
  std::vector<NvrtcJob> jobs;
  for (size_t i = 0; i < c.sources.size(); ++i)
    jobs.push_back({c.sources[i], nvrtc_options(a, c.lowered.kernels[i], build)});
  std::vector<std::string> out;
  for (Cubin& cubin : nvrtc_compile_each(jobs)) out.push_back(std::move(cubin.bytes));
  return out;
}

int cuda_kernel_load_count() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_loads;
}

namespace {

// A device tensor the kernels read or write in place: its dtype, and a layout they take.
// Element kernels read any strides at an address aligned to the element size. The tensor-core
// template's 16-byte vector loads and stores (`vector`: a tensor-core kernel reads or writes
// it) need a 16-byte aligned start and a packed layout in declared dim order, or strides where
// the innermost dim is contiguous and every other stride is a multiple of 16 bytes (a
// transposed view of a [b, m, h, d] tensor read as [b, h, m, d]). Returns the strides to bind
// (empty: packed).
std::vector<int64_t> check_device_tensor(const std::string& what, const DeviceTensor& t,
                                         DType want, bool vector) {
  if (t.type != want)
    throw CallError(what + " is " + dtype_name(t.type) + "; the program declares " +
                    dtype_name(want) + " (convert it first: the GPU path reads it in place)");
  if (t.strides.size() != t.shape.size())
    throw CallError(what + " has " + std::to_string(t.strides.size()) + " strides for " +
                    std::to_string(t.shape.size()) + " dims");
  if (checked_element_count(t.shape) == 0) return {};  // nothing is read or written
  const uint64_t align = vector ? 16 : static_cast<uint64_t>(dtype_bytes(t.type));
  if (t.ptr % align != 0)
    throw CallError(what + " starts at a device address that is not " + std::to_string(align) +
                    "-byte aligned");
  bool packed = true;
  int64_t acc = 1;
  for (size_t j = t.shape.size(); j-- > 0;) {
    if (t.shape[j] != 1 && t.strides[j] != acc) packed = false;
    acc *= t.shape[j];
  }
  if (packed) return {};
  if (!vector) return t.strides;
  const int64_t vec = 16 / dtype_bytes(t.type);
  const size_t r = t.shape.size();
  bool ok = t.shape[r - 1] == 1 || t.strides[r - 1] == 1;
  for (size_t j = 0; j + 1 < r; ++j)
    ok = ok && (t.shape[j] == 1 || (t.strides[j] >= 0 && t.strides[j] % vec == 0));
  if (!ok)
    throw CallError(what + " of shape " + shape_text(t.shape) + " has strides " +
                    shape_text(t.strides) + ": the tensor-core kernels read packed tensors, or " +
                    "strided ones whose last dim is contiguous and whose other strides are "
                    "multiples of 16 bytes");
  return t.strides;
}

// Stream-ordered device memory of one launch, freed on the same stream after its kernels.
struct AsyncAllocs {
  CudaStreamHandle stream;
  std::vector<DevicePtr> ptrs;
  DevicePtr get(size_t bytes) {
    ptrs.push_back(cuda_alloc_async(bytes, stream));
    return ptrs.back();
  }
  ~AsyncAllocs() {
    for (DevicePtr p : ptrs) {
      try {
        cuda_free_async(p, stream);
      } catch (const BackendError&) {  // a destructor cannot throw; the driver reports later
      }
    }
  }
};

}  // namespace

TensorMap device_shape_views(const DeviceTensorMap& m) {
  TensorMap out;
  for (const auto& [name, t] : m) {
    const int64_t n = checked_element_count(t.shape);
    if (n < 0)
      throw CallError("'" + name + "' of shape " + shape_text(t.shape) +
                      " has a negative extent or more than 2^" +
                      std::to_string(kMaxElementsLog2) + " elements");
    static uint8_t nothing;
    std::vector<int64_t> packed(t.shape.size());
    int64_t acc = 1;
    for (size_t j = t.shape.size(); j-- > 0;) packed[j] = acc, acc *= t.shape[j];
    out[name] = Tensor::borrow(t.type, t.shape, packed, &nothing,
                               static_cast<size_t>(n) * dtype_bytes(t.type));
  }
  return out;
}

struct CudaLaunchCache {
  std::mutex mu;
  bool have_heads = false;
  std::vector<std::string> heads;  // the plan's head dims (cuda_head_dims)
  std::map<std::string, std::shared_ptr<const CudaLoaded>> loaded;  // by build and head extents

  std::string key(const Extents& ext, bool careful) const {
    std::string k = careful ? "careful" : "plain";
    for (const std::string& d : heads) k += " " + d + "=" + std::to_string(ext.at(d));
    return k;
  }
};

std::shared_ptr<CudaLaunchCache> make_cuda_launch_cache() {
  return std::make_shared<CudaLaunchCache>();
}

void cuda_launch_device(const Program& p, const DeviceTensorMap& inputs,
                        const DeviceTensorMap& outputs, uint64_t err, uint64_t stream,
                        bool careful, CudaLaunchCache* cache) {
  cuda_require();
  const TensorMap views = device_shape_views(inputs);
  const Extents ext = bind_extents(p, views);
  for (const Parameter& par : p.params)
    if (!inputs.count(par.name)) throw CallError("missing input '" + par.name + "'");
  for (const auto& [name, t] : outputs) {
    bool known = false;
    for (const Output& o : p.outputs) known |= o.name == name;
    if (!known) throw CallError("'" + name + "' is not an output of program '" + p.name + "'");
  }
  std::shared_ptr<const CudaLoaded> L;
  if (cache) {
    std::lock_guard<std::mutex> lock(cache->mu);
    if (cache->have_heads) {
      auto it = cache->loaded.find(cache->key(ext, careful));
      if (it != cache->loaded.end()) L = it->second;
    }
  }
  if (!L) {
    L = cuda_load_build(p, ext, careful ? CudaBuild::careful : CudaBuild::plain, false, nullptr);
    if (cache) {
      std::lock_guard<std::mutex> lock(cache->mu);
      if (!cache->have_heads) cache->heads = cuda_head_dims(L->plan), cache->have_heads = true;
      cache->loaded[cache->key(ext, careful)] = L;
    }
  }
  L = cuda_load_for_call(L, p, ext);  // (the cache keeps the build without checks)
  // Buffers a tensor-core kernel touches take its vector layouts.
  std::vector<bool> vector(L->plan.buffers.size(), false);
  for (const CudaLoadedKernel& k : L->kernels) {
    if (k.low.path != LoweredKernel::Path::tensor_core) continue;
    const PlanKernel& pk = L->plan.kernels[k.low.plan_kernel];
    for (int i : pk.reads) vector[i] = true;
    for (int i : pk.writes) vector[i] = true;
    // operands in pieces: the split kernel reads them with any strides
    for (const Sm80Launch::SplitOperand& o : k.low.tensor_core.launch.split) vector[o.buffer] = false;
  }
  if (err % 8 != 0 || err == 0)
    throw CallError("the error words must be " + std::to_string(kCudaErrorWords) +
                    " zeroed, 8-byte aligned int64 in device memory");
  CudaBound b;
  b.extv = cuda_extents(*L, p, ext);
  const CudaStreamHandle s = reinterpret_cast<CudaStreamHandle>(static_cast<uintptr_t>(stream));
  AsyncAllocs mem{s, {}};
  std::vector<DevicePtr> ptrs;
  std::vector<std::vector<int64_t>> strides;
  for (size_t i = 0; i < L->plan.buffers.size(); ++i) {
    const PlanBuffer& B = L->plan.buffers[i];
    const std::vector<int64_t> shape = buffer_shape(B, b.extv);
    if (B.kind == PlanBuffer::Input) {
      ptrs.push_back(inputs.at(B.name).ptr);
      strides.push_back(check_device_tensor("input '" + B.name + "'", inputs.at(B.name), B.type,
                                            vector[i]));
      continue;
    }
    if (B.kind == PlanBuffer::Intermediate) {  // between the call's kernels, on its stream
      ptrs.push_back(mem.get(buffer_bytes(*L, static_cast<int>(i), b.extv)));
      strides.emplace_back();
      continue;
    }
    auto it = outputs.find(B.name);
    if (it == outputs.end()) throw CallError("missing output '" + B.name + "'");
    if (it->second.shape != shape)
      throw CallError("output '" + B.name + "' has shape " + shape_text(it->second.shape) +
                      "; this call gives " + shape_text(shape));
    strides.push_back(check_device_tensor("output '" + B.name + "'", it->second, B.type,
                                          vector[i]));
    // Threads write distinct output elements: a layout where two elements share an address
    // (a zero or overlapping stride) would race.
    std::vector<std::pair<int64_t, int64_t>> dims;  // (|stride|, extent) of dims longer than 1
    for (size_t j = 0; j < shape.size(); ++j)
      if (shape[j] > 1 && !strides.back().empty())
        dims.emplace_back(std::abs(strides.back()[j]), shape[j]);
    std::sort(dims.begin(), dims.end());
    int64_t span = 1;  // elements covered by the dims so far
    for (const auto& [st, n] : dims) {
      if (st < span)
        throw CallError("output '" + B.name + "' of shape " + shape_text(shape) +
                        " has strides " + shape_text(strides.back()) +
                        " under which two elements share an address");
      span = st * n;
    }
    ptrs.push_back(it->second.ptr);
  }
  bind_launch(*L, p, ptrs, strides, err, [&](int64_t bytes) { return mem.get(bytes); }, b);
  cuda_launch(*L, b, s);
}

void cuda_raise_error_word(const Program& p, const TensorMap& input_shapes, const int64_t* err) {
  if (!err[0]) return;
  const Extents ext = bind_extents(p, input_shapes);
  std::vector<int64_t> extv;
  for (const std::string& d : p.dims) extv.push_back(ext.at(d));
  cuda_raise_error_word(p, cuda_plan(p, Target::cuda_sm80, {}), extv, err);
}

TensorMap run_cuda(const Program& p, const TensorMap& inputs, const Extents& extra) {
  cuda_require();
  Extents ext = bind_extents(p, inputs, extra);
  std::shared_ptr<const CudaLoaded> L = cuda_load(p, ext);
  CudaBound b = cuda_bind(*L, p, inputs, ext);
  cuda_run(p, ext, *L, b);
  return cuda_download_outputs(*L, b);
}

CudaBenchResult bench_cuda(const Program& p, const Extents& sizes, int warmup, int iters,
                           uint64_t seed, const TensorMap& given) {
  cuda_require();
  TensorMap inputs = random_inputs(p, sizes, seed);
  for (const auto& [name, t] : given) inputs[name] = t;
  Extents ext = bind_extents(p, inputs, sizes);
  std::shared_ptr<const CudaLoaded> L = cuda_load(p, ext);
  CudaBound b = cuda_bind(*L, p, inputs, ext);
  cuda_prepare(*L, b);
  CudaStream stream;
  CudaTiming t = cuda_time([&](CudaStreamHandle s) { cuda_launch(*L, b, s); }, warmup, iters,
                           stream.get());
  cuda_check_errors(p, L->plan, b);
  CudaBenchResult r;
  r.device = cuda_device_info().name;
  for (const CudaLoadedKernel& k : L->kernels) {
    if (!r.kernels.empty()) r.kernels += ", ";
    r.kernels += k.low.path == LoweredKernel::Path::tensor_core
                     ? (k.low.tensor_core.launch.wgmma ? "tensor_core (wgmma)" : "tensor_core (mma.sync)")
                     : "element";
  }
  r.median_ms = t.median_ms;
  r.min_ms = t.min_ms;
  // A tensor-core kernel: 2*d per q.k contraction + 2*e per P.V accumulator, per (row, key)
  // pair of every grid point (the kernels per softmax cluster add up to the one kernel's),
  // times the fraction the mask keeps (cost.h); another: every value's FLOPs (cost.h), the
  // body's over kept pairs only.
  for (const CudaLoadedKernel& lk : L->kernels) {
    const PlanKernel& k = L->plan.kernels[lk.low.plan_kernel];
    const double frac = mask_fraction(L->plan, k, inputs, b.extv);
    if (lk.low.path == LoweredKernel::Path::tensor_core) {
      const Sm80Launch& la = lk.low.tensor_core.launch;
      double pairs = 1;
      for (int d : la.par_dims) pairs *= static_cast<double>(b.extv[d]);
      pairs *= static_cast<double>(b.extv[la.row_dim]) * static_cast<double>(b.extv[k.red_dim]);
      const double per_pair =
          2.0 * la.score_dims + 2.0 * la.value_dim * la.num_acc;
      r.dense_flops += pairs * per_pair;
      r.flops += pairs * per_pair * frac;
      continue;
    }
    const KernelCost c = kernel_cost(L->plan, k, ext);
    r.dense_flops += c.flops;
    r.flops += must_flops(c, frac);
  }
  r.tflops = r.median_ms > 0 ? r.flops / (r.median_ms * 1e-3) / 1e12 : 0;
  // dense bf16 tensor-core peaks from the datasheets (compute capability 9.0: the H100/H200 SXM
  // figure, which overstates PCIe parts; 8.0: the A100); 0 for other GPUs
  const CudaDeviceInfo& di = cuda_device_info();
  r.peak_tflops = di.cc_major == 9 && di.cc_minor == 0   ? 989.0
                  : di.cc_major == 8 && di.cc_minor == 0 ? 312.0
                                                         : 0.0;
  return r;
}

}  // namespace flashgen
