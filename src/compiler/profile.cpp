// profile: a program's plan kernels timed on the CPU or CUDA backend, with the work each must do
// (plan/cost.h), the device's two ceilings, the key tiles an instrumented build of the kernel
// counted (-DFG_COUNT_TILES: codegen/cpu.cpp, codegen/cuda/fg_attn_sm80.cuh) and the launch;
// every step is a span of the Chrome trace. The timed kernel is the uninstrumented one.
// Preconditions: every dim has an extent in `sizes`. Tests: tests/tools/profile_test.cpp (CPU:
// tile counts against the mask evaluated on the host, the trace's events),
// tests/gpu/profile_gpu_test.cpp (the same on the GPU).
#include "flashgen/profile.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "compiler/cpu_call.h"
#include "compiler/cuda_call.h"
#include "flashgen/error.h"
#include "plan/cost.h"
#include "runtime/host_compiler.h"

namespace flashgen {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Spans of the trace, in microseconds from the profile's start.
class Tracer {
 public:
  explicit Tracer(std::vector<TraceSpan>& out) : out_(out), t0_(Clock::now()) {}
  double now_us() const { return 1e3 * ms_between(t0_, Clock::now()); }
  void add(const std::string& name, const std::string& cat, double start_us, double dur_us,
           int track = 0) {
    out_.push_back({name, cat, start_us, dur_us, track});
  }
  // Runs fn as a span on the host track.
  template <class Fn>
  auto span(const std::string& name, const std::string& cat, Fn&& fn) {
    const double s = now_us();
    struct Done {
      Tracer* t;
      std::string name, cat;
      double s;
      ~Done() { t->add(name, cat, s, t->now_us() - s); }
    } done{this, name, cat, s};
    return fn();
  }

