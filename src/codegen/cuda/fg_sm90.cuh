// fg_sm90.cuh — flashgen's Hopper tile operations (sm_90a only): the pieces the sm90 kernels
// are to be made of, as tile operations over 128-byte-swizzled shared-memory tiles.
//
// What:
//   - Sw128Tile: a rows x 64 tile of 16-bit elements in the 128-byte swizzle (the layout TMA's
//     CU_TENSOR_MAP_SWIZZLE_128B writes and wgmma's 128B descriptors read); wider tiles are
//     panels of 64 columns, one after another (panel p at p * rows * 128 bytes). Each panel's
//     base must be 1024-byte aligned.
//   - desc_sw128: the 64-bit wgmma shared-memory descriptor of a K-major panel (start >> 4, LBO
//     16 bytes (ignored for swizzled K-major), SBO 1024 bytes between 8-row groups, layout 1 =
//     128B swizzle); a k16 step inside a panel advances the start by 32 bytes.
//   - mma_64x64x16_ss / mma_64x64x16_rs: D[64 x 64] (+)= A[64 x 16] . B[64 x 16]^T by
//     wgmma.mma_async (bf16 in, f32 accumulate) with A from a descriptor or from registers (the
//     mma.m16n8k16 A layout, one warp per 16 rows), B from a descriptor; scale_d = 0 overwrites
//     D. The accumulator fragment: register i of thread t of the warpgroup holds row
//     16 * (t / 32) + (t % 32) / 4 + 8 * ((i >> 1) & 1), column 8 * (i >> 2) + 2 * (t % 4) +
//     (i & 1).
//   - wgmma fences (fence / commit / wait<N>, fence_acc for the compiler), the proxy fence
//     after ordinary stores that wgmma reads, mbarriers (init, expect_tx, wait on a parity),
//     TMA 2-D and 3-D tile loads into shared memory completing on an mbarrier, and register
//     reallocation between warpgroups (setmaxnreg).
// Preconditions: NVRTC or nvcc for sm_90a (wgmma and setmaxnreg do not exist on sm_90);
//   tensor maps from cuda_tensor_map_16bit (runtime/cuda_driver.h), passed by value as
//   `const __grid_constant__ fg::TmaDesc`.
// Test: tests/gpu/sm90_tile_library_test.cpp (compiles for sm_90a without a GPU; on a Hopper
//   GPU: TMA's swizzle against Sw128Tile, both wgmma forms and a producer/consumer split with
//   setmaxnreg against a host GEMM).
#pragma once

#ifndef FG_SM90_CUH
#define FG_SM90_CUH

#include "fg_tile.cuh"

namespace fg {

// Stand-in for CUtensorMap (no cuda.h under NVRTC): 128 opaque bytes, 64-byte aligned.
struct __align__(64) TmaDesc {
  u64 opaque[16];
};

// ---- 128-byte-swizzled tiles of 16-bit elements ----
template <int ROWS>
struct Sw128Tile {
  static_assert(ROWS % 8 == 0, "whole 8-row swizzle atoms");
  static constexpr int kPanelBytes = ROWS * 128;  // one panel of 64 columns
  // byte offset of element (r, c) of a panel, c < 64
  static FG_DEV u32 off(int r, int c) {
    return (u32)(r * 128 + ((((c * 2) >> 4) ^ (r & 7)) << 4) + ((c * 2) & 15));
  }
  // of element (r, c) of a tile of several panels
  static FG_DEV u32 at(int r, int c) { return (c / 64) * kPanelBytes + off(r, c % 64); }
};

// The wgmma descriptor of the K-major 128B-swizzled panel at shared address `saddr`.
FG_DEV u64 desc_sw128(u32 saddr) {
  return (u64)((saddr & 0x3FFFF) >> 4) | ((u64)(16 >> 4) << 16) | ((u64)(1024 >> 4) << 32) |
         ((u64)1 << 62);
}

// ---- wgmma ----
FG_DEV void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
FG_DEV void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
FG_DEV void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across the asynchronous wgmma.
template <int R>
FG_DEV void fence_acc(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// After ordinary stores to shared memory that wgmma (the async proxy) reads; then a barrier.
FG_DEV void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

#define FG_WGMMA_D32                                                                        \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
  "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FG_WGMMA_D32_OUT                                                                    \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),       \
      "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
      "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]),          \
      "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),          \
      "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

// D (+)= A . B^T, A and B K-major bf16 panels in shared memory.
FG_DEV void mma_64x64x16_ss(float (&d)[32], u64 desc_a, u64 desc_b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FG_WGMMA_D32
      ", %32, %33, p, 1, 1, 0, 0;\n}\n"
      : FG_WGMMA_D32_OUT
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}
// D (+)= A . B^T, A in registers (a[j]: rows 16 * warp + lane / 4 + 8 * (j & 1), k
// 2 * (lane % 4) + 8 * (j >> 1) and the next, low half first), B a K-major bf16 panel.
FG_DEV void mma_64x64x16_rs(float (&d)[32], const u32 (&a)[4], u64 desc_b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FG_WGMMA_D32
      ", {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : FG_WGMMA_D32_OUT
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));
}
#undef FG_WGMMA_D32
#undef FG_WGMMA_D32_OUT

// Row and column of accumulator register i of warpgroup thread t (m64nN, f32).
FG_DEV int acc_row(int t, int i) { return 16 * (t / 32) + (t % 32) / 4 + 8 * ((i >> 1) & 1); }
FG_DEV int acc_col(int t, int i) { return 8 * (i >> 2) + 2 * (t % 4) + (i & 1); }

// ---- mbarriers (a launch without clusters is a cluster of one) ----
FG_DEV void mbar_init(u32 bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival that also expects `bytes` of asynchronous copies to complete on the barrier.
FG_DEV void mbar_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar),
               "r"(bytes)
               : "memory");
}
FG_DEV bool mbar_try_wait(u32 bar, u32 parity) {
  u32 ok;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}
// Waits for the phase of parity `parity` to complete (it flips each time the barrier is reused).
FG_DEV void mbar_wait(u32 bar, u32 parity) {
  while (!mbar_try_wait(bar, parity)) {
  }
}

// ---- TMA: tile loads into shared memory, completing on an mbarrier ----
FG_DEV void tma_prefetch(const TmaDesc* m) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"((u64)m) : "memory");
}
// Coordinates innermost first (c0: the column, in elements).
FG_DEV void tma_load_2d(u32 dst, const TmaDesc* m, u32 bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%3, %4}], [%2];\n" ::"r"(dst),
      "l"((u64)m), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}
FG_DEV void tma_load_3d(u32 dst, const TmaDesc* m, u32 bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%3, %4, %5}], [%2];\n" ::"r"(dst),
      "l"((u64)m), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// ---- register reallocation between warpgroups (every warp of the warpgroup runs it) ----
template <int N>
FG_DEV void regs_release() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes 24..256, multiples of 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N) : "memory");
}
template <int N>
FG_DEV void regs_take() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes 24..256, multiples of 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N) : "memory");
}

}  // namespace fg

#endif  // FG_SM90_CUH
