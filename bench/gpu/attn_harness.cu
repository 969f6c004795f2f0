// attn_harness.cu — standalone check and timing of flashgen's sm80 attention kernel template
// with hand-written Specs, written the way the CUDA emitter will generate them.
//
// What: instantiates fg::attn_fwd_sm80 for vanilla, causal, softcap, alibi+causal+GQA+lse,
//   a row/key mask with fully masked rows, and diff_attn; checks each against a plain f32 CUDA
//   reference at odd sizes (m != n, extents that are not tile multiples, outputs poisoned with
//   NaN first) and times vanilla/causal/diff at
//   benchmark sizes with CUDA events (median of warm runs). Prints one line per case.
// Build (on the GPU machine, see scripts/gpu_check):
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -I src/codegen/cuda \
//        bench/gpu/attn_harness.cu -o build-gpu/attn_harness
// Usage: attn_harness [check|time|all|small|none]
//   check: odd sizes vs the reference; time: benchmark sizes (2 heads checked, then timed);
//   small: tiny odd sizes, for compute-sanitizer memcheck/racecheck; none: attributes only.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fg_attn_sm80.cuh"

#define CK(x)                                                                         \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_),   \
                   __FILE__, __LINE__, #x);                                           \
      std::exit(2);                                                                   \
    }                                                                                 \
  } while (0)

using fg::bf16raw;
using fg::i64;

// ------------------------------------------------------------------------------------------
// Spec 1: one score, one softmax group, one V (vanilla, causal, softcap, alibi, GQA, lse).
// Flags stand in for what the emitter would write out as literal element code.
// Layouts: q [B,H,M,D], k/v [B,Hkv,N,D|DV], o [B,H,M,DV] bf16, lse [B,H,M] f32.
// ------------------------------------------------------------------------------------------
struct AttnParams {
  const bf16raw *q, *k, *v;
  bf16raw* o;
  float* lse;
  int B, H, Hkv, M, N;
  float scale_log2;  // scale * log2(e), folded by the emitter
  float softcap;     // cap (natural units)
};

template <int D_, int DV_, int NW, int BN, bool CAUSAL, bool SOFTCAP = false, bool ALIBI = false,
          bool LSE = false, int MW = 1, bool SKIP = false>
