// run_cuda: the CUDA backend's host side. Compiles a program's plan (sm80 path,
// codegen/cuda/emit_sm80.cpp) with NVRTC for the running GPU (sm_90a on Hopper, sm_<cc>
// otherwise; disk-cached by runtime/nvrtc), loads it once per (program, head dims, arch) in
// this process, uploads inputs packed in their declared dtype and dim order, poisons outputs
// (NaN) so an unwritten element cannot pass a test, launches, reports out-of-range gathers as
// CallError naming the parameter, and downloads outputs of their declared dtype.
// bench_cuda times the same launch with device events (median of warm runs).
// Tests: tests/gpu/cuda_examples_test.cpp (GPU), tests/cuda/nvrtc_examples_test.cpp (NVRTC).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include "codegen/cuda/embedded_headers.h"
#include "codegen/cuda/emit_sm80.h"
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

NvrtcOptions nvrtc_options(const std::string& arch, const std::string& name, CudaBuild build) {
  NvrtcOptions o;
  o.arch = arch;
  // Fast math: approximate division/exp/tanh (errors ~1e-6 relative, far inside bf16's 4e-3);
  // IEEE division by non-constant scales cost as much as the softmax otherwise.
  o.options = {"-std=c++17", "-default-device", "--disable-warnings", "--use_fast_math"};
  o.cuda_include = false;  // the tile library includes nothing
  o.name = name + ".cu";
  int n = 0;
  const cuda::EmbeddedHeader* h = cuda::embedded_headers(&n);
  for (int i = 0; i < n; ++i) o.headers.push_back({h[i].name, h[i].source});
  if (build == CudaBuild::count_tiles) o.options.push_back("-DFG_COUNT_TILES");
  if (build == CudaBuild::careful) o.options.push_back("-DFG_CAREFUL");
  return o;
}

// Head-dim extents only, so long extents never reach the source.
Extents head_sizes(const Plan& plan, const Extents& ext) {
  Extents out;
  for (const std::string& d : cuda_head_dims(plan)) {
    auto it = ext.find(d);
    if (it != ext.end()) out[d] = it->second;
  }
  return out;
}

std::mutex g_mu;
int g_loads = 0;

}  // namespace

std::shared_ptr<const CudaLoaded> cuda_load(const Program& p, const Extents& ext, CudaBuild build,
                                            bool* from_process_cache) {
  static std::map<std::string, std::shared_ptr<const CudaLoaded>> cache;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string arch = cuda_device_arch();
  Plan plan = cuda_plan(p, Target::cuda_sm80, {});
  Extents heads = head_sizes(plan, ext);
  const CudaDeviceInfo& dev = cuda_device_info();
  const SmemBudget budget{dev.max_smem_per_sm, dev.max_smem_per_block_optin};
  std::string key = p.str() + "\n" + arch + " smem " + std::to_string(budget.per_sm) + "/" +
                    std::to_string(budget.per_block) +
                    (build == CudaBuild::count_tiles ? " count_tiles"
                     : build == CudaBuild::careful   ? " careful"
                                                     : "");
  for (const auto& [n, e] : heads) key += "\n" + n + "=" + std::to_string(e);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = cache.find(key);
    if (from_process_cache) *from_process_cache = it != cache.end();
    if (it != cache.end()) return it->second;
  }
  auto L = std::make_shared<CudaLoaded>();
  L->plan = std::move(plan);
  L->arch = arch;
  L->src = emit_sm80_kernel(L->plan, 0, Target::cuda_sm80, heads, budget);
  Cubin cubin = nvrtc_compile(L->src.source, nvrtc_options(arch, L->src.launch.entry, build));
  CudaModule mod(cubin.bytes);
  L->kernel = mod.kernel(L->src.launch.entry);
  L->from_disk_cache = cubin.from_cache;
  L->compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_loads;
  cache[key] = L;
  return L;
}

