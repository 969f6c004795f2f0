// nvrtc_tile_library_test.cpp — the embedded CUDA tile library compiles through NVRTC.
//
// What: compiles hand-written Specs (the form the CUDA emitter generates: causal+ALiBi+GQA+lse
//   with one score, and diff_attn with two scores, two softmax groups and a shared V) together
//   with the embedded fg_attn_sm80.cuh / fg_tile.cuh, for sm_80 and sm_90a. NVRTC needs no GPU,
//   so this runs wherever the CUDA toolkit is present; it SKIPs without it.
// Correctness and speed of the same kernels on a GPU: bench/gpu/attn_harness.cu via
//   scripts/gpu_check (results in bench/RESULTS.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "codegen/cuda/embedded_headers.h"

#if defined(FLASHGEN_HAVE_CUDA)
#include <nvrtc.h>
#endif

namespace {

// Generated-style source: a Spec per kernel and an extern "C" entry. No host headers.
const char* kSource = R"cu(
#include "fg_attn_sm80.cuh"
using fg::bf16raw;
using fg::i64;

struct P1 { const bf16raw *q, *k, *v; bf16raw* o; float* lse; int B, H, Hkv, M, N; float sc; };
struct Spec1 {  // causal + ALiBi + GQA + logsumexp, d = 128
  using Elem = fg::BF16;
  static constexpr int kNumScores = 1, kNumGroups = 1, kNumV = 1, kNumAcc = 1;
  static constexpr int kHeadDim = 128, kValueDim = 128, kWarps = 4, kWarpMBlocks = 2;
  static constexpr int kBlockN = 64, kMinBlocks = 2;
  static constexpr bool kReverseM = true;
  static constexpr __device__ int acc_group(int) { return 0; }
  static constexpr __device__ int acc_v(int) { return 0; }
  using Params = P1;
  static __device__ int num_parallel(const Params& p) { return p.B * p.H; }
  struct Ctx : fg::CtxBase<1, 1> { bf16raw* o; float* lse; float sc, slope; };
  static __device__ void make_ctx(const Params& p, int par, int, Ctx& c) {
    const int b = par / p.H, h = par % p.H, hk = h / (p.H / p.Hkv);
    c.M = p.M; c.N = p.N;
    c.q[0] = p.q + (i64)par * p.M * 128; c.q_ld[0] = 128;
    c.k[0] = p.k + (i64)(b * p.Hkv + hk) * p.N * 128; c.k_ld[0] = 128;
    c.v[0] = p.v + (i64)(b * p.Hkv + hk) * p.N * 128; c.v_ld[0] = 128;
    c.o = p.o + (i64)par * p.M * 128; c.lse = p.lse + (i64)par * p.M;
    c.sc = p.sc; c.slope = exp2f(-8.f * (h + 1) / p.H) * fg::kLog2e / p.sc;
  }
  static __device__ int classify(const Ctx&, int m0, int m1, int n0, int n1) {
    if (n0 > m1 - 1) return fg::kTileEmpty;
    if (n1 - 1 <= m0) return fg::kTileFull;
    return fg::kTilePartial;
  }
  template <int g> static __device__ float score_scale(const Ctx& x) { return x.sc; }
  template <int g>
  static __device__ float score(const float (&c)[1], int m, int n, const Ctx& x,
                                 const fg::TileView&) {
    return c[0] + x.slope * (float)(n - m);
  }
  static constexpr bool kKeep = true;  // the causal mask, on a partial tile's elements
  static __device__ bool keep(int m, int n, const Ctx&, const fg::TileView&) { return n <= m; }
  static __device__ void store(const Ctx& x, int m, int e, const float (&o)[1][2],
                               const fg::RowStats<1>& st) {
    fg::store_bf16x2(x.o + (i64)m * 128 + e, o[0][0] * st.inv_l[0], o[0][1] * st.inv_l[0]);
  }
  static __device__ void store_row(const Ctx& x, int m, const fg::RowStats<1>& st) {
    x.lse[m] = st.lse(0);
  }
};
extern "C" __global__ void __launch_bounds__(128, 2) fg_causal_alibi(const P1 p) {
  fg::attn_fwd_sm80<Spec1>(p);
}

struct P2 { const bf16raw *q1, *k1, *q2, *k2, *v; bf16raw* o; int P, M, N; float sc, lam; };
struct Spec2 {  // diff_attn, d = 64, v width 128
  using Elem = fg::BF16;
  static constexpr int kNumScores = 2, kNumGroups = 2, kNumV = 1, kNumAcc = 2;
  static constexpr int kHeadDim = 64, kValueDim = 128, kWarps = 4, kWarpMBlocks = 1;
  static constexpr int kBlockN = 64, kMinBlocks = 1;
  static constexpr bool kReverseM = false;
  static constexpr __device__ int acc_group(int a) { return a; }
  static constexpr __device__ int acc_v(int) { return 0; }
  using Params = P2;
  static __device__ int num_parallel(const Params& p) { return p.P; }
  struct Ctx : fg::CtxBase<2, 1> { bf16raw* o; float sc, lam; };
  static __device__ void make_ctx(const Params& p, int par, int, Ctx& c) {
    c.M = p.M; c.N = p.N;
    c.q[0] = p.q1 + (i64)par * p.M * 64; c.q[1] = p.q2 + (i64)par * p.M * 64;
    c.k[0] = p.k1 + (i64)par * p.N * 64; c.k[1] = p.k2 + (i64)par * p.N * 64;
    c.q_ld[0] = c.q_ld[1] = c.k_ld[0] = c.k_ld[1] = 64;
    c.v[0] = p.v + (i64)par * p.N * 128; c.v_ld[0] = 128;
    c.o = p.o + (i64)par * p.M * 128; c.sc = p.sc; c.lam = p.lam;
  }
  static __device__ int classify(const Ctx&, int, int, int, int) { return fg::kTileFull; }
  template <int g> static __device__ float score_scale(const Ctx& x) { return x.sc; }
  template <int g>
  static __device__ float score(const float (&c)[2], int, int, const Ctx&, const fg::TileView&) {
    return c[g];
  }
  static __device__ void store(const Ctx& x, int m, int e, const float (&o)[2][2],
                               const fg::RowStats<2>& st) {
    const float a = st.inv_l[0], b = x.lam * st.inv_l[1];
    fg::store_bf16x2(x.o + (i64)m * 128 + e, o[0][0] * a - o[1][0] * b, o[0][1] * a - o[1][1] * b);
  }
  static __device__ void store_row(const Ctx&, int, const fg::RowStats<2>&) {}
};
extern "C" __global__ void __launch_bounds__(128, 1) fg_diff(const P2 p) {
  fg::attn_fwd_sm80<Spec2>(p);
}
)cu";