struct StdSpec {
  static constexpr bool kSkipRescale = SKIP;
  using Elem = fg::BF16;
  static constexpr int kNumScores = 1, kNumGroups = 1, kNumV = 1, kNumAcc = 1;
  static constexpr int kHeadDim = D_, kValueDim = DV_, kWarps = NW, kBlockN = BN;
  static constexpr int kWarpMBlocks = MW;
  static constexpr int kMinBlocks = NW >= 8 ? 1 : 2;
  static constexpr bool kReverseM = CAUSAL;
  static constexpr __device__ int acc_group(int) { return 0; }
  static constexpr __device__ int acc_v(int) { return 0; }
  using Params = AttnParams;
  static __device__ int num_parallel(const Params& p) { return p.B * p.H; }
  struct Ctx : fg::CtxBase<1, 1> {
    bf16raw* o;
    float* lse;
    float scale_log2, softcap, tanh_arg, slope_nat, slope_over_scale;
  };
  static __device__ void make_ctx(const Params& p, int par, int, Ctx& c) {
    const int b = par / p.H, h = par % p.H;
    const int hk = h / (p.H / p.Hkv);  // GQA: query head -> kv head
    c.M = p.M;
    c.N = p.N;
    c.q[0] = p.q + ((i64)par * p.M) * D_;
    c.q_ld[0] = D_;
    c.k[0] = p.k + ((i64)(b * p.Hkv + hk) * p.N) * D_;
    c.k_ld[0] = D_;
    c.v[0] = p.v + ((i64)(b * p.Hkv + hk) * p.N) * DV_;
    c.v_ld[0] = DV_;
    c.o = p.o + ((i64)par * p.M) * DV_;
    c.lse = p.lse ? p.lse + (i64)par * p.M : nullptr;
    c.scale_log2 = p.scale_log2;
    c.softcap = p.softcap;
    c.tanh_arg = p.scale_log2 / fg::kLog2e / p.softcap;
    c.slope_nat = exp2f(-8.f * (h + 1) / p.H);
    c.slope_over_scale = c.slope_nat * fg::kLog2e / p.scale_log2;
  }
  static __device__ int classify(const Ctx&, int m0, int m1, int n0, int n1) {
    if (!CAUSAL) return fg::kTileFull;
    if (n0 > m1 - 1) return fg::kTileEmpty;    // every n > every m
    if (n1 - 1 <= m0) return fg::kTileFull;    // every n <= every m
    return fg::kTilePartial;
  }
  // score units: scale*log2e (plain) or log2e (softcap, where the scale sits inside tanh)
  template <int g>
  static __device__ float score_scale(const Ctx& x) {
    return SOFTCAP ? fg::kLog2e : x.scale_log2;
  }
  template <int g>
  static __device__ float score(const float (&c)[1], int m, int n, const Ctx& x,
                                 const fg::TileView&) {
    float s;
    if (SOFTCAP) {
      s = x.softcap * fg::fast_tanh(c[0] * x.tanh_arg);  // cap * tanh(c * scale / cap)
      if (ALIBI) s += x.slope_nat * (float)(n - m);
    } else {
      s = c[0];
      if (ALIBI) s += x.slope_over_scale * (float)(n - m);  // (c*scale + slope*(n-m)) / scale
    }
    return s;
  }
  // the causal mask, on a partial tile's elements after score
  static constexpr bool kKeep = CAUSAL;
  static __device__ bool keep(int m, int n, const Ctx&, const fg::TileView&) { return n <= m; }
  static __device__ void store(const Ctx& x, int m, int e, const float (&o)[1][2],
                               const fg::RowStats<1>& st) {
    fg::store_bf16x2(x.o + (i64)m * DV_ + e, o[0][0] * st.inv_l[0], o[0][1] * st.inv_l[0]);
  }
  static __device__ void store_row(const Ctx& x, int m, const fg::RowStats<1>& st) {
    if (LSE) x.lse[m] = st.lse(0);
  }
};

// ------------------------------------------------------------------------------------------
// Spec 2: differential attention: (softmax(s1) - lam softmax(s2)) v, v of width DV = 2D.
// Two scores, two groups, one shared V, two accumulators.
// ------------------------------------------------------------------------------------------
struct DiffParams {
  const bf16raw *q1, *k1, *q2, *k2, *v;
  bf16raw* o;
  int B, H, M, N;
  float scale_log2, lam;
};
template <int D_, int NW, int BN, int MW = 1, bool SKIP = false>
struct DiffSpec {
  static constexpr bool kSkipRescale = SKIP;
  static constexpr int DV_ = 2 * D_;
  using Elem = fg::BF16;
  static constexpr int kNumScores = 2, kNumGroups = 2, kNumV = 1, kNumAcc = 2;
  static constexpr int kHeadDim = D_, kValueDim = DV_, kWarps = NW, kBlockN = BN;
  static constexpr int kWarpMBlocks = MW;
  static constexpr int kMinBlocks = 1;
  static constexpr bool kReverseM = false;
  static constexpr __device__ int acc_group(int a) { return a; }
  static constexpr __device__ int acc_v(int) { return 0; }
  using Params = DiffParams;
  static __device__ int num_parallel(const Params& p) { return p.B * p.H; }
  struct Ctx : fg::CtxBase<2, 1> {
    bf16raw* o;
    float scale_log2, lam;
  };
  static __device__ void make_ctx(const Params& p, int par, int, Ctx& c) {
    c.M = p.M;
    c.N = p.N;
    c.q[0] = p.q1 + (i64)par * p.M * D_;
    c.q[1] = p.q2 + (i64)par * p.M * D_;
    c.q_ld[0] = c.q_ld[1] = D_;
    c.k[0] = p.k1 + (i64)par * p.N * D_;
    c.k[1] = p.k2 + (i64)par * p.N * D_;
    c.k_ld[0] = c.k_ld[1] = D_;
    c.v[0] = p.v + (i64)par * p.N * DV_;
    c.v_ld[0] = DV_;
    c.o = p.o + (i64)par * p.M * DV_;
    c.scale_log2 = p.scale_log2;
    c.lam = p.lam;
  }
  static __device__ int classify(const Ctx&, int, int, int, int) { return fg::kTileFull; }
  template <int g>
  static __device__ float score_scale(const Ctx& x) {
    return x.scale_log2;
  }
  template <int g>
  static __device__ float score(const float (&c)[2], int, int, const Ctx&, const fg::TileView&) {
    return c[g];
  }
  static __device__ void store(const Ctx& x, int m, int e, const float (&o)[2][2],
                               const fg::RowStats<2>& st) {
    const float a = st.inv_l[0], b = x.lam * st.inv_l[1];
    fg::store_bf16x2(x.o + (i64)m * DV_ + e, o[0][0] * a - o[1][0] * b, o[0][1] * a - o[1][1] * b);
  }
  static __device__ void store_row(const Ctx&, int, const fg::RowStats<2>&) {}
};

