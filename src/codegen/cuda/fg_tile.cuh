// fg_tile.cuh — flashgen's tile library for the CUDA sm80 path (also runs on sm_90/sm_90a).
//
// What: the small set of warp-level building blocks the generated kernels are made of:
//   bf16 and f16 bit helpers, cp.async global->shared tile loads (predicated, zero fill), a
//   swizzled shared-memory tile layout, ldmatrix / mma.sync.m16n8k16 (BF16 or F16 in, f32
//   accumulate) wrappers,
//   fragment row max / row sum / rescale, and the S-accumulator -> A-operand conversion.
// Preconditions: compiled as CUDA C++ for sm_80 or newer, by nvcc or NVRTC. The file includes no
//   header at all (NVRTC has no host standard library), so it is safe to prepend to generated
//   source. Global tiles: innermost stride 1, row strides and base pointers 16-byte aligned.
// Test: bench/gpu/attn_harness.cu (run by scripts/gpu_check on the GPU machine) checks the kernels
//   built from these pieces against a plain f32 reference.
//
// Fragment conventions (PTX ISA, mma.m16n8k16): lane = 4*g + t (g = lane/4, t = lane%4).
//   accumulator C (16x8, f32): c[0],c[1] = row g,   cols 2t, 2t+1;  c[2],c[3] = row g+8, same cols
//   A operand (16x16, bf16x2 regs): a[0] = (g, 2t..), a[1] = (g+8, 2t..), a[2] = (g, 8+2t..),
//                                   a[3] = (g+8, 8+2t..)
//   B operand (16x8): b[0] = k 2t..2t+1 of col g, b[1] = k 8+2t.. of col g.
#pragma once

#ifndef FG_TILE_CUH
#define FG_TILE_CUH