 private:
  std::vector<TraceSpan>& out_;
  Clock::time_point t0_;
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Rates and the roofline from the counts, the median time and the peaks.
void finish_rates(KernelProfile& k, const DevicePeaks& peaks) {
  if (!k.cost_known || k.median_ms <= 0) return;
  const double s = k.median_ms * 1e-3;
  k.tflops = k.flops / s / 1e12;
  k.tbps = k.bytes / s / 1e12;
  k.intensity = k.bytes > 0 ? k.flops / k.bytes : 0;
  if (peaks.flops > 0 && peaks.bytes_per_s > 0) {
    const double mem_roof = k.bytes > 0 ? k.intensity * peaks.bytes_per_s : peaks.flops;
    k.bound_by_memory = mem_roof < peaks.flops;
    k.roofline_tflops = std::min(peaks.flops, mem_roof) / 1e12;
    k.roofline_fraction = k.roofline_tflops > 0 ? k.tflops / k.roofline_tflops : 0;
  }
}

// The work of kernel `k` at the call's extents and inputs (plan/cost.h).
void fill_cost(KernelProfile& kp, const Plan& plan, int k, const Extents& ext,
               const TensorMap& inputs) {
  const PlanKernel& K = plan.kernels[k];
  KernelCost c = kernel_cost(plan, K, ext);
  kp.cost_known = c.known;
  if (!c.known) return;
  std::vector<int64_t> extv;
  for (const std::string& d : plan.program.dims) extv.push_back(ext.at(d));
  kp.dense_flops = c.flops;
  kp.kept_fraction = mask_fraction(plan, K, inputs, extv);
  kp.flops = must_flops(c, kp.kept_fraction);
  kp.bytes = c.bytes;
}

TensorMap call_inputs(const Program& p, const Extents& sizes, const ProfileOptions& opt) {
  for (const auto& d : p.dims)
    if (!sizes.count(d))
      throw CallError("dimension '" + d + "' has no extent: add " + d + "=N to SIZES");
  TensorMap inputs = random_inputs(p, sizes, opt.seed);
  for (const auto& [name, t] : opt.given) {
    if (p.find_param(name) < 0)
      throw CallError("input '" + name + "' matches no parameter of program '" + p.name + "'");
    inputs[name] = t;
  }
  return inputs;
}

std::string compiled_label(bool process_cache, bool disk_cache) {
  return process_cache ? "process cache" : disk_cache ? "disk cache" : "compiled";
}

// ---- CPU ----

// Measures the CPU's f32 FMA rate and copy bandwidth with a small kernel built by the host
// compiler with the backend's flags, on every OpenMP thread.
const char* kCpuPeakSource = R"(
#include <stdint.h>
#include <omp.h>
#if defined(__AVX512F__)
#define FG_VW 64
#elif defined(__AVX__)
#define FG_VW 32
#else
#define FG_VW 16
#endif
typedef float fg_vf __attribute__((vector_size(FG_VW)));
extern "C" int fg_peak_threads() { return omp_get_max_threads(); }
extern "C" int fg_peak_lanes() { return FG_VW / 4; }
/* 12 independent chains of vector multiply-adds per thread; the empty asm keeps every
   iteration (the compiler may not fold or reorder the chains across it). */
extern "C" double fg_peak_fma(int64_t iters) {
  double total = 0;
#pragma omp parallel reduction(+ : total)
  {
    fg_vf a[12];
    for (int j = 0; j < 12; ++j)
      a[j] = (fg_vf){} + 1.0f + (float)(j + omp_get_thread_num()) * 1e-7f;
    const fg_vf m = (fg_vf){} + 0.9999999f, c = (fg_vf){} + 1e-7f;
    for (int64_t it = 0; it < iters; ++it) {
      for (int j = 0; j < 12; ++j) a[j] = a[j] * m + c;
      asm volatile("" : "+x"(a[0]), "+x"(a[1]), "+x"(a[2]), "+x"(a[3]), "+x"(a[4]), "+x"(a[5]),
                   "+x"(a[6]), "+x"(a[7]), "+x"(a[8]), "+x"(a[9]), "+x"(a[10]), "+x"(a[11]));
    }
    float s = 0;
    for (int j = 0; j < 12; ++j)
      for (int i = 0; i < FG_VW / 4; ++i) s += a[j][i];
    total += s;
  }
  return total;
}
extern "C" void fg_peak_copy(const float* src, float* dst, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}
)";

DevicePeaks cpu_peaks(const std::vector<std::string>& flags, Tracer& tr, int* threads) {
  DevicePeaks pk;
  {
    std::ifstream f("/proc/cpuinfo");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("model name", 0) == 0) {
        pk.device = line.substr(line.find(':') + 2);
        break;
      }
    if (pk.device.empty()) pk.device = "CPU";
  }
  tr.span("measure CPU peaks", "host", [&] {
    HostCompileOptions o;
    o.extra_flags = flags;
    std::shared_ptr<const HostLibrary> lib = host_compile(kCpuPeakSource, o);
    auto num_threads = lib->function<int()>("fg_peak_threads");
    auto fma = lib->function<double(int64_t)>("fg_peak_fma");
    const int lanes = lib->function<int()>("fg_peak_lanes")();
    auto copy = lib->function<void(const float*, float*, int64_t)>("fg_peak_copy");
    const int nt = num_threads();
    *threads = nt;
    // 12 vectors x lanes x 2 FLOPs per iteration per thread. The run length doubles until the
    // faster of two runs takes 20 ms (so thread start-up and the parallel region's cost vanish,
    // and one run slowed by another process does not end the search), then the best of 3.
    auto fastest = [&](int64_t iters, int runs) {
      double s = 1e30;
      for (int r = 0; r < runs; ++r) {
        auto t0 = Clock::now();
        volatile double sink = fma(iters);
        (void)sink;
        s = std::min(s, ms_between(t0, Clock::now()) * 1e-3);
      }
      return s;
    };
    int64_t iters = 1 << 12;
    while (fastest(iters, 2) < 0.02 && iters < (int64_t(1) << 40)) iters *= 2;
    const double best = 2.0 * 12 * lanes * static_cast<double>(iters) * nt / fastest(iters, 3);
    pk.flops = best;
    pk.flops_how = "measured: f32 multiply-adds, " + std::to_string(lanes) + " lanes, on " +
                   std::to_string(nt) + " threads, best of 3 (built like the kernels)";
    // Copy: 128 MiB read + 128 MiB written (past the last-level cache), best of 3.
    const int64_t n = int64_t(32) << 20;
    std::vector<float> a(static_cast<size_t>(n), 1.0f), b(static_cast<size_t>(n), 0.0f);
    double bw = 0;
    for (int rep = 0; rep < 4; ++rep) {
      auto t0 = Clock::now();
      copy(a.data(), b.data(), n);
      double s = ms_between(t0, Clock::now()) * 1e-3;
      if (rep > 0) bw = std::max(bw, 2.0 * 4 * static_cast<double>(n) / s);
    }
    pk.bytes_per_s = bw;
    pk.bytes_how = "measured: a 128 MiB copy on " + std::to_string(nt) +
                   " threads (bytes read + written), best of 3";
    return 0;
  });
  return pk;
}

