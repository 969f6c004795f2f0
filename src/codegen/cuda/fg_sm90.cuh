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
//   - desc_sw128_mn: the descriptor of an MN-major operand in the same tiles (V as the B of
//     P.V: rows are keys, the value columns contiguous).
//   - mma_64x64x16_ss / mma_64x64x16_rs: D[64 x 64] (+)= A[64 x 16] . B by wgmma.mma_async
//     (bf16 or f16 in, f32 accumulate) with A from a descriptor or from registers (the
//     mma.m16n8k16 A layout, one warp per 16 rows), B from a descriptor (K-major, or MN-major
//     for the RS form); scale_d = 0 overwrites D. D is 8 n8 tiles of an accumulator array in
//     the sm80 path's mma.m16n8 layout, d[t][i]: register i of thread t' of the warpgroup
//     holds row 16 * (t' / 32) + (t' % 32) / 4 + 8 * (i >> 1), column 8 * t + 2 * (t' % 4) +
//     (i & 1).
//   - wgmma fences (fence / commit / wait<N>, fence_acc for the compiler), the proxy fence
//     after ordinary stores that wgmma reads, mbarriers (init, arrive, expect_tx, wait on a
//     parity),
//     TMA 2-D, 3-D and 5-D tile loads into shared memory completing on an mbarrier, and register
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
// The descriptor of an MN-major operand in the same tiles: `saddr` is the row of its first k
// value in a panel (rows are k values, 64 contiguous MN elements each); 8-row groups of k are
// 1024 bytes apart (SBO), the next 64 MN elements are in the next panel, `panel_bytes` on (LBO).
FG_DEV u64 desc_sw128_mn(u32 saddr, u32 panel_bytes) {
  return (u64)((saddr & 0x3FFFF) >> 4) | ((u64)((panel_bytes & 0x3FFFF) >> 4) << 16) |
         ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
}

// ---- wgmma ----
FG_DEV void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
FG_DEV void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
FG_DEV void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads or writes across the asynchronous wgmma.
template <int T8>
FG_DEV void fence_acc(float (&d)[T8][4]) {
#pragma unroll
  for (int t = 0; t < T8; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) asm volatile("" : "+f"(d[t][i])::"memory");
}
// After ordinary stores to shared memory that wgmma (the async proxy) reads; then a barrier.
FG_DEV void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Accumulator operands of one m64n64 wgmma: the 8 n8 tiles OFF .. OFF + 7 of d[NT8][4], the
// mma.m16n8 accumulator layout of the sm80 path (d[t][i]: row (lane / 4) + 8 * (i >> 1) of the
// warp's 16, column 8 * t + 2 * (lane % 4) + (i & 1)), which is wgmma's layout per warp.
#define FG_WG_T(t) "+f"(d[OFF + t][0]), "+f"(d[OFF + t][1]), "+f"(d[OFF + t][2]), "+f"(d[OFF + t][3])
#define FG_WG_ACC FG_WG_T(0), FG_WG_T(1), FG_WG_T(2), FG_WG_T(3), FG_WG_T(4), FG_WG_T(5), FG_WG_T(6), FG_WG_T(7)
#define FG_WG_D32                                                                           \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, " \
  "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define FG_WG_SS(T)                                                                           \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                   \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." T "." T " " FG_WG_D32             \
               ", %32, %33, p, 1, 1, 0, 0;\n}\n"                                                \
               : FG_WG_ACC                                                                    \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d))
// (the same, issued only where `on` is not 0: a guard predicate, no branch)
#define FG_WG_SS_IF(T)                                                                        \
  asm volatile("{\n.reg .pred p, q;\nsetp.ne.b32 p, %34, 0;\nsetp.ne.b32 q, %35, 0;\n"          \
               "@q wgmma.mma_async.sync.aligned.m64n64k16.f32." T "." T " " FG_WG_D32          \
               ", %32, %33, p, 1, 1, 0, 0;\n}\n"                                                \
               : FG_WG_ACC                                                                    \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "r"(on))
#define FG_WG_RS(T, TB)                                                                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                   \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." T "." T " " FG_WG_D32             \
               ", {%32, %33, %34, %35}, %36, p, 1, 1, " TB ";\n}\n"                            \
               : FG_WG_ACC                                                                    \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d))

// The same for m64n128k16: 16 n8 tiles OFF .. OFF + 15 (one instruction for 128 columns: the
// A operand is read once per 128 columns instead of per 64).
#define FG_WG_ACC128 FG_WG_ACC, FG_WG_T(8), FG_WG_T(9), FG_WG_T(10), FG_WG_T(11), FG_WG_T(12), \
                     FG_WG_T(13), FG_WG_T(14), FG_WG_T(15)
#define FG_WG_D64                                                                           \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "  \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "  \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "  \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define FG_WG_SS128(T)                                                                        \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                   \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." T "." T " " FG_WG_D64            \
               ", %64, %65, p, 1, 1, 0, 0;\n}\n"                                                \
               : FG_WG_ACC128                                                                 \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d))
#define FG_WG_SS128_IF(T)                                                                     \
  asm volatile("{\n.reg .pred p, q;\nsetp.ne.b32 p, %66, 0;\nsetp.ne.b32 q, %67, 0;\n"          \
               "@q wgmma.mma_async.sync.aligned.m64n128k16.f32." T "." T " " FG_WG_D64         \
               ", %64, %65, p, 1, 1, 0, 0;\n}\n"                                                \
               : FG_WG_ACC128                                                                 \
               : "l"(desc_a), "l"(desc_b), "r"(scale_d), "r"(on))