namespace fg {

typedef unsigned short bf16raw;   // the bits of a 16-bit float (bf16, or f16 where Elem is F16)
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

// Stand-in for CUtensorMap (no cuda.h under NVRTC): 128 opaque bytes, 64-byte aligned; a member
// of the generated Params of kernels whose producer copies K/V by TMA (fg_sm90.cuh).
struct __align__(64) TmaDesc {
  u64 opaque[16];
};

#define FG_DEV __device__ __forceinline__

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

FG_DEV float neg_inf() { return __int_as_float(0xff800000); }
FG_DEV float pos_inf() { return __int_as_float(0x7f800000); }

// ---- bf16 bit helpers (no cuda_bf16.h: identical under nvcc and NVRTC) ----
FG_DEV float bf16_to_f32(bf16raw h) { return __uint_as_float(((u32)h) << 16); }
FG_DEV u32 pack_bf16x2(float lo, float hi) {  // round to nearest even, lo in the low half
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
FG_DEV bf16raw f32_to_bf16(float x) { return (bf16raw)(pack_bf16x2(x, 0.f) & 0xffffu); }
FG_DEV float bf16x2_lo(u32 v) { return __uint_as_float(v << 16); }
FG_DEV float bf16x2_hi(u32 v) { return __uint_as_float(v & 0xffff0000u); }
// ---- f16 bit helpers ----
FG_DEV u32 pack_f16x2(float lo, float hi) {  // round to nearest even, lo in the low half
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
FG_DEV float f16_to_f32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
FG_DEV unsigned short f32_to_f16(float x) { return (unsigned short)(pack_f16x2(x, 0.f) & 0xffffu); }

// ---- fast math ----
FG_DEV float ex2(float x) {  // 2^x, one MUFU op; ex2(-inf) = 0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
FG_DEV float fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
FG_DEV float sigmoid(float x) { return 1.f / (1.f + ex2(-x * kLog2e)); }

// ---- shared memory addresses, cp.async ----
FG_DEV u32 smem_u32(const void* p) { return (u32)__cvta_generic_to_shared(p); }

// 16-byte async copy; src_bytes = 0 fills the destination with zeros (predicated-off rows).
FG_DEV void cp_async16(u32 dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
}
FG_DEV void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// ---- named barriers: N threads (whole warps) of the block meet at barrier ID (1..15; 0 is
// __syncthreads) ----
template <int ID, int N>
FG_DEV void bar_sync() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(N) : "memory");
}
// Arrives at barrier ID without waiting (the N counts the threads that sync and arrive).
template <int ID, int N>
FG_DEV void bar_arrive() {
  asm volatile("bar.arrive %0, %1;\n" ::"n"(ID), "n"(N) : "memory");
}
// ... and learn whether p held for any of them (bar_sync).
template <int ID, int N>
FG_DEV bool bar_sync_or(bool p) {
  u32 r;
  asm volatile(
      "{\n.reg .pred p, q;\nsetp.ne.u32 q, %1, 0;\nbar.red.or.pred p, %2, %3, q;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(r)
      : "r"((u32)p), "n"(ID), "n"(N)
      : "memory");
  return r != 0;
}
template <int N>
FG_DEV void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// ---- ldmatrix / mma ----
FG_DEV void ldmatrix_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
FG_DEV void ldmatrix_x4_trans(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// The tensor cores' 16-bit operand types (Spec::Elem): d += a * b by mma.sync.m16n8k16 with f32
// accumulators, a pair of f32 rounded to nearest even into one register (lo in the low half), one
// element's bits back to f32, and the exponent mask (all ones: inf or NaN).
#define FG_MMA_16816(T)                                                                   \
  static FG_DEV void mma(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {               \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." T "." T                          \
                 ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"            \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                           \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));            \
  }
struct BF16 {
  static constexpr u32 kExp = 0x7f80u;
  static constexpr bool kBF16 = true;
  FG_MMA_16816("bf16")
  static FG_DEV u32 pack(float lo, float hi) { return pack_bf16x2(lo, hi); }
  static FG_DEV float to_f32(u32 bits) { return bf16_to_f32((bf16raw)bits); }
};
struct F16 {
  static constexpr u32 kExp = 0x7c00u;
  static constexpr bool kBF16 = false;
  FG_MMA_16816("f16")
  static FG_DEV u32 pack(float lo, float hi) { return pack_f16x2(lo, hi); }
  static FG_DEV float to_f32(u32 bits) { return f16_to_f32((unsigned short)bits); }
};
#undef FG_MMA_16816

// ---- swizzled shared-memory tile: ROWS x COLS bf16, row-major in column panels ----
// The tile is split into panels of PW columns (64 when COLS % 64 == 0, else 32), each stored
// row-major; inside a panel, the 16-byte chunk index is XORed with bits of the 128-byte line
// index (CUTLASS's Swizzle<3,4,3> on byte offsets). ldmatrix of 8 rows at one logical chunk and
// cp.async of consecutive chunks are then free of bank conflicts for every COLS in {32..256}.
template <int ROWS, int COLS>
struct SmemTile {
  static_assert(COLS % 32 == 0, "tile width must be a multiple of 32 elements");
  static constexpr int kPW = (COLS % 64 == 0) ? 64 : 32;
  static constexpr int kPanels = COLS / kPW;
  static constexpr int kPanelBytes = ROWS * kPW * 2;
  static constexpr int kBytes = ROWS * COLS * 2;
  static_assert(kPanelBytes % 1024 == 0, "panel must hold whole 1 KiB swizzle atoms");
  // byte offset of the 16-byte chunk holding element (r, c), c % 8 == 0
  static FG_DEV int off(int r, int c) {
    const int p = c / kPW;
    const int lin = r * (kPW * 2) + (c % kPW) * 2;
    return p * kPanelBytes + (lin ^ (((lin >> 7) & 7) << 4));
  }
};

// Asynchronously copy rows [row0, row0 + ROWS) of a global matrix g (row stride `ld` elements,
// innermost stride 1) into a SmemTile; rows >= rows_total are zero-filled and never read, or,
// with kClampRows (rows_total >= 1), copies of row rows_total - 1.
// CIN (<= COLS) is the columns g holds: the tile's columns from CIN on read as 0 (a head dim
// padded to the tile width). All NT threads of the block take part; each issues
// (ROWS*COLS/8)/NT 16-byte copies. Thread tid always copies column chunk tid % CPR of rows
// tid / CPR + i * (NT / CPR), so the shared offsets are one base plus immediates and the global
// address is one multiply-add per copy. When CIN is not a multiple of 8, rows of g need not be
// 16-byte aligned: the chunks are gathered element by element (plain loads, stored at once).
// With TROWS > ROWS the rows are rows TR0 .. TR0 + ROWS - 1 of a SmemTile<TROWS, COLS> at sdst
// (a part of a taller tile; TR0 a multiple of 8, so the swizzle is the tile's).
// `cin` (a compile-time value where the caller's loop unrolls; at most CIN, and a multiple of 8
// unless it is CIN) narrows the columns held further: a tile shared by operands of different
// widths (scores over head dims of their own).
template <int ROWS, int COLS, int NT, int CIN = COLS, bool kClampRows = false, int TROWS = ROWS,
          int TR0 = 0>
FG_DEV void load_tile_async(u32 sdst, const bf16raw* g, i64 ld, int row0, int rows_total,
                            int tid, int cin = CIN) {
  static_assert(TR0 % 8 == 0 && TR0 + ROWS <= TROWS, "rows of the tile");
  using T = SmemTile<TROWS, COLS>;
  auto off = [](int r, int c) { return T::off(r + TR0, c); };  // (the part's rows)
  constexpr int CPR = COLS / 8;  // 16-byte chunks per row
  static_assert((ROWS * CPR) % NT == 0, "tile chunks must divide evenly among threads");
  static_assert(CIN > 0 && CIN <= COLS, "columns held");
  if constexpr (CIN % 8 != 0) {
#pragma unroll 4
    for (int i = 0; i < ROWS * CPR / NT; ++i) {
      const int idx = i * NT + tid;
      const int rr = idx / CPR, c = (idx % CPR) * 8;
      const int grow = kClampRows ? min(row0 + rr, rows_total - 1) : row0 + rr;
      u32 w[4] = {0u, 0u, 0u, 0u};
      if (grow < rows_total && c < cin) {
        const bf16raw* src = g + (i64)grow * ld + c;
#pragma unroll
        for (int e = 0; e < 8; ++e)
          if (c + e < cin) w[e / 2] |= (u32)src[e] << (16 * (e % 2));
      }
      asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(sdst + off(rr, c)),
                   "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]));
    }
  } else if constexpr (NT % CPR == 0) {
    constexpr int RS = NT / CPR;  // rows covered by one sweep of the block
    constexpr bool kImm = RS % 16 == 0 || (T::kPW == 64 && RS % 8 == 0);
    const int r = tid / CPR, c = (tid % CPR) * 8;
    const u32 d0 = sdst + off(r, c);
#pragma unroll
    for (int i = 0; i < ROWS / RS; ++i) {
      const int rr = r + i * RS;
      const int grow = kClampRows ? min(row0 + rr, rows_total - 1) : row0 + rr;
      const bool ok = grow < rows_total && c < cin;
      const bf16raw* src = g + (ok ? (i64)grow * ld + c : 0);
      const u32 dst = kImm ? d0 + i * RS * (T::kPW * 2) : sdst + off(rr, c);
      cp_async16(dst, src, ok ? 16 : 0);
    }
  } else {  // widths such as 96: general index arithmetic
#pragma unroll
    for (int i = 0; i < ROWS * CPR / NT; ++i) {
      const int idx = i * NT + tid;
      const int rr = idx / CPR, c = (idx % CPR) * 8;
      const int grow = kClampRows ? min(row0 + rr, rows_total - 1) : row0 + rr;
      const bool ok = grow < rows_total && c < cin;
      const bf16raw* src = g + (ok ? (i64)grow * ld + c : 0);
      cp_async16(sdst + off(rr, c), src, ok ? 16 : 0);
    }
  }
}

// ---- staged gathers: a parameter's elements at (row, key) read by the score code ----
// A gather over the rows and keys of a tile (pair[b, h, m, n]; ROWS = 1 for key-only ones such
// as keep[b, n]) reads ROWS x BN elements per key tile. Read one by one from L2 inside the score
// code, they stall the key loop on long-latency loads; staged, they travel to shared memory a
// tile ahead with K and V (cp.async) and the score code reads them there. Rows are padded by 16
// bytes, so the accumulator layout's reads (8 rows x 4 lanes) fall in distinct banks.
struct StagedSrc {
  const unsigned char* base;   // the element at row 0, key 0 (the block's parallel indices)
  i64 row_stride, col_stride;  // in bytes (row_stride unused for key-only tiles)
};
constexpr __host__ __device__ int staged_pitch(int elem_bytes, int bn) {
  return bn * elem_bytes + 16;  // bytes per shared-memory row
}
constexpr int kMaxStaged = 4;
// Where the score code of the current key tile finds staged tile t: element (m, n) is
// staged_at<T>(tv.p[t], staged_pitch(ES, tv.bn), m - tv.m0, n - tv.n0) (row 0 for key-only
// tiles). bn is the running kernel's keys per tile: the score code is a member of the full
// kernel's Spec, which a kernel of other tiles (the few-rows kernel's 64 keys) runs too.
struct TileView {
  const unsigned char* p[kMaxStaged];
  int m0, n0, bn;
  // diagonal values (Spec::diagonals): value t of delta = n - m at dg[t * dpitch + delta - dbase];
  // values per key (Spec::key_values) after them: value t of key n at
  // dg[(kNumDiag + t) * dpitch + n - n0]
  const float* dg;
  int dbase, dpitch;
};
template <class T>
FG_DEV T staged_at(const unsigned char* tile, int pitch, int r, int c) {
  return *reinterpret_cast<const T*>(tile + r * pitch + c * (int)sizeof(T));
}

// One ES-byte element from global to shared memory, or a zero when !ok.
template <int ES>
FG_DEV void copy_element(unsigned char* d, const unsigned char* g, bool ok) {
  if constexpr (ES == 1) *d = ok ? *g : 0;
  if constexpr (ES == 2)
    *reinterpret_cast<unsigned short*>(d) = ok ? *reinterpret_cast<const unsigned short*>(g) : 0;
  if constexpr (ES == 4) *reinterpret_cast<u32*>(d) = ok ? *reinterpret_cast<const u32*>(g) : 0u;
  if constexpr (ES == 8) *reinterpret_cast<u64*>(d) = ok ? *reinterpret_cast<const u64*>(g) : 0ull;
}

// Copy rows [m0, m0 + ROWS) x keys [n0, n0 + BN) of `src` (ES-byte elements) to the shared
// tile `dst` (row pitch staged_pitch(ES, BN)); elements past M or N are zero (the score code
// may read them at a padded key; its result there is discarded).
// Contiguous, 16-byte aligned rows go as 16-byte cp.async chunks (the chunk that N cuts is
// copied element by element: cp.async would read past the row); any other layout element by
// element (synchronous: correct for every stride, slower).
template <int ROWS, int BN, int ES, int NT>
FG_DEV void load_staged(unsigned char* dst, const StagedSrc& s, int m0, int M, int n0, int N,
                        int tid) {
  static_assert(ES == 1 || ES == 2 || ES == 4 || ES == 8, "element size");
  constexpr int P = staged_pitch(ES, BN);
  const bool fast = s.col_stride == ES && ((unsigned long long)s.base & 15) == 0 &&
                    (ROWS == 1 || (s.row_stride & 15) == 0);
  if (fast) {
    constexpr int EPC = 16 / ES, CPR = BN / EPC;  // elements per chunk, chunks per row
    const u32 d0 = smem_u32(dst);
#pragma unroll
    for (int k = 0; k < (ROWS * CPR + NT - 1) / NT; ++k) {
      const int i = k * NT + tid;
      if ((ROWS * CPR) % NT != 0 && i >= ROWS * CPR) break;
      const int r = i / CPR, c = (i % CPR) * EPC, m = m0 + r, n = n0 + c;
      const int left = (ROWS == 1 || m < M) ? N - n : 0;  // valid elements from n on
      const unsigned char* g = s.base + (ROWS == 1 ? 0 : (i64)m * s.row_stride) + (i64)n * ES;
      if (left >= EPC || left <= 0) {
        cp_async16(d0 + r * P + c * ES, left > 0 ? g : s.base, left > 0 ? 16 : 0);
      } else {
        for (int e = 0; e < EPC; ++e)
          copy_element<ES>(dst + r * P + (c + e) * ES, g + e * ES, e < left);
      }
    }
  } else {
    for (int i = tid; i < ROWS * BN; i += NT) {
      const int r = i / BN, c = i % BN, m = m0 + r, n = n0 + c;
      const bool ok = (ROWS == 1 || m < M) && n < N;
      copy_element<ES>(dst + r * P + c * ES,
                       s.base + (ROWS == 1 ? 0 : (i64)m * s.row_stride) + (i64)n * s.col_stride,
                       ok);
    }
  }
}

// ---- per-warp fragment helpers (a warp owns 16 rows; each thread 2 of them: g and g+8) ----

// ldmatrix addressing with few registers: for lane-dependent parts (lr, lc) of (row, col) and
// compile-time parts (R0, C0), off(R0 + lr, C0 + lc) = base[(C0 % PW) / 16] + const, provided
// R0 % 16 == 0, C0 % 16 == 0 and lc in {0, 8}. The XOR of the swizzle then only touches the
// per-lane bases, and each access compiles to [register + immediate].
template <int ROWS, int COLS>
struct LdmAddr {
  using T = SmemTile<ROWS, COLS>;
  static constexpr int kBases = T::kPW / 16;
  u32 base[kBases];
  FG_DEV LdmAddr() {}
  FG_DEV LdmAddr(u32 tile, int lr, int lc) {
#pragma unroll
    for (int i = 0; i < kBases; ++i) base[i] = tile + T::off(lr, i * 16 + lc);
  }
  FG_DEV u32 at(int r0, int c0) const {
    return base[(c0 % T::kPW) / 16] + (c0 / T::kPW) * T::kPanelBytes + r0 * (T::kPW * 2);
  }
};

// Load the A operand (16 rows x K cols) of one warp from a SmemTile into registers.
template <int ROWS, int K>
FG_DEV void load_a_frags(u32 (&a)[K / 16][4], u32 stile, int row0, int lane) {
  const LdmAddr<ROWS, K> ad(stile, lane & 15, (lane >> 4) * 8);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) ldmatrix_x4(a[kk], ad.at(row0, kk * 16));
}

// Bounds [lo, hi] of value(i) over i in [i0, i1) (i0 < i1), computed by a whole warp: every
// lane calls it with the same arguments and reads every 32nd element; or, with a RangeGroup of
// several warps (the producer warpgroup, whose warps all call it together), by all of them,
// each reading every (32 * warps)th element, the warps' bounds met through shared memory. For
// tile classifiers over data (doc[n] over a key tile). T is the data's own type (int, float or double: min and max are
// exact in it; an int's bounds over the warp take one redux.sync each, a float's one shuffle
// per step); a NaN anywhere gives NaN bounds
// ("unknown, maybe NaN": codegen/interval_code.h).
FG_DEV int range_min(int a, int b) { return min(a, b); }
FG_DEV int range_max(int a, int b) { return max(a, b); }
FG_DEV float range_min(float a, float b) { return fminf(a, b); }
FG_DEV float range_max(float a, float b) { return fmaxf(a, b); }
FG_DEV double range_min(double a, double b) { return fmin(a, b); }
FG_DEV double range_max(double a, double b) { return fmax(a, b); }
// The bounds over a warp's lanes: shuffles, or for 32-bit integers one redux.sync each.
template <class T>
FG_DEV void warp_bounds(T& l, T& h) {
#pragma unroll
  for (int s = 16; s > 0; s >>= 1) {
    l = range_min(l, __shfl_xor_sync(0xffffffffu, l, s));
    h = range_max(h, __shfl_xor_sync(0xffffffffu, h, s));
  }
}
FG_DEV void warp_bounds(int& l, int& h) {
  l = __reduce_min_sync(0xffffffffu, l);
  h = __reduce_max_sync(0xffffffffu, h);
}
//
// RangeGroup: `warps` warps from `first_warp` on, which meet at named barrier `bar`; `slots`: 2 x
// warps x 16 bytes of shared memory (two copies, alternate calls: a warp writes a copy again
// only after the barrier of the call between, which every warp reaches after reading it).
struct RangeGroup {
  int warps = 1, first_warp = 0, bar = 0;
  u32 slots = 0;
  mutable int copy = 0;
};
template <class T = double, class F>
FG_DEV void warp_range(F value, int i0, int i1, double& lo, double& hi,
                       const RangeGroup& rg = RangeGroup()) {
  const int gw = rg.warps > 1 ? (int)(threadIdx.x >> 5) - rg.first_warp : 0;
  const int step = 32 * rg.warps;
  T l = value(i0), h = l;  // element i0 exists; every lane starts from it
  bool nan = l != l;
  // Four loads in flight a lane. Unrolled further (the compiler's default: 16, 8, 4, 1) the loop
  // is larger at every data range in the kernel and slower too; not unrolled, slower still
  // (bench/NOTES.md, session 41).
#pragma unroll 4
  for (int i = i0 + 32 * gw + (int)(threadIdx.x & 31); i < i1; i += step) {
    const T v = value(i);
    nan = nan || v != v;
    l = range_min(l, v);
    h = range_max(h, v);
  }
  warp_bounds(l, h);
  nan = __any_sync(0xffffffffu, nan);
  const double unknown = __longlong_as_double(0x7ff8000000000000LL);  // NaN
  lo = nan ? unknown : (double)l;
  hi = nan ? unknown : (double)h;
  if (rg.warps > 1) {
    const u32 base = rg.slots + 16 * rg.warps * rg.copy;
    rg.copy ^= 1;
    if ((threadIdx.x & 31) == 0)
      asm volatile("st.shared.v2.f64 [%0], {%1, %2};\n" ::"r"(base + 16 * gw), "d"(lo), "d"(hi)
                   : "memory");
    asm volatile("barrier.sync %0, %1;\n" ::"r"(rg.bar), "r"(step) : "memory");
    for (int w = 0; w < rg.warps; ++w) {
      double wl, wh;
      asm volatile("ld.shared.v2.f64 {%0, %1}, [%2];\n" : "=d"(wl), "=d"(wh) : "r"(base + 16 * w)
                   : "memory");
      nan = nan || wl != wl;
      lo = fmin(lo, wl);
      hi = fmax(hi, wh);
    }
    // (+ 0.0: a zero's sign may depend on the order the warps' bounds met in; every warp of the
    // group must take the same branches of classify after it)
    lo = nan ? unknown : lo + 0.0;
    hi = nan ? unknown : hi + 0.0;
  }
}

// Each warp of the group (rg.warps <= 4) contributes lane 0's `v` and every thread of the group
// gets all of them in warp order, through the slots warp_range uses (the same copy toggle, so a
// warp writes a copy only after every warp is done reading it: two barriers apart).
FG_DEV void group_exchange(int v, const RangeGroup& rg, int (&out)[4]) {
  const int gw = (int)(threadIdx.x >> 5) - rg.first_warp;
  const u32 base = rg.slots + 16 * rg.warps * rg.copy;
  rg.copy ^= 1;
  if ((threadIdx.x & 31) == 0)
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(base + 16 * gw), "r"(v) : "memory");
  asm volatile("barrier.sync %0, %1;\n" ::"r"(rg.bar), "r"(32 * rg.warps) : "memory");
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    out[w] = 0;
    if (w < rg.warps)
      asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(out[w]) : "r"(base + 16 * w) : "memory");
  }
}