ProfileReport profile_cpu(const Program& p, const Extents& sizes, const ProfileOptions& opt) {
  ProfileReport r;
  Tracer tr(r.trace);
  TensorMap inputs = call_inputs(p, sizes, opt);
  const Extents ext = bind_extents(p, inputs, sizes);
  bool process_cache = false;
  std::shared_ptr<const CpuCompiled> c = tr.span("compile", "compile", [&] {
    return cpu_load(p, false, opt.host_flags, &process_cache);
  });
  std::shared_ptr<const CpuCompiled> counting = tr.span(
      "compile (tile-counting build)", "compile", [&] { return cpu_load(p, true, opt.host_flags); });
  int threads = 0;
  r.peaks = cpu_peaks(opt.host_flags, tr, &threads);
  CpuBound b = tr.span("bind inputs", "transfer", [&] { return cpu_bind(*c, p, inputs, sizes); });
  const Plan& plan = c->plan;
  const int nk = plan.kernel_count();
  r.kernels.resize(nk);
  // Tile counts: one run of the counting build, on its own buffers.
  {
    CpuBound bc = cpu_bind(*counting, p, inputs, sizes);
    for (int k = 0; k < nk; ++k) {
      const double s = tr.now_us();
      r.kernels[k].tiles = cpu_run_kernel(*counting, bc, p, k);
      tr.add(plan.kernels[k].name + " (tile-counting build)", "host", s, tr.now_us() - s);
    }
  }
  for (int w = 0; w < opt.warmup; ++w)
    for (int k = 0; k < nk; ++k) cpu_run_kernel(*c, b, p, k);
  std::vector<std::vector<double>> samples(nk);
  for (int it = 0; it < opt.iters; ++it)
    for (int k = 0; k < nk; ++k) {
      const double s = tr.now_us();
      auto t0 = Clock::now();
      cpu_run_kernel(*c, b, p, k);
      samples[k].push_back(ms_between(t0, Clock::now()));
      tr.add(plan.kernels[k].name, "kernel", s, tr.now_us() - s, 1);
    }
  tr.span("outputs", "transfer", [&] { return cpu_outputs(*c, b).size(); });

  const bool disk = c->lib->from_cache();
  r.backend_detail = "cpu (" + std::to_string(threads) + " OpenMP threads)";
  for (int k = 0; k < nk; ++k) {
    const PlanKernel& K = plan.kernels[k];
    KernelProfile& kp = r.kernels[k];
    kp.name = K.name;
    kp.compiled = compiled_label(process_cache, disk);
    kp.compile_ms = process_cache ? 0 : c->compile_ms;
    kp.iters = opt.iters;
    kp.median_ms = median_of(samples[k]);
    kp.min_ms = *std::min_element(samples[k].begin(), samples[k].end());
    kp.max_ms = *std::max_element(samples[k].begin(), samples[k].end());
    fill_cost(kp, plan, k, ext, inputs);
    kp.has_key_loop = K.red_dim >= 0;
    if (K.row_dim >= 0) kp.row_dim = plan.program.dims[K.row_dim];
    if (K.red_dim >= 0) kp.key_dim = plan.program.dims[K.red_dim];
    kp.row_tile = K.row_dim >= 0 ? K.row_tile : 1;
    kp.key_tile = K.red_tile;
    int64_t points = 1;
    for (int d : K.grid) {
      const int64_t e = ext.at(plan.program.dims[d]);
      points *= d == K.row_dim ? (e + K.row_tile - 1) / K.row_tile : e;
    }
    kp.grid_points = points;
    kp.threads = threads;
    finish_rates(kp, r.peaks);
  }
  return r;
}