TEST(NvrtcTileLibrary, HeadersAreEmbedded) {
  int n = 0;
  const flashgen::cuda::EmbeddedHeader* h = flashgen::cuda::embedded_headers(&n);
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) {
    names.push_back(h[i].name);
    EXPECT_GT(std::string(h[i].source).size(), 1000u) << h[i].name;
  }
  EXPECT_NE(std::find(names.begin(), names.end(), "fg_tile.cuh"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "fg_attn_sm80.cuh"), names.end());
}

TEST(NvrtcTileLibrary, CompilesForSm80AndSm90a) {
#if !defined(FLASHGEN_HAVE_CUDA)
  GTEST_SKIP() << "built without the CUDA toolkit (NVRTC)";
#else
  int n = 0;
  const flashgen::cuda::EmbeddedHeader* h = flashgen::cuda::embedded_headers(&n);
  std::vector<const char*> srcs, names;
  for (int i = 0; i < n; ++i) {
    srcs.push_back(h[i].source);
    names.push_back(h[i].name);
  }
  for (const char* arch : {"--gpu-architecture=sm_80", "--gpu-architecture=sm_90a"}) {
    nvrtcProgram prog;
    ASSERT_EQ(nvrtcCreateProgram(&prog, kSource, "spec_test.cu", n, srcs.data(), names.data()),
              NVRTC_SUCCESS);
    const char* opts[] = {arch, "-std=c++17"};
    const nvrtcResult r = nvrtcCompileProgram(prog, 2, opts);
    size_t log_size = 0;
    nvrtcGetProgramLogSize(prog, &log_size);
    std::string log(log_size, '\0');
    nvrtcGetProgramLog(prog, log.data());
    EXPECT_EQ(r, NVRTC_SUCCESS) << arch << "\n" << log;
    if (r == NVRTC_SUCCESS) {
      size_t cubin = 0;
      EXPECT_EQ(nvrtcGetCUBINSize(prog, &cubin), NVRTC_SUCCESS);
      EXPECT_GT(cubin, 10000u) << arch;
    }
    nvrtcDestroyProgram(&prog);
  }
#endif
}

}  // namespace