#define FG_WG_RS128(T, TB)                                                                    \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"                                   \
               "wgmma.mma_async.sync.aligned.m64n128k16.f32." T "." T " " FG_WG_D64            \
               ", {%64, %65, %66, %67}, %68, p, 1, 1, " TB ";\n}\n"                            \
               : FG_WG_ACC128                                                                 \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d))

// D (+)= A . B^T over one k16 step: D the 64 x 64 slice of n8 tiles OFF .. OFF + 7 of d, A and
// B K-major 16-bit panels (E: fg::BF16 or fg::F16) in shared memory; scale_d = 0 overwrites D.
template <class E, int OFF, int NT8, bool kIf = false>
FG_DEV void mma_64x64x16_ss(float (&d)[NT8][4], u64 desc_a, u64 desc_b, int scale_d, int on = 1) {
  static_assert(OFF % 8 == 0 && OFF + 8 <= NT8, "a whole 64-column slice");
  if constexpr (kIf) {
    if constexpr (E::kBF16) FG_WG_SS_IF("bf16"); else FG_WG_SS_IF("f16");
  } else {
    (void)on;
    if constexpr (E::kBF16) FG_WG_SS("bf16"); else FG_WG_SS("f16");
  }
}
// m64n128k16 (the 16 n8 tiles OFF .. OFF + 15; B's 128 columns: K-major rows contiguous in
// one panel, or MN-major over two panels LBO apart).
template <class E, int OFF, int NT8, bool kIf = false>
FG_DEV void mma_64x128x16_ss(float (&d)[NT8][4], u64 desc_a, u64 desc_b, int scale_d, int on = 1) {
  static_assert(OFF % 8 == 0 && OFF + 16 <= NT8, "a whole 128-column slice");
  if constexpr (kIf) {
    if constexpr (E::kBF16) FG_WG_SS128_IF("bf16"); else FG_WG_SS128_IF("f16");
  } else {
    (void)on;
    if constexpr (E::kBF16) FG_WG_SS128("bf16"); else FG_WG_SS128("f16");
  }
}
template <class E, bool kMnB, int OFF, int NT8>
FG_DEV void mma_64x128x16_rs(float (&d)[NT8][4], const u32 (&a)[4], u64 desc_b, int scale_d) {
  static_assert(OFF % 8 == 0 && OFF + 16 <= NT8, "a whole 128-column slice");
  if constexpr (E::kBF16) {
    if constexpr (kMnB) FG_WG_RS128("bf16", "1"); else FG_WG_RS128("bf16", "0");
  } else {
    if constexpr (kMnB) FG_WG_RS128("f16", "1"); else FG_WG_RS128("f16", "0");
  }
}
// D (+)= A . B over one k16 step, A in registers (a[j]: rows 16 * warp + lane / 4 + 8 * (j & 1),
// k 2 * (lane % 4) + 8 * (j >> 1) and the next, low half first: the mma.m16n8k16 A fragment),
// B from a descriptor: K-major (kMnB = false: B^T's rows are the 64 columns) or MN-major
// (kMnB = true: rows are the 16 k values, 64 contiguous columns each, desc_sw128_mn).
template <class E, bool kMnB, int OFF, int NT8>
FG_DEV void mma_64x64x16_rs(float (&d)[NT8][4], const u32 (&a)[4], u64 desc_b, int scale_d) {
  static_assert(OFF % 8 == 0 && OFF + 8 <= NT8, "a whole 64-column slice");
  if constexpr (E::kBF16) {
    if constexpr (kMnB) FG_WG_RS("bf16", "1"); else FG_WG_RS("bf16", "0");
  } else {
    if constexpr (kMnB) FG_WG_RS("f16", "1"); else FG_WG_RS("f16", "0");
  }
}
#undef FG_WG_SS
#undef FG_WG_SS_IF
#undef FG_WG_SS128_IF
#undef FG_WG_RS
#undef FG_WG_SS128
#undef FG_WG_RS128
#undef FG_WG_D32
#undef FG_WG_D64
#undef FG_WG_ACC128
#undef FG_WG_ACC
#undef FG_WG_T

// Row and column of accumulator d[t8][i] of warpgroup thread t (m64nN, f32).
FG_DEV int acc_row(int t, int i) { return 16 * (t / 32) + (t % 32) / 4 + 8 * (i >> 1); }
FG_DEV int acc_col(int t, int t8, int i) { return 8 * t8 + 2 * (t % 4) + (i & 1); }

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
// One arrival (release: this thread's earlier shared-memory writes are seen by the threads that
// wait for the phase).
FG_DEV void mbar_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Expects `bytes` more of asynchronous copies in the current phase, without an arrival (the
// thread arrives later, once its own copies of the phase have landed too).
FG_DEV void mbar_expect_tx_only(u32 bar, u32 bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}
// An arrival on `bar`, triggered once every cp.async this thread issued before has landed (the
// barrier's count includes it: .noinc).
FG_DEV void cp_async_mbar_arrive(u32 bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
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
FG_DEV void tma_load_5d(u32 dst, const TmaDesc* m, u32 bar, int c0, int c1, int c2, int c3,
                        int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, "
      "{%3, %4, %5, %6, %7}], [%2];\n" ::"r"(dst),
      "l"((u64)m), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
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