// ---- CUDA ----

// Dense bf16 tensor-core FLOPs per clock per SM (mma with f32 accumulation), by compute
// capability: the vendor's rates for the A100 and the H100 / H200.
double tensor_flops_per_clock(int major, int minor) {
  if (major == 8 && minor == 0) return 2048;
  if (major == 9 && minor == 0) return 4096;
  return 0;
}

DevicePeaks cuda_peaks() {
  const CudaDeviceInfo& d = cuda_device_info();
  DevicePeaks pk;
  pk.device = d.name;
  const double per_clock = tensor_flops_per_clock(d.cc_major, d.cc_minor);
  char buf[256];
  if (per_clock > 0 && d.clock_khz > 0) {
    pk.flops = d.sm_count * (d.clock_khz * 1e3) * per_clock;
    std::snprintf(buf, sizeof buf,
                  "%d SMs x %.0f MHz x %.0f FLOP/clock/SM (dense bf16 tensor cores, "
                  "compute capability %d.%d)",
                  d.sm_count, d.clock_khz / 1e3, per_clock, d.cc_major, d.cc_minor);
    pk.flops_how = buf;
    if (d.cc_major == 9)
      pk.flops_how += "; kernels whose products are mma.sync (explain: products) do not reach the wgmma rate";
  } else {
    std::snprintf(buf, sizeof buf,
                  "unknown: flashgen has no dense bf16 rate for compute capability %d.%d",
                  d.cc_major, d.cc_minor);
    pk.flops_how = buf;
  }
  if (d.memory_clock_khz > 0 && d.memory_bus_bits > 0) {
    pk.bytes_per_s = 2.0 * d.memory_clock_khz * 1e3 * d.memory_bus_bits / 8;
    std::snprintf(buf, sizeof buf, "2 x %.0f MHz x %d-bit bus (the device's memory clock)",
                  d.memory_clock_khz / 1e3, d.memory_bus_bits);
    pk.bytes_how = buf;
  } else {
    pk.bytes_how = "unknown: the device reports no memory clock or bus width";
  }
  return pk;
}