// Convert accumulator fragments (16 x 16*KB, f32) into A operands (Elem) for the next mma.
template <class Elem, int KB>
FG_DEV void acc_to_a(u32 (&a)[KB][4], const float (&acc)[2 * KB][4]) {
#pragma unroll
  for (int kb = 0; kb < KB; ++kb) {
    a[kb][0] = Elem::pack(acc[2 * kb][0], acc[2 * kb][1]);
    a[kb][1] = Elem::pack(acc[2 * kb][2], acc[2 * kb][3]);
    a[kb][2] = Elem::pack(acc[2 * kb + 1][0], acc[2 * kb + 1][1]);
    a[kb][3] = Elem::pack(acc[2 * kb + 1][2], acc[2 * kb + 1][3]);
  }
}

// The fragments acc_to_a rounded, back in f32, taken from acc: what the rounding left (the next
// piece of a value split into pieces).
template <class Elem, int KB>
FG_DEV void sub_a_frags(float (&acc)[2 * KB][4], const u32 (&a)[KB][4]) {
#pragma unroll
  for (int kb = 0; kb < KB; ++kb)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      float (&t)[4] = acc[2 * kb + (r >> 1)];
      t[2 * (r & 1)] -= Elem::to_f32(a[kb][r] & 0xffffu);
      t[2 * (r & 1) + 1] -= Elem::to_f32(a[kb][r] >> 16);
    }
}