// A data-dependent-style mask on top of any StdSpec: rows m % 7 == 3 are fully masked (their
// output must be 0 and their logsumexp -inf), keys n % 5 == 1 are masked everywhere. The
// classifier answers PARTIAL for every tile (what the emitter does for masks it cannot bound).
template <class Base>
struct RowMaskSpec : Base {
  static __device__ int classify(const typename Base::Ctx&, int, int, int, int) {
    return fg::kTilePartial;
  }
  static constexpr bool kKeep = true;
  static __device__ bool keep(int m, int n, const typename Base::Ctx& x, const fg::TileView& tv) {
    if (m % 7 == 3 || n % 5 == 1) return false;
    if constexpr (fg::KeepOf<Base>::value) return Base::keep(m, n, x, tv);
    return true;
  }
};

template <class Spec>
__global__ void __launch_bounds__(Spec::kWarps * 32, Spec::kMinBlocks)
    fg_entry(const typename Spec::Params p) {
  fg::attn_fwd_sm80<Spec>(p);
}

// ------------------------------------------------------------------------------------------
// Reference: one thread per (par, m) row, f32, two passes. Independent of the Spec code.
// ------------------------------------------------------------------------------------------
struct RefArgs {
  const bf16raw *q1, *k1, *q2, *k2, *v;
  int H, Hkv, M, N, D, DV, npar;
  float scale, softcap, lam;
  bool causal, alibi, diff, has_softcap;
  bool rowmask = false;  // rows m % 7 == 3 and keys n % 5 == 1 masked (fully masked rows)
};
__device__ float ref_score(const RefArgs& a, const bf16raw* q, const bf16raw* k, int h, int m,
                           int n) {
  float s = 0.f;
  for (int d = 0; d < a.D; ++d) s += fg::bf16_to_f32(q[d]) * fg::bf16_to_f32(k[(i64)n * a.D + d]);
  s *= a.scale;
  if (a.has_softcap) s = a.softcap * tanhf(s / a.softcap);
  if (a.alibi) s += exp2f(-8.f * (h + 1) / a.H) * (float)(n - m);
  if (a.causal && n > m) s = -INFINITY;
  if (a.rowmask && (m % 7 == 3 || n % 5 == 1)) s = -INFINITY;
  return s;
}
__global__ void ref_kernel(RefArgs a, float* out, float* lse) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= a.npar * a.M) return;
  const int par = row / a.M, m = row % a.M;
  const int b = par / a.H, h = par % a.H, hk = h / (a.H / a.Hkv);
  const i64 kvoff = (i64)(b * a.Hkv + hk) * a.N;
  float acc[256];
  for (int e = 0; e < a.DV; ++e) acc[e] = 0.f;
  const int ng = a.diff ? 2 : 1;
  for (int g = 0; g < ng; ++g) {
    const bf16raw* q = (g ? a.q2 : a.q1) + ((i64)par * a.M + m) * a.D;
    const bf16raw* k = (g ? a.k2 : a.k1) + kvoff * a.D;
    float mx = -INFINITY;
    for (int n = 0; n < a.N; ++n) mx = fmaxf(mx, ref_score(a, q, k, h, m, n));
    float l = 0.f;
    if (mx != -INFINITY)
      for (int n = 0; n < a.N; ++n) l += expf(ref_score(a, q, k, h, m, n) - mx);
    const float w = (g ? -a.lam : 1.f) / (l > 0.f ? l : 1.f);
    if (l > 0.f)
      for (int n = 0; n < a.N; ++n) {
        const float p = expf(ref_score(a, q, k, h, m, n) - mx) * w;
        for (int e = 0; e < a.DV; ++e) acc[e] += p * fg::bf16_to_f32(a.v[(kvoff + n) * a.DV + e]);
      }
    if (g == 0 && lse) lse[row] = l > 0.f ? mx + logf(l) : -INFINITY;
  }
  for (int e = 0; e < a.DV; ++e) out[(i64)row * a.DV + e] = acc[e];
}