ProfileReport profile_cuda(const Program& p, const Extents& sizes, const ProfileOptions& opt) {
  cuda_require();
  ProfileReport r;
  Tracer tr(r.trace);
  TensorMap inputs = call_inputs(p, sizes, opt);
  const Extents ext = bind_extents(p, inputs, sizes);
  bool process_cache = false;
  std::shared_ptr<const CudaLoaded> L = tr.span("compile", "compile", [&] {
    return cuda_load(p, ext, CudaBuild::plain, &process_cache);
  });
  std::shared_ptr<const CudaLoaded> counting = tr.span(
      "compile (tile-counting build)", "compile", [&] { return cuda_load(p, ext, CudaBuild::count_tiles); });
  r.peaks = cuda_peaks();
  r.backend_detail = "cuda (" + L->arch + ")";
  CudaBound b = tr.span("upload inputs", "transfer", [&] { return cuda_bind(*L, p, inputs, ext); });
  // the builds compiled at their first use that this call launches, compiled before it (in an
  // earlier call of this process): their NVRTC time is not this call's
  std::vector<bool> built_before(L->kernels.size(), false);
  for (size_t i = 0; i < L->kernels.size() && i < b.kernels.size(); ++i)
    if (const LazyCudaKernel* build = launched_build(L->kernels[i], b.kernels[i]))
      built_before[i] = build->compiled();
  // kernels compiled at their first use (the few-rows kernel), before anything is timed
  tr.span("compile (kernels of these sizes)", "compile", [&] {
    cuda_prepare(*L, b);
    cuda_prepare(*counting, b);
    return 0;
  });
  // Tile counts: the counting build once over all kernels on the same buffers (its params have
  // the same layout; later kernels read the intermediates of earlier ones), then each kernel
  // alone from a zeroed word.
  tr.span("all kernels (tile-counting build)", "host", [&] {
    cuda_launch(*counting, b, nullptr);
    cuda_synchronize();
    return 0;
  });
  cuda_check_errors(p, L->plan, b);
  CudaStream stream;
  for (size_t i = 0; i < L->kernels.size(); ++i) {
    const CudaLoadedKernel& K = L->kernels[i];
    const PlanKernel& pk = L->plan.kernels[K.low.plan_kernel];
    const CudaBoundKernel& bk = b.kernels[i];
    KernelProfile kp;
    b.err.memset(0);
    cuda_launch(*counting, b, nullptr, static_cast<int>(i));
    cuda_synchronize();
    kp.tiles = cuda_tile_counts(b);
    b.err.memset(0);
    const double t_base = tr.now_us();
    CudaTiming t = cuda_time([&](CudaStreamHandle s) { cuda_launch(*L, b, s, static_cast<int>(i)); },
                             opt.warmup, opt.iters, stream.get());
    // cuda_time returns when the last run's end event completes: place the runs back from now.
    const double t_end = tr.now_us();
    // Device spans: each run at its event offset from the first timed run, which starts after
    // the warm-up runs; the host span covers the whole timing loop.
    const std::string& entry = launched_entry(K, bk);
    tr.add(entry + ": timed runs (warm-up " + std::to_string(opt.warmup) + " + " +
               std::to_string(opt.iters) + ")",
           "host", t_base, t_end - t_base);
    const double first = t_end - 1e3 * (t.start_offsets_ms.back() + t.samples_ms.back());
    for (size_t j = 0; j < t.samples_ms.size(); ++j)
      tr.add(entry, "kernel", first + 1e3 * t.start_offsets_ms[j], 1e3 * t.samples_ms[j],
             1);
    cuda_check_errors(p, L->plan, b);
    {
      int64_t err[8];
      b.err.download(err, sizeof err);
      if (err[7])
        kp.note = "on these inputs an accumulator ends inf or NaN, so a run also launches the "
                  "careful build (the strong zero of masked keys), which is not timed here";
    }
    kp.name = entry + " (" + path_name(K.low.path) + " path)";
    kp.compiled = compiled_label(process_cache, L->from_disk_cache);
    kp.compile_ms = process_cache || i > 0 ? 0 : L->compile_ms;
    kp.iters = opt.iters;
    kp.median_ms = t.median_ms;
    kp.min_ms = t.min_ms;
    kp.max_ms = t.max_ms;
    fill_cost(kp, L->plan, K.low.plan_kernel, ext, inputs);
    kp.has_key_loop = pk.red_dim >= 0;
    if (pk.row_dim >= 0) kp.row_dim = L->plan.program.dims[pk.row_dim];
    if (pk.red_dim >= 0) kp.key_dim = L->plan.program.dims[pk.red_dim];
    kp.grid[0] = bk.grid.x;
    kp.grid[1] = bk.grid.y;
    kp.grid[2] = bk.grid.z;
    kp.threads = static_cast<int>(bk.block.x);
    kp.smem_bytes = static_cast<int64_t>(bk.smem);
    const CudaKernelInfo info = launched_kernel(K, bk).info();
    // NVRTC's time for what this call compiled (after launched_kernel: a kernel with nothing to
    // run compiles its build only there)
    if (!process_cache && K.nvrtc_ms > 0) kp.nvrtc_ms.push_back({K.low.entry, K.nvrtc_ms});
    if (const LazyCudaKernel* build = launched_build(K, bk);
        build && !built_before[i] && build->nvrtc_ms() > 0) {
      std::string label = build->entry();
      if (build == K.cp_async.get() || build == K.walking_cp_async.get()) label += " (cp.async)";
      kp.nvrtc_ms.push_back({label, build->nvrtc_ms()});
    }
    kp.registers = info.num_regs;
    kp.local_bytes = info.local_bytes;
    if (K.low.path == LoweredKernel::Path::tensor_core) {
      const Sm80Launch& la = K.low.tensor_core.launch;
      kp.row_tile = bk.few ? 16 : la.block_m;
      kp.key_tile = bk.few ? la.few_block_n : la.block_n;
      kp.blocks_per_sm = bk.few ? 1 : la.min_blocks;
      kp.value_split = la.value_split_of(bk.few);
      kp.key_split = bk.key_split;
      if (la.warp_specialized && !bk.few) kp.kv_copies = bk.tma ? "TMA" : "cp.async";
      kp.walk = bk.walk;
      if (!bk.splits.empty())
        kp.note += std::string(kp.note.empty() ? "" : "; ") + "the time includes " +
                   std::to_string(bk.splits.size()) + " launches of " + la.split_entry +
                   (la.num_acc > 0 ? " (Q, K and V into " : " (Q and K into ") +
                   std::to_string(la.pieces) + " bf16 pieces)";
      if (bk.few || bk.key_split > 1)
        kp.note += std::string(kp.note.empty() ? "" : "; ") +
                   (bk.few ? "the few-rows kernel (16 rows per block)" : "the full kernel") +
                   (bk.key_split > 1 ? ", the key loop split across " +
                                           std::to_string(bk.key_split) +
                                           " blocks and combined (timed together)"
                                     : std::string());
    } else {
      kp.row_tile = pk.row_tile;
      kp.key_tile = pk.red_tile;
      kp.blocks_per_sm = K.low.element.blocks_per_sm;
      if (K.low.element.thread_per_point)
        kp.note += std::string(kp.note.empty() ? "" : "; ") +
                   "a thread per grid point";
      if (bk.scratch_bytes > 0)
        kp.note += std::string(kp.note.empty() ? "" : "; ") + "its workspace (" +
                   std::to_string(bk.scratch_bytes) + " bytes) is in device memory";
    }
    finish_rates(kp, r.peaks);
    r.kernels.push_back(kp);
  }
  tr.span("download outputs", "transfer", [&] { return cuda_download_outputs(*L, b).size(); });
  return r;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// 1.23 G / 456 M / 7.8 k with a unit.
std::string si(double v, const std::string& unit) {
  const char* pre[] = {"", "k", "M", "G", "T", "P"};
  int i = 0;
  while (std::fabs(v) >= 1000 && i < 5) {
    v /= 1000;
    ++i;
  }
  return fmt(v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f", v) + " " + pre[i] + unit;
}

std::string time_ms(double ms) { return fmt(ms >= 100 ? "%.1f" : ms >= 1 ? "%.3f" : "%.4f", ms) + " ms"; }

}  // namespace

ProfileReport profile(const Program& p, const Extents& sizes, const ProfileOptions& opt) {
  if (opt.iters < 1) throw CallError("profile needs at least one timed run (--iters)");
  if (opt.warmup < 0) throw CallError("--warmup must not be negative");
  ProfileReport r;
  if (opt.backend == Backend::cpu) r = profile_cpu(p, sizes, opt);
  else if (opt.backend == Backend::cuda) r = profile_cuda(p, sizes, opt);
  else throw CallError("profile runs the cpu or the cuda backend (the reference is not timed)");
  r.program = p.name;
  r.backend = opt.backend;
  r.sizes = sizes;
  r.warmup = opt.warmup;
  return r;
}

std::string profile_text(const ProfileReport& r) {
  std::ostringstream os;
  os << "program " << r.program << " on " << r.backend_detail << ", sizes ";
  bool first = true;
  for (const auto& [d, e] : r.sizes) {
    os << (first ? "" : ",") << d << "=" << e;
    first = false;
  }
  os << "\ndevice: " << r.peaks.device << "\n";
  os << "  peak compute: " << (r.peaks.flops > 0 ? si(r.peaks.flops, "FLOP/s") : "unknown")
     << "  (" << r.peaks.flops_how << ")\n";
  os << "  peak memory:  " << (r.peaks.bytes_per_s > 0 ? si(r.peaks.bytes_per_s, "B/s") : "unknown")
     << "  (" << r.peaks.bytes_how << ")\n";
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    const KernelProfile& k = r.kernels[i];
    os << "\nkernel " << i << " (" << k.name << ")\n";
    os << "  compile:   " << k.compiled;
    if (k.compiled != "process cache") os << " in " << time_ms(k.compile_ms);
    for (size_t j = 0; j < k.nvrtc_ms.size(); ++j)
      os << (j == 0 ? " (NVRTC: " : ", ")
         << k.nvrtc_ms[j].first << " " << time_ms(k.nvrtc_ms[j].second)
         << (j + 1 == k.nvrtc_ms.size() ? ")" : "");
    os << "\n";
    os << "  time:      median " << time_ms(k.median_ms) << " (min " << time_ms(k.min_ms)
       << ", max " << time_ms(k.max_ms) << ") over " << k.iters << " runs after " << r.warmup
       << " warm-up runs\n";
    if (k.cost_known) {
      os << "  work:      " << si(k.flops, "FLOP") << " to do";
      if (k.kept_fraction < 1)
        os << " (the mask keeps " << fmt("%.1f", 100 * k.kept_fraction) << "% of (" << k.row_dim
           << ", " << k.key_dim << ") pairs; dense " << si(k.dense_flops, "FLOP") << ")";
      os << ", " << si(k.bytes, "B") << " to move (each buffer once)\n";
      os << "  achieved:  " << si(k.tflops * 1e12, "FLOP/s") << ", " << si(k.tbps * 1e12, "B/s")
         << "; intensity " << fmt("%.1f", k.intensity) << " FLOP/B\n";
      if (k.roofline_tflops > 0)
        os << "  roofline:  " << si(k.roofline_tflops * 1e12, "FLOP/s") << " attainable at this "
           << "intensity (" << (k.bound_by_memory ? "memory" : "compute") << "-bound); achieved "
           << fmt("%.1f", 100 * k.roofline_fraction) << "% of it"
           << (k.roofline_fraction > 1 && r.backend == Backend::cpu
                   ? " (above the measured peak: the kernel ran from cache, or other work ran "
                     "while the peaks were measured)"
                   : "")
           << "\n";
      else
        os << "  roofline:  unknown (a peak is unknown)\n";
    } else {
      os << "  work:      unknown (an extent is missing)\n";
    }
    if (k.has_key_loop) {
      const int64_t total = k.tiles.computed + k.tiles.skipped;
      os << "  tiles:     " << total << " key tiles of " << k.row_tile << " " << k.row_dim
         << " x " << k.key_tile << " " << k.key_dim << ": " << k.tiles.computed << " computed ("
         << k.tiles.full << " full, without mask code), " << k.tiles.skipped
         << " skipped as empty (counted by the kernel";
      if (k.value_split > 1) os << "; each of the " << k.value_split << " value-column blocks counts";
      os << ")\n";
    } else {
      os << "  tiles:     no key loop\n";
    }
    if (r.backend == Backend::cuda) {
      os << "  launch:    grid (" << k.grid[0] << ", " << k.grid[1] << ", " << k.grid[2] << ") x "
         << k.threads << " threads, " << k.smem_bytes << " B dynamic shared memory, "
         << k.registers << " registers and " << k.local_bytes << " B local memory per thread"
         << (k.local_bytes ? " (spills or stack)" : " (no spills)") << ", at least "
         << k.blocks_per_sm << " block" << (k.blocks_per_sm == 1 ? "" : "s") << " per SM"
         << (k.kv_copies.empty() ? "" : ", K/V copied by " + k.kv_copies)
         << (k.walk ? ", persistent: each block walks work items (row tile, parallel index)" : "")
         << "\n";
    } else {
      os << "  launch:    " << k.grid_points << " grid points on " << k.threads
         << " OpenMP threads\n";
    }
    if (!k.note.empty()) os << "  note:      " << k.note << "\n";
  }
  return os.str();
}

std::string chrome_trace_json(const ProfileReport& r) {
  nlohmann::json ev = nlohmann::json::array();
  const char* tracks[] = {"host", r.backend == Backend::cuda ? "GPU stream" : "kernels"};
  for (int t = 0; t < 2; ++t)
    ev.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", t},
                  {"args", {{"name", tracks[t]}}}});
  ev.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 0},
                {"args", {{"name", "flashgen profile " + r.program + " (" + r.backend_detail + ")"}}}});
  for (const TraceSpan& s : r.trace)
    ev.push_back({{"name", s.name}, {"cat", s.category}, {"ph", "X"}, {"pid", 1},
                  {"tid", s.track}, {"ts", s.start_us}, {"dur", s.dur_us}});
  nlohmann::json j;
  j["traceEvents"] = ev;
  j["displayTimeUnit"] = "ms";
  return j.dump(1);
}

}  // namespace flashgen