// The products of operands split into NP pieces: the pairs (i, j) with i + j < NP, numbered by
// diagonals (t = 0 is (0, 0), the largest; then (0, 1), (1, 0), (0, 2), ...).
constexpr FG_DEV int piece_pair_diag(int t) {
  int s = 0;
  while ((s + 1) * (s + 2) / 2 <= t) ++s;
  return s;
}
constexpr FG_DEV int piece_pair_i(int t) {
  return t - piece_pair_diag(t) * (piece_pair_diag(t) + 1) / 2;
}
constexpr FG_DEV int piece_pair_j(int t) { return piece_pair_diag(t) - piece_pair_i(t); }

// An operand of the tensor cores split into bf16 pieces (x = x_0 + x_1 + ... + x_{n-1}, each
// piece x rounded to bf16 after the ones before are taken away): a kernel's f32 (or mixed
// 16-bit) Q, K and V, written by the host's launch of fg::split_pieces before the kernel. The
// source is a strided tensor of `rank` dims (innermost last, extents ext, strides sst in
// elements; dtype 0 bf16, 1 f16, 2 f32, 3 f8e4m3, 4 f8e5m2); the destination is packed, each row of the innermost
// dim as `pieces` runs of ext[rank - 1] elements (dst_st: its strides, the innermost run 1).
// inf and NaN go whole into piece 0 (the others 0); a finite value whose rounding overflows
// bf16 truncates instead.
// An f8 value (e4m3: bias 7, no inf, S.1111.111 NaN; e5m2: the top byte of an f16).
FG_DEV float f8_to_f32(unsigned char b, bool e4m3) {
  if (!e4m3) return f16_to_f32((unsigned short)(b << 8));
  const int e = (b >> 3) & 15, m = b & 7;
  float v = (e == 15 && m == 7) ? __int_as_float(0x7fffffff)
            : e == 0            ? ldexpf((float)m, -9)
                                : ldexpf((float)(8 + m), e - 10);
  return (b & 0x80) ? -v : v;
}
struct SplitArgs {
  const void* src;
  bf16raw* dst;
  i64 dtype, rank, pieces, rows;  // rows: the product of the extents but the innermost
  i64 ext[8], sst[8], dst_st[8];
};
FG_DEV void split_pieces(const SplitArgs& a) {
  const int R = (int)a.rank, lane = threadIdx.x & 31;
  const i64 cols = a.ext[R - 1];
  const i64 warps = (i64)gridDim.x * (blockDim.x >> 5);
  for (i64 row = (i64)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); row < a.rows;
       row += warps) {
    i64 so = 0, d0 = 0, rem = row;
    for (int k = R - 2; k >= 0; --k) {
      const i64 x = rem % a.ext[k];
      rem /= a.ext[k];
      so += x * a.sst[k];
      d0 += x * a.dst_st[k];
    }
    for (i64 c = lane; c < cols; c += 32) {
      const i64 at = so + c * a.sst[R - 1];
      float x;
      if (a.dtype == 2) x = static_cast<const float*>(a.src)[at];
      else if (a.dtype == 1) x = f16_to_f32(static_cast<const unsigned short*>(a.src)[at]);
      else if (a.dtype >= 3) x = f8_to_f32(static_cast<const unsigned char*>(a.src)[at], a.dtype == 3);
      else x = bf16_to_f32(static_cast<const bf16raw*>(a.src)[at]);
      for (int p = 0; p < (int)a.pieces; ++p) {
        u32 bits = __float_as_uint(x);
        bf16raw h;
        if ((bits & 0x7f800000u) == 0x7f800000u) {
          h = (bf16raw)((bits >> 16) | ((bits & 0x7fffffu) ? 0x40u : 0u));  // NaN stays NaN
          x = 0.f;
        } else {
          h = f32_to_bf16(x);
          if ((h & 0x7f80u) == 0x7f80u) h = (bf16raw)(bits >> 16);  // truncate: stays finite
          x -= bf16_to_f32(h);
        }
        a.dst[d0 + p * cols + c] = h;
      }
    }
  }
}

