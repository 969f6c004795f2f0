// The Hopper tile operations (src/codegen/cuda/fg_sm90.cuh). Without a GPU: the test kernels
// compile through NVRTC for sm_90a (and wgmma is refused for sm_90). On a Hopper GPU: a TMA load
// with the 128-byte swizzle lands where Sw128Tile says; D = A . B^T by wgmma with both operands
// from descriptors (TMA-loaded, the first step overwriting NaN accumulators) and with A from
// registers (B stored by ordinary stores through Sw128Tile and the proxy fence), and a
// producer warpgroup feeding two consumers after setmaxnreg, all against a host GEMM. SKIPs
// without NVRTC, or without a GPU of compute capability 9.0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "codegen/cuda/embedded_headers.h"
#include "runtime/cuda_driver.h"
#include "runtime/nvrtc.h"

namespace flashgen {
namespace {

// M x K = 64 x 128 times (N x K = 128 x 128)^T, bf16, K-major: two 64-column panels each.
const char* kSource = R"cu(
#include "fg_sm90.cuh"
using namespace fg;
constexpr int M = 64, N = 128, K = 128;
using TA = Sw128Tile<M>;
using TB = Sw128Tile<N>;

// The panels' shared addresses, 1024-aligned: A (2 x 8 KiB), then B (2 x 16 KiB).
FG_DEV u32 tiles_base(unsigned char* raw, unsigned char** generic) {
  const u32 b = smem_u32(raw), a = (b + 1023) & ~1023u;
  *generic = raw + (a - b);
  return a;
}
template <int T8>
FG_DEV void store_acc(float* D, int col0, const float (&d)[T8][4], int t) {
#pragma unroll
  for (int t8 = 0; t8 < T8; ++t8)
#pragma unroll
    for (int i = 0; i < 4; ++i) D[acc_row(t, i) * N + col0 + acc_col(t, t8, i)] = d[t8][i];
}
FG_DEV void load_by_tma(u32 sA, u32 sB, const TmaDesc* ta, const TmaDesc* tb, u32 bar) {
  mbar_expect_tx(bar, 2 * TA::kPanelBytes + 2 * TB::kPanelBytes);
  tma_load_2d(sA, ta, bar, 0, 0);                       // A: dims {K, M}, box {64, 64}
  tma_load_2d(sA + TA::kPanelBytes, ta, bar, 64, 0);
  tma_load_3d(sB, tb, bar, 0, 0, 0);                    // B: dims {64, N, K / 64}, one box
}

extern "C" __global__ void __launch_bounds__(128, 1)
sm90_ss(const __grid_constant__ TmaDesc ta, const __grid_constant__ TmaDesc tb, float* D,
        unsigned short* dump, float init) {
  extern __shared__ __align__(1024) unsigned char raw[];
  __shared__ __align__(8) u64 bar_word;
  unsigned char* g;
  const u32 sA = tiles_base(raw, &g), sB = sA + 2 * TA::kPanelBytes, bar = smem_u32(&bar_word);
  const int t = threadIdx.x;
  if (t == 0) {
    tma_prefetch(&ta);
    tma_prefetch(&tb);
    mbar_init(bar, 1);
  }
  __syncthreads();
  if (t == 0) load_by_tma(sA, sB, &ta, &tb, bar);
  mbar_wait(bar, 0);
  for (int i = t; i < (2 * TA::kPanelBytes + 2 * TB::kPanelBytes) / 2; i += 128)
    dump[i] = ((const unsigned short*)g)[i];
  float d0[8][4], d1[8][4];
  for (int i = 0; i < 32; ++i) d0[i / 4][i % 4] = d1[i / 4][i % 4] = init;  // NaN: the first step must overwrite
  fence_acc(d0);
  fence_acc(d1);
  wg_fence();
#pragma unroll
  for (int k = 0; k < K / 16; ++k) {
    const u32 pa = sA + (k / 4) * TA::kPanelBytes + (k % 4) * 32;
    const u32 pb = sB + (k / 4) * TB::kPanelBytes + (k % 4) * 32;
    mma_64x64x16_ss<BF16, 0>(d0, desc_sw128(pa), desc_sw128(pb), k > 0);
    mma_64x64x16_ss<BF16, 0>(d1, desc_sw128(pa), desc_sw128(pb + 64 * 128), k > 0);
  }
  wg_commit();
  wg_wait<0>();
  fence_acc(d0);
  fence_acc(d1);
  store_acc(D, 0, d0, t);
  store_acc(D, 64, d1, t);
}

extern "C" __global__ void __launch_bounds__(128, 1)
sm90_rs(const unsigned short* A, const unsigned short* B, float* D) {
  extern __shared__ __align__(1024) unsigned char raw[];
  unsigned char* g;
  const u32 sB = tiles_base(raw, &g);
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  for (int i = t; i < N * K; i += 128)
    *(unsigned short*)(g + TB::at(i / K, i % K)) = B[i];
  fence_proxy_async();
  __syncthreads();
  u32 a[K / 16][4];
#pragma unroll
  for (int k = 0; k < K / 16; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = 16 * warp + lane / 4 + 8 * (j & 1);
      const int col = 16 * k + 2 * (lane % 4) + 8 * (j >> 1);
      a[k][j] = (u32)A[row * K + col] | ((u32)A[row * K + col + 1] << 16);
    }
  float d0[8][4], d1[8][4];
  for (int i = 0; i < 32; ++i) d0[i / 4][i % 4] = d1[i / 4][i % 4] = 0.f;
  fence_acc(d0);
  fence_acc(d1);
  wg_fence();
#pragma unroll
  for (int k = 0; k < K / 16; ++k) {
    const u32 pb = sB + (k / 4) * TB::kPanelBytes + (k % 4) * 32;
    mma_64x64x16_rs<BF16, false, 0>(d0, a[k], desc_sw128(pb), 1);
    mma_64x64x16_rs<BF16, false, 0>(d1, a[k], desc_sw128(pb + 64 * 128), 1);
  }
  wg_commit();
  wg_wait<0>();
  fence_acc(d0);
  fence_acc(d1);
  store_acc(D, 0, d0, t);
  store_acc(D, 64, d1, t);
}

// B MN-major into the shared tiles (B^T's element (k, n) at row k, column n of K-row panels of
// 64 columns) and A's fragments into registers: the operands of the MN-major RS products.
using TK = Sw128Tile<K>;
FG_DEV u32 mn_operands(const unsigned short* A, const unsigned short* B, unsigned char* raw,
                       u32 (&a)[K / 16][4]) {
  unsigned char* g;
  const u32 sB = tiles_base(raw, &g);
  const int t = threadIdx.x, warp = t / 32, lane = t % 32;
  for (int i = t; i < N * K; i += 128)
    *(unsigned short*)(g + TK::at(i % K, i / K)) = B[i];
  fence_proxy_async();
  __syncthreads();
#pragma unroll
  for (int k = 0; k < K / 16; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = 16 * warp + lane / 4 + 8 * (j & 1);
      const int col = 16 * k + 2 * (lane % 4) + 8 * (j >> 1);
      a[k][j] = (u32)A[row * K + col] | ((u32)A[row * K + col + 1] << 16);
    }
  return sB;
}

// The same product with B MN-major (the layout of V in P.V): B^T's element (k, n) at row k,
// column n of K-row panels of 64 columns; one accumulator of 128 columns, two n64 slices.
extern "C" __global__ void __launch_bounds__(128, 1)
sm90_rs_mn(const unsigned short* A, const unsigned short* B, float* D) {
  extern __shared__ __align__(1024) unsigned char raw[];
  const int t = threadIdx.x;
  u32 a[K / 16][4];
  const u32 sB = mn_operands(A, B, raw, a);
  float d[16][4];
  for (int i = 0; i < 64; ++i) d[i / 4][i % 4] = 0.f;
  fence_acc(d);
  wg_fence();
#pragma unroll
  for (int k = 0; k < K / 16; ++k) {
    const u32 pb = sB + k * 16 * 128;  // rows 16k .. 16k + 15 of the first panel
    mma_64x64x16_rs<BF16, true, 0>(d, a[k], desc_sw128_mn(pb, TK::kPanelBytes), 1);
    mma_64x64x16_rs<BF16, true, 8>(d, a[k], desc_sw128_mn(pb + TK::kPanelBytes, TK::kPanelBytes), 1);
  }
  wg_commit();
  wg_wait<0>();
  fence_acc(d);
  store_acc(D, 0, d, t);
}

// The same products by m64n128k16: one instruction for all 128 columns of B (K-major: 128 rows
// of one panel; MN-major: two panels LBO apart), the accumulators' first step overwriting NaN.
extern "C" __global__ void __launch_bounds__(128, 1)
sm90_ss128(const __grid_constant__ TmaDesc ta, const __grid_constant__ TmaDesc tb, float* D,
           float init) {
  extern __shared__ __align__(1024) unsigned char raw[];
  __shared__ __align__(8) u64 bar_word;
  unsigned char* g;
  const u32 sA = tiles_base(raw, &g), sB = sA + 2 * TA::kPanelBytes, bar = smem_u32(&bar_word);
  const int t = threadIdx.x;
  if (t == 0) mbar_init(bar, 1);
  __syncthreads();
  if (t == 0) load_by_tma(sA, sB, &ta, &tb, bar);
  mbar_wait(bar, 0);
  float d[16][4];
  for (int i = 0; i < 64; ++i) d[i / 4][i % 4] = init;
  fence_acc(d);
  wg_fence();
#pragma unroll
  for (int k = 0; k < K / 16; ++k) {
    const u32 pa = sA + (k / 4) * TA::kPanelBytes + (k % 4) * 32;
    const u32 pb = sB + (k / 4) * TB::kPanelBytes + (k % 4) * 32;
    mma_64x128x16_ss<BF16, 0>(d, desc_sw128(pa), desc_sw128(pb), k > 0);
  }
  wg_commit();
  wg_wait<0>();
  fence_acc(d);
  store_acc(D, 0, d, t);
}
extern "C" __global__ void __launch_bounds__(128, 1)
sm90_rs_mn128(const unsigned short* A, const unsigned short* B, float* D) {
  extern __shared__ __align__(1024) unsigned char raw[];
  const int t = threadIdx.x;
  u32 a[K / 16][4];
  const u32 sB = mn_operands(A, B, raw, a);
  float d[16][4];
  for (int i = 0; i < 64; ++i) d[i / 4][i % 4] = 0.f;
  fence_acc(d);
  wg_fence();
#pragma unroll
  for (int k = 0; k < K / 16; ++k)
    mma_64x128x16_rs<BF16, true, 0>(d, a[k], desc_sw128_mn(sB + k * 16 * 128, TK::kPanelBytes), 1);
  wg_commit();
  wg_wait<0>();
  fence_acc(d);
  store_acc(D, 0, d, t);
}

// Warpgroup 0 loads (and gives registers back), warpgroups 1 and 2 each compute 64 columns.
extern "C" __global__ void __launch_bounds__(384, 1)
sm90_producer_consumers(const __grid_constant__ TmaDesc ta, const __grid_constant__ TmaDesc tb,
                        float* D) {
  extern __shared__ __align__(1024) unsigned char raw[];
  __shared__ __align__(8) u64 bar_word;
  unsigned char* g;
  const u32 sA = tiles_base(raw, &g), sB = sA + 2 * TA::kPanelBytes, bar = smem_u32(&bar_word);
  const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
  if (threadIdx.x == 0) mbar_init(bar, 1);
  __syncthreads();
  if (wg == 0) {
    regs_release<40>();
    if (t == 0) load_by_tma(sA, sB, &ta, &tb, bar);
    return;
  }
  regs_take<232>();
  mbar_wait(bar, 0);
  float d[8][4];
  for (int i = 0; i < 32; ++i) d[i / 4][i % 4] = 0.f;
  fence_acc(d);
  wg_fence();
#pragma unroll
  for (int k = 0; k < K / 16; ++k) {
    const u32 pa = sA + (k / 4) * TA::kPanelBytes + (k % 4) * 32;
    const u32 pb = sB + (k / 4) * TB::kPanelBytes + (wg - 1) * 64 * 128 + (k % 4) * 32;
    mma_64x64x16_ss<BF16, 0>(d, desc_sw128(pa), desc_sw128(pb), k > 0);
  }
  wg_commit();
  wg_wait<0>();
  fence_acc(d);
  store_acc(D, (wg - 1) * 64, d, t);
}
)cu";

NvrtcOptions options(const std::string& arch) {
  NvrtcOptions o;
  o.arch = arch;
  o.options = {"-std=c++17", "-default-device"};
  o.cuda_include = false;
  o.name = "sm90_tile_library_test.cu";
  int n = 0;
  const cuda::EmbeddedHeader* h = cuda::embedded_headers(&n);
  for (int i = 0; i < n; ++i) o.headers.push_back({h[i].name, h[i].source});
  return o;
}

TEST(Sm90TileLibrary, CompilesForSm90aOnly) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  Cubin c;
  ASSERT_NO_THROW(c = nvrtc_compile(kSource, options("sm_90a")));
  EXPECT_EQ(c.bytes.substr(1, 3), "ELF");
  EXPECT_ANY_THROW(nvrtc_compile(kSource, options("sm_90")));  // no wgmma, no setmaxnreg
}