namespace {

// The call's extents in the program's dim order; rows, keys and the element code's integer
// indices are 32-bit on the device (the emitter narrows index arithmetic by this bound:
// TargetTable::max_extent).
std::vector<int64_t> cuda_extents(const CudaLoaded& L, const Program& p, const Extents& ext) {
  std::vector<int64_t> extv;
  for (const std::string& d : p.dims) {
    auto it = ext.find(d);
    extv.push_back(it == ext.end() ? 0 : it->second);
  }
  for (int d : L.src.launch.int32_dims)
    if (extv[d] > INT32_MAX)
      throw CallError("dimension '" + p.dims[d] + "' has extent " + std::to_string(extv[d]) +
                      "; the CUDA backend indexes it with 32-bit ints (extents up to 2^31 - 1)");
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

// The kernel's parameters and launch geometry for buffers at `ptrs` (one per plan buffer) with
// `strides` (in elements, one list per buffer; an empty list: packed in dim order) and the
// error word at `err`; b.extv is set.
void bind_launch(const CudaLoaded& L, const Program& p, const std::vector<DevicePtr>& ptrs,
                 const std::vector<std::vector<int64_t>>& strides, DevicePtr err, CudaBound& b) {
  const Plan& plan = L.plan;
  const Sm80Launch& la = L.src.launch;
  const int NB = la.num_buffers, R = la.max_rank;
  b.params.assign(NB + NB * R + la.num_dims + 1, 0);
  for (int i = 0; i < NB; ++i) {
    const std::vector<int64_t> shape = buffer_shape(plan.buffers[i], b.extv);
    int64_t acc = 1;  // at most the element count: no overflow
    for (int j = static_cast<int>(shape.size()) - 1; j >= 0; --j) {
      b.params[NB + i * R + j] = strides[i].empty() ? acc : strides[i][j];
      acc *= shape[j];
    }
    b.params[i] = static_cast<int64_t>(ptrs[i]);
  }
  for (int d = 0; d < la.num_dims; ++d) b.params[NB + NB * R + d] = b.extv[d];
  b.params.back() = static_cast<int64_t>(err);
  int64_t P = 1;
  for (int d : la.par_dims) P *= b.extv[d];
  P *= la.value_split;
  int64_t M = b.extv[la.row_dim];
  if (P == 0 || M == 0) {
    b.empty = true;
    return;
  }
  // Gathers by plain dim indices run unchecked on the device: their range is the index dim's.
  for (const Sm80Launch::GatherCheck& g : la.gather_checks) {
    const Parameter& Pm = p.params[g.param];
    int pd = Pm.dims[g.pos];
    if (b.extv[g.index_dim] > b.extv[pd])
      throw CallError("index " + std::to_string(b.extv[pd]) + " is out of range [0, " +
                      std::to_string(b.extv[pd]) + ") in a read of parameter '" + Pm.name +
                      "' (dimension '" + p.dims[pd] + "')");
  }
  // The kernel's parallel index y + 65535 * z is an int and reaches P + 65534 in the last
  // grid row (those blocks exit): keep it below 2^31.
  if (P > INT32_MAX - 65535)
    throw CallError(std::to_string(P) + " parallel indices (the product of the batch-like dims" +
                    (la.value_split > 1 ? " times the value-column split" : std::string()) +
                    ") is more than one grid takes (2^31 - 65536)");
  b.grid = {static_cast<unsigned>((M + la.block_m - 1) / la.block_m),
            static_cast<unsigned>(std::min<int64_t>(P, 65535)),
            static_cast<unsigned>((P + 65534) / 65535)};
  b.block = {static_cast<unsigned>(32 * la.warps), 1, 1};
}

}  // namespace

CudaBound cuda_bind(const CudaLoaded& L, const Program& p, const TensorMap& inputs, const Extents& ext) {
  const Plan& plan = L.plan;
  // The one conversion of inputs to their declared types (integer values must fit).
  const TensorMap prepared = prepare_inputs(p, inputs);
  CudaBound b;
  b.extv = cuda_extents(L, p, ext);
  std::vector<DevicePtr> ptrs;
  for (const PlanBuffer& B : plan.buffers) {
    const std::vector<int64_t> shape = buffer_shape(B, b.extv);
    size_t bytes = static_cast<size_t>(checked_element_count(shape)) * dtype_bytes(B.type);
    b.bufs.emplace_back(bytes);
    if (B.kind == PlanBuffer::Input) {
      const Tensor& given = prepared.at(B.name);
      Tensor t = given.dtype() == B.type && given.is_contiguous() ? given : given.to(B.type);
      if (bytes) b.bufs.back().upload(t.data(), bytes);
    } else if (bytes) {
      b.bufs.back().fill_u32(0x7fc07fc0u);  // NaN in bf16 pairs and in f32
    }
    ptrs.push_back(b.bufs.back().ptr());
  }
  b.err = DeviceBuffer(8 * sizeof(int64_t));
  b.err.memset(0);
  bind_launch(L, p, ptrs, std::vector<std::vector<int64_t>>(ptrs.size()), b.err.ptr(), b);
  return b;
}

void cuda_launch(const CudaLoaded& L, CudaBound& b, CudaStreamHandle stream) {
  if (b.empty) return;
  void* args[] = {b.params.data(), nullptr};
  L.kernel.launch(b.grid, b.block, L.src.launch.smem_bytes, stream, args);
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

bool cuda_takes(const Program& p, const Extents& ext, std::string* why) {
  try {
    Plan plan = cuda_plan(p, Target::cuda_sm80, {});
    const CudaDeviceInfo& dev = cuda_device_info();
    const SmemBudget budget{dev.max_smem_per_sm, dev.max_smem_per_block_optin};
    CudaKernelSource src =
        emit_sm80_kernel(plan, 0, Target::cuda_sm80, head_sizes(plan, ext), budget);
    if (src.launch.smem_bytes > dev.max_smem_per_block_optin) {
      *why = "its kernel needs " + std::to_string(src.launch.smem_bytes) +
             " bytes of shared memory per block; this GPU allows " +
             std::to_string(dev.max_smem_per_block_optin);
      return false;
    }
  } catch (const BackendError& e) {
    *why = e.what();
    return false;
  }
  return true;
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

std::string emit_cuda(const Program& p, Target target, const Extents& sizes) {
  if (target == Target::cpu) throw BackendError("emit_cuda: target cpu is not a CUDA target");
  Plan plan = cuda_plan(p, target, sizes);
  Extents heads = head_sizes(plan, sizes);
  std::string out;
  for (int k = 0; k < plan.kernel_count(); ++k)
    out += emit_sm80_kernel(plan, k, target, heads).source;
  return out;
}

std::string compile_cuda_cubin(const Program& p, Target target, const Extents& sizes,
                               const std::string& arch) {
  return cuda_compile_build(p, target, sizes, arch, CudaBuild::plain);
}

std::string cuda_compile_build(const Program& p, Target target, const Extents& sizes,
                               const std::string& arch, CudaBuild build) {
  if (target == Target::cpu) throw BackendError("compile_cuda_cubin: target cpu is not CUDA");
  Plan plan = cuda_plan(p, target, sizes);
  if (plan.kernel_count() != 1)
    throw BackendError("the CUDA backend takes one-kernel plans; this one has " +
                       std::to_string(plan.kernel_count()));
  CudaKernelSource src = emit_sm80_kernel(plan, 0, target, head_sizes(plan, sizes));
  std::string a = !arch.empty() ? arch : target == Target::cuda_sm90 ? "sm_90a" : "sm_80";
  return nvrtc_compile(src.source, nvrtc_options(a, src.launch.entry, build)).bytes;
}

int cuda_kernel_load_count() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_loads;
}

namespace {

// A device tensor the kernel reads or writes in place: its dtype, a 16-byte aligned start,
// and a layout the kernel's 16-byte vector loads and stores take: packed in declared dim order,
// or any strides where the innermost dim is contiguous and every other stride is a multiple of
// 16 bytes (a transposed view of a [b, m, h, d] tensor read as [b, h, m, d]). Returns the
// strides to bind (empty: packed).
std::vector<int64_t> check_device_tensor(const std::string& what, const DeviceTensor& t,
                                         DType want) {
  if (t.type != want)
    throw CallError(what + " is " + dtype_name(t.type) + "; the program declares " +
                    dtype_name(want) + " (convert it first: the GPU path reads it in place)");
  if (checked_element_count(t.shape) == 0) return {};  // nothing is read or written
  if (t.ptr % 16 != 0)
    throw CallError(what + " starts at a device address that is not 16-byte aligned");
  bool packed = true;
  int64_t acc = 1;
  for (size_t j = t.shape.size(); j-- > 0;) {
    if (t.shape[j] != 1 && t.strides[j] != acc) packed = false;
    acc *= t.shape[j];
  }
  if (packed) return {};
  const int64_t vec = 16 / dtype_bytes(t.type);
  const size_t r = t.shape.size();
  bool ok = t.shape[r - 1] == 1 || t.strides[r - 1] == 1;
  for (size_t j = 0; j + 1 < r; ++j)
    ok = ok && (t.shape[j] == 1 || (t.strides[j] >= 0 && t.strides[j] % vec == 0));
  if (!ok)
    throw CallError(what + " of shape " + shape_text(t.shape) + " has strides " +
                    shape_text(t.strides) + ": the GPU path reads packed tensors, or strided " +
                    "ones whose last dim is contiguous and whose other strides are multiples "
                    "of 16 bytes");
  return t.strides;
}

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
  std::map<std::string, std::vector<int64_t>> in_strides;
  for (const Parameter& par : p.params)
    in_strides[par.name] =
        check_device_tensor("input '" + par.name + "'", inputs.at(par.name), par.type);
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
    L = cuda_load(p, ext, careful ? CudaBuild::careful : CudaBuild::plain);
    if (cache) {
      std::lock_guard<std::mutex> lock(cache->mu);
      if (!cache->have_heads) cache->heads = cuda_head_dims(L->plan), cache->have_heads = true;
      cache->loaded[cache->key(ext, careful)] = L;
    }
  }
  CudaBound b;
  b.extv = cuda_extents(*L, p, ext);
  std::vector<DevicePtr> ptrs;
  std::vector<std::vector<int64_t>> strides;
  for (const PlanBuffer& B : L->plan.buffers) {
    const std::vector<int64_t> shape = buffer_shape(B, b.extv);
    if (B.kind == PlanBuffer::Input) {
      ptrs.push_back(inputs.at(B.name).ptr);
      strides.push_back(in_strides.at(B.name));
      continue;
    }
    if (B.kind != PlanBuffer::Output)
      throw BackendError("the CUDA backend's device calls take one-kernel plans");
    auto it = outputs.find(B.name);
    if (it == outputs.end()) throw CallError("missing output '" + B.name + "'");
    if (it->second.shape != shape)
      throw CallError("output '" + B.name + "' has shape " + shape_text(it->second.shape) +
                      "; this call gives " + shape_text(shape));
    strides.push_back(check_device_tensor("output '" + B.name + "'", it->second, B.type));
    ptrs.push_back(it->second.ptr);
  }
  if (err % 8 != 0 || err == 0)
    throw CallError("the error word must be 8 zeroed, 8-byte aligned int64 in device memory");
  bind_launch(*L, p, ptrs, strides, err, b);
  cuda_launch(*L, b, reinterpret_cast<CudaStreamHandle>(static_cast<uintptr_t>(stream)));
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
  CudaStream stream;
  CudaTiming t = cuda_time([&](CudaStreamHandle s) { cuda_launch(*L, b, s); }, warmup, iters,
                           stream.get());
  cuda_check_errors(p, L->plan, b);
  const Sm80Launch& la = L->src.launch;
  CudaBenchResult r;
  r.device = cuda_device_info().name;
  r.median_ms = t.median_ms;
  r.min_ms = t.min_ms;
  // Pairs: every grid point x rows x keys, times the fraction the mask keeps (cost.h).
  const int row = la.row_dim, red = L->plan.kernels[0].red_dim;
  double pairs = 1;
  for (int d : la.par_dims) pairs *= static_cast<double>(b.extv[d]);
  pairs *= static_cast<double>(b.extv[row]) * static_cast<double>(b.extv[red]);
  const double frac = mask_fraction(L->plan, L->plan.kernels[0], inputs, b.extv);
  const double per_pair = 2.0 * la.head_dim * la.num_scores + 2.0 * la.value_dim * la.num_acc;
  r.dense_flops = pairs * per_pair;
  r.flops = r.dense_flops * frac;
  r.tflops = r.median_ms > 0 ? r.flops / (r.median_ms * 1e-3) / 1e12 : 0;
  r.peak_tflops = 989.0;  // H200/H100 SXM dense bf16 datasheet
  const CudaDeviceInfo& di = cuda_device_info();
  if (di.cc_major == 8 && di.cc_minor == 0) r.peak_tflops = 312.0;  // A100
  return r;
}

}  // namespace flashgen