// Lane parts of the ldmatrix addresses: A operands / S = Q K^T's B operand (K as stored) /
// P.V's B operand (V through ldmatrix.trans).
FG_DEV int lane_row_a(int lane) { return lane & 15; }
FG_DEV int lane_col_a(int lane) { return (lane >> 4) * 8; }
FG_DEV int lane_row_kt(int lane) { return (lane & 7) + ((lane >> 4) << 3); }
FG_DEV int lane_col_kt(int lane) { return ((lane >> 3) & 1) * 8; }
FG_DEV int lane_row_v(int lane) { return (lane & 7) + (((lane >> 3) & 1) << 3); }
FG_DEV int lane_col_v(int lane) { return (lane >> 4) * 8; }

// Row max over a thread's accumulator elements of row half h (0: row g, 1: row g+8), reduced
// over the 4 threads of the quad that share the row.
template <int NT8>
FG_DEV float row_max(const float (&x)[NT8][4], int h) {
  float m = neg_inf();
#pragma unroll
  for (int j = 0; j < NT8; ++j) m = fmaxf(m, fmaxf(x[j][2 * h], x[j][2 * h + 1]));
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
  return m;
}
// Per-thread partial row sum (no shuffles: flashgen keeps row sums per thread until the end).
template <int NT8>
FG_DEV float row_sum_partial(const float (&x)[NT8][4], int h) {
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < NT8; ++j) s += x[j][2 * h] + x[j][2 * h + 1];
  return s;
}
FG_DEV float quad_sum(float s) {
  s += __shfl_xor_sync(0xffffffffu, s, 1);
  s += __shfl_xor_sync(0xffffffffu, s, 2);
  return s;
}
// Multiply row half 0 by s0 and row half 1 by s1. kStrongZero: a factor of 0 (a rescale that
// underflowed) gives 0 even where the accumulator holds inf or NaN.
template <bool kStrongZero, int NT8>
FG_DEV void rescale_rows(float (&x)[NT8][4], float s0, float s1) {
  if constexpr (kStrongZero) {
    const bool z0 = s0 == 0.f, z1 = s1 == 0.f;
#pragma unroll
    for (int j = 0; j < NT8; ++j) {
      x[j][0] = z0 ? 0.f : x[j][0] * s0;
      x[j][1] = z0 ? 0.f : x[j][1] * s0;
      x[j][2] = z1 ? 0.f : x[j][2] * s1;
      x[j][3] = z1 ? 0.f : x[j][3] * s1;
    }
  } else {
#pragma unroll
    for (int j = 0; j < NT8; ++j) {
      x[j][0] *= s0;
      x[j][1] *= s0;
      x[j][2] *= s1;
      x[j][3] *= s1;
    }
  }
}