__global__ void fill_random(bf16raw* p, i64 n, unsigned seed) {
  const i64 stride = (i64)gridDim.x * blockDim.x;
  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < n; i += stride) {
    unsigned x = (unsigned)i * 2654435761u ^ seed * 0x9e3779b9u;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    const float u = (x >> 8) * (1.f / 16777216.f);  // [0,1)
    p[i] = fg::f32_to_bf16((u * 2.f - 1.f) * 1.7320508f);  // unit variance
  }
}

// ------------------------------------------------------------------------------------------
struct Buf {
  void* p = nullptr;
  size_t bytes = 0;
  explicit Buf(size_t b) : bytes(b) { CK(cudaMalloc(&p, b)); }
  ~Buf() { cudaFree(p); }
  template <class T>
  T* as() const { return (T*)p; }
};
static unsigned g_seed = 12345;
static void randomize(const Buf& b) {
  fill_random<<<1024, 256>>>(b.as<bf16raw>(), (i64)(b.bytes / 2), g_seed++);
  CK(cudaGetLastError());
}
static float host_bf16(bf16raw h) {
  unsigned u = ((unsigned)h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

template <class Spec>
static void launch(const typename Spec::Params& p, int M, int npar, cudaStream_t st = 0) {
  constexpr int smem = fg::AttnSm80<Spec>::kSmemBytes;
  static bool once = false;
  if (!once) {
    CK(cudaFuncSetAttribute(fg_entry<Spec>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    once = true;
  }
  constexpr int BM = fg::AttnSm80<Spec>::BM;
  const int gy = std::min(npar, 65535);
  dim3 grid((M + BM - 1) / BM, gy, (npar + gy - 1) / gy);
  fg_entry<Spec><<<grid, Spec::kWarps * 32, smem, st>>>(p);
  CK(cudaGetLastError());
}

template <class F>
static float median_ms(F&& run, int warm, int reps) {
  for (int i = 0; i < warm; ++i) run();
  std::vector<float> t;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a));
    run();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Compare out (bf16 [npar_all, M, DV]) on the first ref.npar parallel indices with the reference;
// count NaN (unwritten, poisoned) elements over the whole output.
struct Err {
  double rel_l2, max_abs;
  long nan_count;
  double lse_max_abs;
};
static Err compare(const RefArgs& ra, const Buf& out, int npar_all, const float* lse_dev) {
  const i64 rows = (i64)ra.npar * ra.M;
  Buf ref(rows * ra.DV * 4), rlse(rows * 4);
  ref_kernel<<<(unsigned)((rows + 127) / 128), 128>>>(ra, ref.as<float>(),
                                                        lse_dev ? rlse.as<float>() : nullptr);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> r(rows * ra.DV);
  std::vector<bf16raw> o((size_t)npar_all * ra.M * ra.DV);
  CK(cudaMemcpy(r.data(), ref.p, r.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(o.data(), out.p, o.size() * 2, cudaMemcpyDeviceToHost));
  Err e{0, 0, 0, 0};
  double num = 0, den = 0;
  for (size_t i = 0; i < o.size(); ++i)
    if (std::isnan(host_bf16(o[i]))) ++e.nan_count;
  for (size_t i = 0; i < r.size(); ++i) {
    const double d = (double)host_bf16(o[i]) - r[i];
    num += d * d;
    den += (double)r[i] * r[i];
    e.max_abs = std::max(e.max_abs, std::fabs(d));
  }
  e.rel_l2 = std::sqrt(num / std::max(den, 1e-30));
  if (lse_dev) {
    std::vector<float> a(rows), b(rows);
    CK(cudaMemcpy(a.data(), lse_dev, rows * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(b.data(), rlse.p, rows * 4, cudaMemcpyDeviceToHost));
    for (i64 i = 0; i < rows; ++i) {
      if (std::isinf(a[i]) && std::isinf(b[i]) && a[i] == b[i]) continue;
      e.lse_max_abs = std::max(e.lse_max_abs, (double)std::fabs(a[i] - b[i]));
    }
  }
  return e;
}

static int g_failures = 0;
static void report(const char* name, const std::string& shape, const Err& e, double tol) {
  const bool ok = e.nan_count == 0 && e.rel_l2 < tol && !std::isnan(e.rel_l2) &&
                  e.lse_max_abs < 2e-2;
  if (!ok) ++g_failures;
  std::printf("CHECK %-28s %-34s rel_l2=%.3e max_abs=%.3e lse_err=%.2e unwritten=%ld %s\n", name,
              shape.c_str(), e.rel_l2, e.max_abs, e.lse_max_abs, e.nan_count, ok ? "PASS" : "FAIL");
}

// Runs Spec (StdSpec family) at B,H,Hkv,M,N; checks the first `check_par` parallel indices
// (all when 0); optionally times. Returns median ms (or 0).
template <class Spec, bool CAUSAL, bool SOFTCAP, bool ALIBI, bool LSE, bool ROWMASK = false>
static float run_std(const char* name, int B, int H, int Hkv, int M, int N, int check_par,
                     bool time_it, bool check = true) {
  constexpr int D = Spec::kHeadDim, DV = Spec::kValueDim;
  const int npar = B * H;
  Buf q((size_t)npar * M * D * 2), k((size_t)B * Hkv * N * D * 2), v((size_t)B * Hkv * N * DV * 2),
      o((size_t)npar * M * DV * 2), lse((size_t)npar * M * 4);
  randomize(q);
  randomize(k);
  randomize(v);
  CK(cudaMemset(o.p, 0xff, o.bytes));  // NaN poison
  CK(cudaMemset(lse.p, 0xff, lse.bytes));
  AttnParams p{q.as<bf16raw>(), k.as<bf16raw>(), v.as<bf16raw>(), o.as<bf16raw>(),
               LSE ? lse.as<float>() : nullptr, B, H, Hkv, M, N,
               (float)(1.0 / std::sqrt((double)D) * 1.4426950408889634), 30.f};
  launch<Spec>(p, M, npar);
  CK(cudaDeviceSynchronize());
  char shape[96];
  std::snprintf(shape, sizeof shape, "b%d h%d/%d m%d n%d d%d dv%d", B, H, Hkv, M, N, D, DV);
  if (check) {
    RefArgs ra{q.as<bf16raw>(), k.as<bf16raw>(), nullptr, nullptr, v.as<bf16raw>(), H, Hkv, M, N,
               D, DV, check_par ? std::min(check_par, npar) : npar,
               (float)(1.0 / std::sqrt((double)D)), 30.f, 0.f, CAUSAL, ALIBI, false, SOFTCAP};
    ra.rowmask = ROWMASK;
    report(name, shape, compare(ra, o, npar, LSE ? lse.as<float>() : nullptr), 2e-2);
  }
  if (!time_it) return 0.f;
  const float ms = median_ms([&] { launch<Spec>(p, M, npar); }, 10, 30);
  const double flops = 4.0 * npar * (double)M * N * D * (CAUSAL ? 0.5 : 1.0);
  std::printf("TIME  %-28s %-34s %8.3f ms %7.1f TF/s\n", name, shape, ms, flops / ms / 1e9);
  return ms;
}

template <class Spec>
static void run_diff(const char* name, int B, int H, int M, int N, int check_par, bool time_it) {
  constexpr int D = Spec::kHeadDim, DV = Spec::kValueDim;
  const int npar = B * H;
  Buf q1((size_t)npar * M * D * 2), q2(q1.bytes), k1((size_t)npar * N * D * 2), k2(k1.bytes),
      v((size_t)npar * N * DV * 2), o((size_t)npar * M * DV * 2);
  for (Buf* b : {&q1, &q2, &k1, &k2, &v}) randomize(*b);
  CK(cudaMemset(o.p, 0xff, o.bytes));
  const float lam = 0.8f;
  DiffParams p{q1.as<bf16raw>(), k1.as<bf16raw>(), q2.as<bf16raw>(), k2.as<bf16raw>(),
               v.as<bf16raw>(), o.as<bf16raw>(), B, H, M, N,
               (float)(1.0 / std::sqrt((double)D) * 1.4426950408889634), lam};
  launch<Spec>(p, M, npar);
  CK(cudaDeviceSynchronize());
  char shape[96];
  std::snprintf(shape, sizeof shape, "b%d h%d m%d n%d d%d dv%d", B, H, M, N, D, DV);
  RefArgs ra{q1.as<bf16raw>(), k1.as<bf16raw>(), q2.as<bf16raw>(), k2.as<bf16raw>(),
             v.as<bf16raw>(), H, H, M, N, D, DV, check_par ? std::min(check_par, npar) : npar,
             (float)(1.0 / std::sqrt((double)D)), 30.f, lam, false, false, true, false};
  report(name, shape, compare(ra, o, npar, nullptr), 3e-2);
  if (!time_it) return;
  const float ms = median_ms([&] { launch<Spec>(p, M, npar); }, 10, 30);
  const double flops = 2.0 * (2.0 * npar * M * N * D + 2.0 * npar * M * N * DV);  // anchors' count
  std::printf("TIME  %-28s %-34s %8.3f ms %7.1f TF/s\n", name, shape, ms, flops / ms / 1e9);
}

template <class Spec>
static void attrs(const char* name) {
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, fg_entry<Spec>));
  std::printf("ATTR  %-28s regs=%d local=%zuB smem=%dB\n", name, fa.numRegs, fa.localSizeBytes,
              fg::AttnSm80<Spec>::kSmemBytes);
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "all";
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs, cc %d.%d\n", prop.name, prop.multiProcessorCount, prop.major,
              prop.minor);
  // Tuning candidates (warps, m-blocks per warp, key tile); earlier rounds in bench/NOTES.md.
  using V128_4_64 = StdSpec<128, 128, 4, 64, false>;
  using V128_4_64_2 = StdSpec<128, 128, 4, 64, false, false, false, false, 2>;
  using V128_8_64_2 = StdSpec<128, 128, 8, 64, false, false, false, false, 2>;
  using V128_4_64_2s = StdSpec<128, 128, 4, 64, false, false, false, false, 2, true>;
  using C128_4_64_2s = StdSpec<128, 128, 4, 64, true, false, false, false, 2, true>;
  using V64_4_64_2s = StdSpec<64, 64, 4, 64, false, false, false, false, 2, true>;
  using C128_4_64 = StdSpec<128, 128, 4, 64, true>;
  using C128_4_64_2 = StdSpec<128, 128, 4, 64, true, false, false, false, 2>;
  using C128_8_64_2 = StdSpec<128, 128, 8, 64, true, false, false, false, 2>;
  using V64_4_64_2 = StdSpec<64, 64, 4, 64, false, false, false, false, 2>;
  using V64_4_128_2 = StdSpec<64, 64, 4, 128, false, false, false, false, 2>;
  using C64_4_64_2 = StdSpec<64, 64, 4, 64, true, false, false, false, 2>;
  using Soft = StdSpec<128, 128, 4, 64, false, true, false, false, 2>;
  using SoftS = StdSpec<128, 128, 4, 64, false, true, false, false, 2, true>;
  using C64_4_64_2s = StdSpec<64, 64, 4, 64, true, false, false, false, 2, true>;
  using Diff64cs = DiffSpec<64, 4, 64, 1, true>;
  using AlibiGqaLse96 = StdSpec<96, 96, 4, 64, true, false, true, true, 2>;
  using Causal32 = StdSpec<32, 32, 4, 64, true, false, false, false, 2>;
  using Diff64 = DiffSpec<64, 4, 32>;
  using Diff64c = DiffSpec<64, 4, 64>;
  using RowMask64 = RowMaskSpec<StdSpec<64, 64, 4, 64, true, false, false, true, 2>>;
  using RowMask128 = RowMaskSpec<StdSpec<128, 128, 4, 64, true, false, true, true, 2, true>>;
  attrs<V128_4_64>("v128 w4 n64");
  attrs<V128_4_64_2>("v128 w4 n64 mw2");
  attrs<V128_4_64_2s>("v128 w4 n64 mw2 skip");
  attrs<V64_4_64_2>("v64 w4 n64 mw2");
  attrs<V64_4_128_2>("v64 w4 n128 mw2");
  attrs<Diff64>("diff64 w4 n32");
  attrs<Diff64c>("diff64 w4 n64");
  attrs<AlibiGqaLse96>("alibi+gqa+lse d96 mw2");

  if (mode == "check" || mode == "all") {
    run_std<V128_4_64_2, false, false, false, false>("vanilla d128 mw2", 2, 3, 3, 77, 333, 0,
                                                     false);
    run_std<V128_8_64_2, false, false, false, false>("vanilla d128 w8 mw2", 1, 2, 2, 1, 1000, 0,
                                                     false);
    run_std<V128_4_64, false, false, false, false>("vanilla d128 w4", 1, 2, 2, 1000, 1, 0, false);
    run_std<C128_4_64_2, true, false, false, false>("causal d128 mw2", 2, 3, 3, 1000, 1000, 0,
                                                    false);
    run_std<C128_4_64_2s, true, false, false, false>("causal d128 mw2 skip", 1, 2, 2, 777, 777,
                                                     0, false);
    run_std<C128_4_64, true, false, false, false>("causal d128 w4 m<n", 1, 2, 2, 77, 300, 0, false);
    run_std<V64_4_128_2, false, false, false, false>("vanilla d64 n128 mw2", 2, 2, 2, 200, 7, 0,
                                                     false);
    run_std<C64_4_64_2, true, false, false, false>("causal d64 mw2", 1, 3, 3, 333, 1000, 0, false);
    run_std<Causal32, true, false, false, false>("causal d32 mw2", 2, 2, 2, 129, 129, 0, false);
    run_std<Soft, false, true, false, false>("softcap d128 mw2", 1, 2, 2, 300, 777, 0, false);
    run_std<AlibiGqaLse96, true, false, true, true>("alibi+causal+gqa4+lse d96", 2, 8, 2, 300,
                                                    301, 0, false);
    run_diff<Diff64>("diff_attn d64", 1, 3, 333, 1000, 0, false);
    run_diff<Diff64c>("diff_attn d64 n64", 2, 2, 65, 70, 0, false);
    run_diff<Diff64cs>("diff_attn d64 n64 skip", 1, 2, 300, 1000, 0, false);
    run_std<SoftS, false, true, false, false>("softcap d128 skip", 1, 2, 2, 300, 777, 0, false);
  }
  if (mode == "check" || mode == "all") {
    run_std<RowMask64, true, false, false, true, true>("rowmask+causal+lse d64", 2, 3, 3, 333,
                                                       200, 0, false);
    // more than 65535 parallel indices: the grid's z dimension carries the rest
    run_std<Causal32, true, false, false, false>("causal d32 70000 heads", 1, 70000, 70000, 3, 5,
                                                 0, false);
    run_std<RowMask128, true, false, true, true, true>("rowmask+causal+alibi+lse d128", 1, 4, 2,
                                                       130, 1000, 0, false);
  }
  if (mode == "small") {  // tiny odd sizes, for compute-sanitizer
    run_std<V128_4_64_2s, false, false, false, false>("vanilla d128 skip", 1, 2, 2, 37, 77, 0,
                                                      false);
    run_std<C128_4_64, true, false, false, false>("causal d128 w4", 1, 2, 2, 77, 37, 0, false);
    run_std<V64_4_128_2, false, false, false, false>("vanilla d64 n128", 1, 2, 2, 5, 130, 0,
                                                     false);
    run_std<Causal32, true, false, false, false>("causal d32", 1, 2, 2, 33, 33, 0, false);
    run_std<AlibiGqaLse96, true, false, true, true>("alibi+causal+gqa+lse d96", 1, 4, 2, 50, 70,
                                                    0, false);
    run_std<RowMask64, true, false, false, true, true>("rowmask+causal+lse d64", 1, 2, 2, 40, 50,
                                                       0, false);
    run_diff<Diff64cs>("diff_attn d64 skip", 1, 2, 19, 90, 0, false);
  }
  if (mode == "time" || mode == "all") {
    // benchmark sizes: check 2 heads against the reference, then time
    const int B = 8, H = 16, N = 4096;
#define T_STD(SPEC, CAUSAL, NAME, CHECK) \
  run_std<SPEC, CAUSAL, false, false, false>(NAME, B, H, H, N, N, 2, true, CHECK)
    T_STD(V128_4_64, false, "vanilla d128 w4 n64", false);
    T_STD(V128_4_64_2, false, "vanilla d128 w4 n64 mw2", true);
    T_STD(V128_4_64_2s, false, "vanilla d128 w4 n64 mw2 skip", true);
    T_STD(C128_4_64, true, "causal d128 w4 n64", false);
    T_STD(C128_4_64_2, true, "causal d128 w4 n64 mw2", true);
    T_STD(C128_4_64_2s, true, "causal d128 w4 n64 mw2 skip", true);
    T_STD(V64_4_64_2, false, "vanilla d64 w4 n64 mw2", true);
    T_STD(V64_4_64_2s, false, "vanilla d64 w4 n64 mw2 skip", true);
    T_STD(C64_4_64_2, true, "causal d64 w4 n64 mw2", true);
    T_STD(C64_4_64_2s, true, "causal d64 w4 n64 mw2 skip", false);
    run_std<Soft, false, true, false, false>("softcap d128 b4 mw2", 4, 16, 16, 4096, 4096, 1, true);
    run_std<SoftS, false, true, false, false>("softcap d128 b4 mw2 skip", 4, 16, 16, 4096, 4096, 1,
                                              true);
    run_diff<Diff64>("diff_attn d64 w4 n32 b4", 4, 16, 4096, 4096, 1, true);
    run_diff<Diff64c>("diff_attn d64 w4 n64 b4", 4, 16, 4096, 4096, 1, true);
    run_diff<Diff64cs>("diff_attn d64 w4 n64 b4 skip", 4, 16, 4096, 4096, 1, true);
  }
  std::printf("failures: %d\n", g_failures);
  return g_failures ? 1 : 0;
}