uint16_t to_bf16(float f) {  // exact for the small multiples of 1/4 below
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}
float from_bf16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Sm90TileLibrary, TmaSwizzleWgmmaAndRegisterSplitOnHopper) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  if (!cuda_available(&why)) GTEST_SKIP() << "no CUDA GPU: " << why;
  if (cuda_device_info().cc_major != 9) GTEST_SKIP() << "not a Hopper GPU (sm_90a)";
  constexpr int M = 64, N = 128, K = 128;
  std::vector<uint16_t> a(M * K), b(N * K);
  uint32_t s = 12345;
  auto next = [&s] { return static_cast<float>(static_cast<int>((s = s * 1664525u + 1013904223u) >> 28) - 8) * 0.25f; };
  for (auto& x : a) x = to_bf16(next());
  for (auto& x : b) x = to_bf16(next());
  std::vector<float> want(M * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double acc = 0;
      for (int k = 0; k < K; ++k) acc += double(from_bf16(a[m * K + k])) * from_bf16(b[n * K + k]);
      want[m * N + n] = static_cast<float>(acc);
    }
  DeviceBuffer dA(a.size() * 2), dB(b.size() * 2), dD(M * N * 4);
  const int tile_bytes = 2 * M * 128 + 2 * N * 128;
  DeviceBuffer dump(tile_bytes);
  dA.upload(a.data(), a.size() * 2);
  dB.upload(b.data(), b.size() * 2);
  const uint64_t a_dims[2] = {K, M}, a_strides[1] = {K * 2};
  const uint32_t a_box[2] = {64, M};
  const uint64_t b_dims[3] = {64, N, K / 64}, b_strides[2] = {K * 2, 128};
  const uint32_t b_box[3] = {64, N, K / 64};
  CudaTensorMap ta = cuda_tensor_map_16bit(dA.ptr(), 2, a_dims, a_strides, a_box, true);
  CudaTensorMap tb = cuda_tensor_map_16bit(dB.ptr(), 3, b_dims, b_strides, b_box, true);
  CudaModule mod(nvrtc_compile(kSource, options("sm_90a")).bytes);
  const size_t smem = tile_bytes + 1024;
  std::vector<float> got(M * N);
  auto check = [&](const char* what) {
    cuda_synchronize();
    dD.download(got.data(), got.size() * 4);
    int bad = 0;
    for (int i = 0; i < M * N; ++i)
      if (!(std::fabs(got[i] - want[i]) <= 1e-3f)) {
        if (bad++ < 3) ADD_FAILURE() << what << ": D[" << i / N << ", " << i % N << "] = " << got[i]
                                     << ", want " << want[i];
      }
    EXPECT_EQ(bad, 0) << what;
  };
  {
    dD.memset(0xff);
    DevicePtr d = dD.ptr(), du = dump.ptr();
    float init = std::nanf("");
    void* args[] = {&ta, &tb, &d, &du, &init, nullptr};
    mod.kernel("sm90_ss").launch({1, 1, 1}, {128, 1, 1}, smem, nullptr, args);
    check("descriptors (TMA)");
    // The bytes TMA wrote are those Sw128Tile places: A's panels, then B's.
    std::vector<uint16_t> raw(tile_bytes / 2);
    dump.download(raw.data(), tile_bytes);
    int misplaced = 0;
    auto off = [](int r, int c) { return r * 128 + ((((c * 2) >> 4) ^ (r & 7)) << 4) + ((c * 2) & 15); };
    for (int r = 0; r < M; ++r)
      for (int c = 0; c < K; ++c)
        misplaced += raw[((c / 64) * M * 128 + off(r, c % 64)) / 2] != a[r * K + c];
    for (int r = 0; r < N; ++r)
      for (int c = 0; c < K; ++c)
        misplaced += raw[(2 * M * 128 + (c / 64) * N * 128 + off(r, c % 64)) / 2] != b[r * K + c];
    EXPECT_EQ(misplaced, 0);
  }
  {
    dD.memset(0xff);
    DevicePtr pa = dA.ptr(), pb = dB.ptr(), d = dD.ptr();
    void* args[] = {&pa, &pb, &d, nullptr};
    mod.kernel("sm90_rs").launch({1, 1, 1}, {128, 1, 1}, smem, nullptr, args);
    check("A from registers");
  }
  {
    dD.memset(0xff);
    DevicePtr pa = dA.ptr(), pb = dB.ptr(), d = dD.ptr();
    void* args[] = {&pa, &pb, &d, nullptr};
    mod.kernel("sm90_rs_mn").launch({1, 1, 1}, {128, 1, 1}, smem, nullptr, args);
    check("A from registers, B MN-major");
  }
  {
    dD.memset(0xff);
    DevicePtr d = dD.ptr();
    float init = std::nanf("");
    void* args[] = {&ta, &tb, &d, &init, nullptr};
    mod.kernel("sm90_ss128").launch({1, 1, 1}, {128, 1, 1}, smem, nullptr, args);
    check("m64n128k16, descriptors (TMA)");
  }
  {
    dD.memset(0xff);
    DevicePtr pa = dA.ptr(), pb = dB.ptr(), d = dD.ptr();
    void* args[] = {&pa, &pb, &d, nullptr};
    mod.kernel("sm90_rs_mn128").launch({1, 1, 1}, {128, 1, 1}, smem, nullptr, args);
    check("m64n128k16, A from registers, B MN-major");
  }
  {
    dD.memset(0xff);
    DevicePtr d = dD.ptr();
    void* args[] = {&ta, &tb, &d, nullptr};
    mod.kernel("sm90_producer_consumers").launch({1, 1, 1}, {384, 1, 1}, smem, nullptr, args);
    check("producer and consumer warpgroups");
  }
}

}  // namespace
}  // namespace flashgen