// ---- inf and NaN in a shared-memory tile of Elem (the strong zero of masked keys) ----
template <class Elem>
FG_DEV bool nonfinite16(u32 h) { return (h & Elem::kExp) == Elem::kExp; }  // h: the 16 bits
template <class Elem>
FG_DEV bool x2_any_nonfinite(u32 v) {
  return nonfinite16<Elem>(v & 0xffffu) | nonfinite16<Elem>(v >> 16);
}
// Whether this thread's share of the ROWS x COLS tile at generic address t (shared memory) holds
// an inf or a NaN; the block combines the answers (__syncthreads_or).
template <class Elem, int ROWS, int COLS, int NT>
FG_DEV bool tile_any_nonfinite(const unsigned char* t, int tid) {
  using T = SmemTile<ROWS, COLS>;
  constexpr int CPR = COLS / 8;
  bool nf = false;
#pragma unroll 4
  for (int q = tid; q < ROWS * CPR; q += NT) {
    const uint4 c = *reinterpret_cast<const uint4*>(t + T::off(q / CPR, (q % CPR) * 8));
    nf |= x2_any_nonfinite<Elem>(c.x) | x2_any_nonfinite<Elem>(c.y) |
          x2_any_nonfinite<Elem>(c.z) | x2_any_nonfinite<Elem>(c.w);
  }
  return nf;
}
// Sets this thread's share of the tile's inf and NaN elements to 0.
template <class Elem, int ROWS, int COLS, int NT>
FG_DEV void tile_zero_nonfinite(unsigned char* t, int tid) {
  using T = SmemTile<ROWS, COLS>;
  constexpr int CPR = COLS / 8;
  for (int q = tid; q < ROWS * CPR; q += NT) {
    uint4* p = reinterpret_cast<uint4*>(t + T::off(q / CPR, (q % CPR) * 8));
    uint4 c = *p;
    u32* w = &c.x;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (nonfinite16<Elem>(w[i] & 0xffffu)) w[i] &= 0xffff0000u;
      if (nonfinite16<Elem>(w[i] >> 16)) w[i] &= 0x0000ffffu;
    }
    *p = c;
  }
}
// The bits of element (r, c) of the tile.
template <int ROWS, int COLS>
FG_DEV u32 tile_at(const unsigned char* t, int r, int c) {
  return *reinterpret_cast<const bf16raw*>(t + SmemTile<ROWS, COLS>::off(r, c & ~7) + (c & 7) * 2);
}
template <int NT8>
FG_DEV void zero(float (&x)[NT8][4]) {
#pragma unroll
  for (int j = 0; j < NT8; ++j) x[j][0] = x[j][1] = x[j][2] = x[j][3] = 0.f;
}

// Store two adjacent bf16 values (e, e+1) of one row.
FG_DEV void store_bf16x2(bf16raw* p, float lo, float hi) {
  *reinterpret_cast<u32*>(p) = pack_bf16x2(lo, hi);
}
// Two adjacent f16 values.
FG_DEV void store_f16x2(unsigned short* p, float lo, float hi) {
  *reinterpret_cast<u32*>(p) = pack_f16x2(lo, hi);
}
FG_DEV float2 load_bf16x2(const bf16raw* p) {
  const u32 v = *reinterpret_cast<const u32*>(p);
  return make_float2(bf16x2_lo(v), bf16x2_hi(v));
}

}  // namespace fg

#endif  // FG_TILE_CUH
