// fg_attn_sm80.cuh — flashgen's generic fused attention forward kernel, sm80 path
// (FlashAttention-2 structure; runs on Ampere and Hopper).
//
// What: fg::attn_fwd_sm80<Spec>(params), a __device__ body that a generated __global__ entry
//   calls. Everything variant-specific comes from the generated `Spec` struct below; this file
//   holds no per-variant code.
// Structure: the grid is (m-tiles, flattened parallel dims). A block of kWarps warps owns
//   kBlockM = 16*kWarpMBlocks*kWarps query rows; each warp owns 16*kWarpMBlocks (FA2 uses 32 at
//   d=128: each K/V fragment read from shared memory feeds two MMAs). Q tiles go through shared
//   memory, into registers when they fit (else re-read per key tile); K/V tiles stream through
//   swizzled shared memory with cp.async double buffering (tile j+1 loads while tile j
//   computes); S = Q K^T by mma.sync.m16n8k16 (Spec::Elem: bf16 or f16 in, f32 accumulate); element
//   code and masks
//   run on the S fragments; online softmax in base 2 (running max per row in score units, exp2
//   of one FFMA, rescale of every accumulator of the group); P goes from the S fragments
//   straight into A operands of P.V; row sums stay per thread until the end.
//   Warp-specialized Specs (kWarpSpecialized, sm_90a) leave the loads, the tile scan and the
//   values per diagonal to a producer warpgroup that fills a ring of kStages stages guarded by
//   mbarriers; the compute warps only wait for their stage.
//   Tiles the Spec classifies EMPTY are never loaded; FULL tiles skip mask code; PARTIAL tiles and
//   the last, ragged key tile evaluate it. A call whose accumulators end non-finite somewhere is
//   flagged (err[7]) and run again by the host with the careful build (FG_CAREFUL), where inf or
//   NaN values of V at keys whose weight is 0 contribute nothing (add_nonfinite_values: the
//   strong zero of the language).
//   Gathers the score code reads per (row, key) or per key (a pair bias, a key mask) can be
//   staged: their tiles ride along with K/V into shared memory a tile ahead.
// Error words: Ctx::err (optional, int64_t*, 16 words, zeroed before the call) receives the
//   flag of a non-finite accumulator (err[7]) and, in the profile build, the tile counts; a
//   walking grid (kPersistent) hands out its work items through err[8] and err[9] (Params::err)
//   and leaves them 0 again when its last block is done taking.
// Profile build: compiled with -DFG_COUNT_TILES, thread 0 of each block adds the key tiles it
//   computed, skipped as empty and computed without mask code to ctx.err[4..6] (Ctx then needs
//   `int64_t* err` pointing at the error words); `flashgen profile` reads them.
// Preconditions: sm_80+; q/k/v innermost stride 1, row strides multiples of 8 elements, base
//   pointers 16-byte aligned; the Spec as documented below.
// Test: tests/gpu/cuda_examples_test.cpp (generated Specs of every example and of random
//   programs against the reference on the GPU, run by scripts/gpu_check);
//   tests/gpu/nvrtc_tile_library_test.cpp (hand-written Specs compile through NVRTC for sm_80 /
//   sm_90a); bench/gpu/attn_harness.cu (standalone hand-written Specs, checked and timed).
//
// ============================== The Spec interface ==============================
// The emitter generates one struct per fused kernel (src/codegen/cuda/README.md has a full
// example). All members are required unless marked optional.
//
//   struct Spec {
//     // --- compile-time shape ---
//     using Elem = fg::BF16;             // the 16-bit type of every Q, K and V (fg::BF16 or fg::F16;
//                                        // P is rounded to it for P.V)
//     static constexpr int kNumScores;   // S: score contractions c_s = Q_s . K_s^T (>= 1)
//     static constexpr int kNumGroups;   // G: softmax groups (each: running max, row sum) or
//                                        // plain groups (kPlainGroups: weights, row sum)
//                                        // (1..31: a bit each in the group masks below)
//     static constexpr int kPlainGroups; // optional (default 0): bit g makes group g plain
//     static constexpr int kWeightedGroups; // optional (default 0): bit g weighs group g's
//                                        // probabilities before P.V (weight<g>, below)
//     static constexpr int kWeighedSums; // optional (default 0): bit g: and before the row sums
//     static constexpr int kWeightsReadScores; // optional (default 0): bit g: weight<g> reads c
//     static constexpr int kNumV;        // V: distinct value tensors loaded per key tile (0
//                                        // exactly when A is 0)
//     static constexpr int kNumAcc;      // A: P.V accumulators (lowering fits them to the
//                                        // registers by the value split; 0: a kernel of the
//                                        // scores' row reductions alone, no V, no store())
//     static constexpr int kHeadDim;     // D: width of every Q_s/K_s (32, 64, 96, 128)
//     static constexpr int kValueDim;    // DV: width of every V / accumulator (32..256, % 32 == 0;
//                                        // with A = 0 a nominal width: nothing is loaded or
//                                        // stored by value column)
//     static constexpr int kValueSplit;  // optional (default 1): the value columns are
//                                        // kValueSplit chunks of kValueDim, one a block (a grid
//                                        // factor: P' below counts P x kValueSplit; each chunk's
//                                        // blocks recompute the scores)
//     static constexpr int kHeadDimData, kValueDimData;  // optional (default kHeadDim,
//                                        // kValueDim): the columns the tensors hold, when the
//                                        // head dims are padded (the rest read as 0; store()
//                                        // is called for column pairs e0 < kValueDimData)
//     static constexpr __host__ __device__ int score_dim_data(int s);  // optional (default
//                                        // kHeadDimData): score s's columns, where the scores
//                                        // contract head dims of their own (below)
//     static constexpr int kWarps;       // warps per block
//     static constexpr int kWarpMBlocks; // 16-row m-blocks per warp (1 or 2); the block owns
//                                        // kBlockM = 16 * kWarpMBlocks * kWarps query rows
//     static constexpr int kBlockN;      // keys per tile (32, 64, 128)
//     static constexpr int kMinBlocks;   // __launch_bounds__ min blocks per SM (for the entry)
//     static constexpr bool kReverseM;   // visit m-tiles last-first (balances causal work)
//     static constexpr bool kSkipRescale;  // optional (default false): skip the accumulator
//                                          // rescale in warps whose row maxima did not grow
//     static constexpr bool kWarpSpecialized;  // optional (default false; needs kWgmma and
//                                          // sm_90a): the last 4 of kWarps warps are a producer
//                                          // warpgroup that loads and classifies key tiles into a
//                                          // ring of kStages stages guarded by mbarriers; the
//                                          // other warps (kBlockM = 16 * kWarpMBlocks * (kWarps
//                                          // - 4) rows) only compute
//     static constexpr int kStages;      // optional (default 2): K/V stages in shared memory
//     static constexpr bool kPersistent; // optional (default false; with kWarpSpecialized): the
//                                        // blocks may loop over work items (Launch, below);
//                                        // Params then has `int64_t m_tiles`, and a walking
//                                        // call's `int64_t* err` holds the item counter
//                                        // (err[8], err[9]: zero before the call, zero after)
//     static constexpr bool kTma;        // optional (default false; with kWarpSpecialized):
//                                        // the producer copies K/V tiles by TMA. Params then
//                                        // has `fg::TmaDesc tma[S + V]` (5-dim maps of K_s,
//                                        // then V_i: column, key, three parallel dims; 128-byte
//                                        // swizzle, boxes of 64 columns x kBlockN keys) and Ctx
//                                        // `int tma_c[S + V][4]` (the block's column offset and
//                                        // parallel coordinates); without it, cp.async
//     static constexpr int kPieces;      // optional (default 1): every Q_s, K_s and V_i is held as
//                                        // kPieces bf16 pieces (x = x_0 + x_1 + ..., Elem BF16;
//                                        // the host splits f32 operands: fg::split_pieces), a row
//                                        // of Q_s / K_s as pieces of kPiecePitchQK elements,
//                                        // of V_i of kPiecePitchV (piece p at q[s] + p * pitch);
//                                        // a product multiplies the pieces i, j with i + j <
//                                        // kPieces, P split likewise (mma.sync only)
//     static constexpr int kPiecePitchQK, kPiecePitchV;  // (with kPieces > 1)
//     // optional (default 0): staged gathers, tiles of a parameter over (rows, keys) or (keys)
//     // that travel to shared memory with K/V a tile ahead (fg::load_staged); with it:
//     static constexpr int kNumStaged;                               // T (0..fg::kMaxStaged)
//     static constexpr __host__ __device__ int staged_elem_bytes(int t);  // 1, 2, 4 or 8
//     static constexpr __host__ __device__ bool staged_rows(int t);  // over rows too (else keys)
//     static constexpr __device__ int acc_group(int a);  // softmax group of accumulator a
//     static constexpr __device__ int acc_v(int a);      // value tensor of accumulator a
//
//     struct Params { ... };             // kernel argument (by value): pointers, strides, extents,
//                                        // scalars; entirely the emitter's choice
//     // Number of parallel indices P (the flattened parallel dims, e.g. B*H), from run-time
//     // extents in Params.
//     static __device__ int num_parallel(const Params& p);
//     // Per-block context: built once from the block's parallel index par in [0, P) (the
//     // grid index blockIdx.y + gridDim.y * blockIdx.z divided by the key split, then by
//     // kValueSplit, whose remainder gives e_begin; e.g. par = b*H + h). Must contain these
//     // members (fg::CtxBase<S, V> has them):
//     //   int M, N;                              extents of the query / key dims for this block
//     //   const bf16raw* q[S]; i64 q_ld[S];      row (m) 0 of Q_s and its row stride (elements;
//                                          bf16raw: the bits of Elem, bf16 or f16)
//     //   const bf16raw* k[S]; i64 k_ld[S];      row (n) 0 of K_s, row stride (GQA: kv head map)
//     //   const bf16raw* v[V]; i64 v_ld[V];      row (n) 0 of V_i, row stride
//     //   fg::StagedSrc staged[T];               (when kNumStaged > 0) where each staged
//     //                                          tile's elements live in global memory
//     // plus anything the element code needs (offset pointers, slopes, ...).
//     // make_ctx must be a pure function of (p, par, e_begin): the kernel calls it again before
//     // the epilogue so the output pointers do not occupy registers during the key loop.
//     // e_begin is the block's first value column (its chunk times kValueDim; 0 without
//     // kValueSplit): V_i's pointer starts there, and store() adds it to its column.
//     struct Ctx;
//     static __device__ void make_ctx(const Params& p, int par, int e_begin, Ctx& ctx);
//
//     // Tile classifier over the index box [m0,m1) x [n0,n1) (already clipped to M, N):
//     // fg::kTileEmpty (every element masked: the tile is skipped), fg::kTileFull (no element
//     // masked), fg::kTilePartial (keep, below, runs on its elements after score). Must be
//     // conservative: answer PARTIAL when unsure. Generated from interval analysis of the mask.
//     static __device__ int classify(const Ctx& ctx, int m0, int m1, int n0, int n1);
//     // optional, with static constexpr bool kBlockRows = true: once per block after make_ctx,
//     // with the block's rows (classify is only ever called with these m0, m1), e.g. to bound
//     // the row data of the mask once instead of at every classify call.
//     static __device__ void block_rows(Ctx& ctx, int m0, int m1);
//
//     // Element code of softmax group g in SCORE UNITS: returns h with x_g = h * score_scale<g>
//     // where x_g is the softmax logit in base 2 (log2(e) times the natural logit). The emitter
//     // factors the outermost positive constant out of the score expression into score_scale
//     // (vanilla: h = c[0], score_scale = log2(e)/sqrt(d); softcap: h = cap*tanh(c*s/cap),
//     // score_scale = log2(e)), so the kernel's exp is one FFMA + MUFU. c[s] = raw contraction
//     // value of score s at (m, n). m < M always holds (the kernel clamps padded rows); n may
//     // be a padded key of the last tile (n0 <= n < n0 + BN, its result discarded) unless
//     // kClampKeys (then n < N). With kKeep the tile mask is taken as true here (the element
//     // is a full tile's), and keep(m, n, ctx, tv) says for a partial tile's elements whether
//     // the mask keeps them (else the kernel sets the group's pad: -inf, a plain group's 0;
//     // it is called at a padded key too, with n as score gets it, and its answer there
//     // discarded); without kKeep a masked element returns -inf itself. The kernel
//     // masks the padded keys. tv locates the current key tile's staged tiles in shared
//     // memory (fg::staged_at; unused without staged gathers).
//     template <int g>
//     static __device__ float score(const float (&c)[S], int m, int n, const Ctx& ctx,
//                                   const fg::TileView& tv);
//     static __device__ bool keep(int m, int n, const Ctx& ctx, const fg::TileView& tv);
//     template <int g>
//     static __device__ float score_scale(const Ctx& ctx);  // > 0, finite
//     // With bit g of kWeightedGroups: the product of the P.V weights at (m, n), with the
//     // strong zero (arguments as score's; reads c only with bit g of kWeightsReadScores).
//     template <int g>
//     static __device__ float weight(const float (&c)[S], int m, int n, const Ctx& ctx,
//                                    const fg::TileView& tv);
//
//     // Epilogue for two adjacent value columns (e, e+1) of row m (m < M, e even):
//     // o[a][j] = accumulator a at (m, e+j), un-normalized; st has per group g: l[g] (row sum),
//     // inv_l[g] (1/l, 0 for an all-masked row), rcp_l[g] (1.f / l as is, which the divisions
//     // by l multiply by), mx[g] (running max, base 2; -inf if all masked). Not called (and
//     // not needed) where A is 0.
//     static __device__ void store(const Ctx& ctx, int m, int e, const float (&o)[A][2],
//                                  const fg::RowStats<G>& st);
//     // Once per row m < M (per-row outputs such as logsumexp); may be empty.
//     static __device__ void store_row(const Ctx& ctx, int m, const fg::RowStats<G>& st);
//   };
//
// Launch: grid = (ceil(max M / kBlockM), min(P', 65535), ceil(P' / 65535)) with P' = P times
//   kValueSplit times the key split (1 without kKeySplit); with kPersistent and Params::m_tiles = ceil(max M /
//   kBlockM) (0: the grid above), grid = (min(m_tiles * P', the blocks resident at once), 1,
//   1) and Params::err[8..9] zero (the kernel leaves them zero); block = 32 * kWarps,
//   dynamic shared memory =
//   fg::AttnSm80<Spec>::kSmemBytes (raise the limit above 48 KiB with cuFuncSetAttribute). With a
//   key split above 1, `part` holds P' * M * kPartRow floats, and attn_combine_sm80 runs after
//   it: grid (ceil(M * kValueDim / 2 / 128) (ceil(M / 128) with kNumAcc 0), min(P'', 65535),
//   ceil(P'' / 65535)) with P'' = P
//   times kValueSplit, 128 threads (the combine entry of the same Spec as the kernel). One
//   compiled kernel serves every M, N, batch and head count.
#pragma once

#ifndef FG_ATTN_SM80_CUH
#define FG_ATTN_SM80_CUH

#include "fg_tile.cuh"
#ifdef __CUDA_ARCH_FEAT_SM90_ALL
#include "fg_sm90.cuh"
#endif

namespace fg {

enum { kTileEmpty = 0, kTileFull = 1, kTilePartial = 2 };
// In a warp-specialized ring stage's class word: the tile is its item's last (Q is free once
// its scores have landed).
constexpr int kLastTile = 1 << 8;

template <int G>
struct RowStats {
  float l[G];      // softmax denominator (sum of 2^(x - mx))
  float inv_l[G];  // 1 / l, or 0 for an all-masked row
  float rcp_l[G];  // 1.f / l as is: +-inf where l is 0 (an all-masked row; a plain group's sum
                   // may be 0 or negative), the reciprocal that `x / l` multiplies by under
                   // fast math (the stores' divisions by l use it)
  float mx[G];     // running max of the base-2 logits (-inf for an all-masked row)
  // natural-log logsumexp of group g; -inf for an all-masked row
  FG_DEV float lse(int g) const { return l[g] > 0.f ? (mx[g] + __log2f(l[g])) * kLn2 : neg_inf(); }
};

template <int S, int V>
struct CtxBase {
  int M, N;
  const bf16raw* q[S];
  i64 q_ld[S];
  const bf16raw* k[S];
  i64 k_ld[S];
  const bf16raw* v[V > 0 ? V : 1];  // (V = 0: one slot, unused)
  i64 v_ld[V > 0 ? V : 1];
  RangeGroup rg;  // who computes the data ranges of classify and block_rows (fg::warp_range)
};

// An optional member `M` of the Spec: NAME<Spec>::value, DEFAULT when the Spec has none.
#define FG_OPTIONAL(NAME, M, TYPE, DEFAULT)                \
  template <class T, class = void>                         \
  struct NAME {                                            \
    static constexpr TYPE value = DEFAULT;                 \
  };                                                       \
  template <class T>                                       \
  struct NAME<T, decltype(void(T::M))> {                   \
    static constexpr TYPE value = T::M;                    \
  };
#define FG_OPTIONAL_FLAG(NAME, M) FG_OPTIONAL(NAME, M, bool, false)

// Optional Spec member kSkipRescale (default false): skip accumulator rescales for warps whose
// running maxima did not change in a tile.
FG_OPTIONAL_FLAG(SkipRescaleOf, kSkipRescale)

// Optional Spec member kBlockRows (default false): Spec::block_rows(ctx, m0, m1) runs once per
// block after make_ctx (per-block values of the classifier, such as the range of row data).
FG_OPTIONAL_FLAG(BlockRowsOf, kBlockRows)

// Optional Spec members kHeadDimData / kValueDimData (default kHeadDim / kValueDim): the columns
// Q, K and V hold when the head dims are padded to the tile width (the rest read as 0, and
// value columns from kValueDimData on are not stored).
template <class T, class = void>
struct HeadDataOf {
  static constexpr int d = T::kHeadDim, dv = T::kValueDim;
};
template <class T>
struct HeadDataOf<T, decltype(void(T::kHeadDimData + T::kValueDimData))> {
  static constexpr int d = T::kHeadDimData, dv = T::kValueDimData;
};

// Optional Spec member function score_dim_data(s) (constexpr __host__ __device__; default
// kHeadDimData for every score): the columns Q_s and K_s hold where the scores contract head
// dims of their own (MLA: 128 and 64 of rotary keys). Every score's tiles are kHeadDim wide; a
// score's columns past its own read as 0 and its products stop at them (in steps of 16).
// Optional Spec member kKeySplit (default false): the key loop may be split across blocks
// (flash-decoding). Params then has `int64_t key_split` (blocks per row tile, >= 1) and
// `float* part` (with key_split > 1: each block's partial state, merged by attn_combine_sm80).
FG_OPTIONAL_FLAG(KeySplitOf, kKeySplit)

// Optional Spec member kWgmma (default false): on sm_90a, the block's products by wgmma on
// warpgroups of 64 rows (kWarps a multiple of 4, kWarpMBlocks 1, head dims and key tiles
// multiples of 64). Elsewhere (another GPU, the careful build) the same shape by mma.sync.
FG_OPTIONAL_FLAG(WgmmaOf, kWgmma)

// Optional Spec member kWarpSpecialized (default false): a producer warpgroup (the last four
// warps) fills a ring of kStages stages (tile index and class, K/V and staged tiles by cp.async,
// the values per diagonal) guarded by mbarriers; the compute warps wait on a stage's `full`
// barrier and release it on its `empty` barrier, with no block-wide barrier in the key loop.
// Only with kWgmma, on sm_90a (setmaxnreg moves registers from the producer to the compute
// warps); the careful build keeps the structure and multiplies by mma.sync.
FG_OPTIONAL_FLAG(WarpSpecializedOf, kWarpSpecialized)

// Optional Spec member kPersistent (default false; warp-specialized Specs only): a call whose
// Params' `int64_t m_tiles` is above 0 launches a grid of at most as many blocks as are resident
// at once, which walk the work items (row tile, parallel index x key chunk) of m_tiles row tiles
// times P': block b's first item is b, and every later one is taken from a counter in the
// error words (items gridDim.x, gridDim.x + 1, ... in order), so a block whose items compute
// fewer key tiles takes more of them (items' work differs with a tile mask; a fixed
// assignment b, b + gridDim.x, ... gave each block the same row tile whenever gridDim.x was a
// multiple of m_tiles). The producer takes the next item when it reaches the end of this one
// and passes it to the compute warps with the stage of no tile, then fills the next item's
// stages while the compute warps finish this one. With m_tiles 0, the grid of one block per
// item.
FG_OPTIONAL_FLAG(PersistentOf, kPersistent)

// Optional Spec member kValueSplit (default 1): blocks take value-column chunks of kValueDim
// (the chunk innermost in the parallel index the kernel decodes: AttnSm80::context).
FG_OPTIONAL(ValueSplitOf, kValueSplit, int, 1)

// Optional Spec member kStages (default 2): stages of K/V (and staged) tiles in shared memory.
FG_OPTIONAL(StagesOf, kStages, int, 2)

// Optional Spec member kTma (default false; warp-specialized Specs only): the producer copies
// K/V tiles by TMA through the maps in Params, one thread issuing a tile's copies.
FG_OPTIONAL_FLAG(TmaOf, kTma)

// Optional Spec member kWgmmaN (default 64; with kWgmma): the columns of one wgmma instruction,
// 64 or 128 (Q.K^T over BN keys and P.V over the value columns in steps of that many where they
// divide; the A operand is read from shared memory once per instruction).
FG_OPTIONAL(WgmmaNOf, kWgmmaN, int, 64)

// Optional Spec member kPipelined (default false; warp-specialized wgmma Specs): each compute
// warpgroup issues the next tile's scores and this tile's P.V together and runs the next
// tile's softmax while P.V is on the tensor cores; with kPingPong too, the two warpgroups take
// turns at issuing (one hand-off per tile), so one's softmax runs under the other's products.
FG_OPTIONAL_FLAG(PipelinedOf, kPipelined)
FG_OPTIONAL_FLAG(PingPongOf, kPingPong)

// Optional Spec member kScanByWarps (default false; warp-specialized Specs whose classify reads
// data): the producer's four warps classify four spans at once, each its own (a warp's data
// range), descending from groups of four spans of 16 tiles to four single tiles, and keep each
// level's last results (scan_tiles in attn_fwd_sm80).
FG_OPTIONAL_FLAG(ScanByWarpsOf, kScanByWarps)

// Optional Spec member kChecksReadScores (default false): a check of the score code (a gather's
// range, a divisor) reads a score product, so a partial tile's score code runs only at keys
// below N: at a padded key the product is 0, which could fail a check no real element fails;
// and Q's rows past M are copies of row M - 1 (not zeros), so a padded row's score code computes
// a real row's elements.
// Without it the score code runs at every key and a padded key's result is replaced, which
// keeps its loads of row data (doc[m]) out of a per-element test.
FG_OPTIONAL_FLAG(ChecksReadScoresOf, kChecksReadScores)

// Optional Spec member kClampKeys (default false): the score code (or a P.V weight, or keep)
// reads device memory by the key, or takes x % y with y over the key dim, so at a padded key of
// the last tile
// it runs at key N - 1 (min(n, N - 1)); without it, at n itself (its shared-memory reads keep
// immediate offsets; staged tiles and the values per tile line cover the whole tile).
FG_OPTIONAL_FLAG(ClampKeysOf, kClampKeys)

// Optional Spec member kKeep (default false) with Spec::keep(m, n, ctx, tv): the tile mask,
// false where an element contributes nothing (a logit of -inf, a plain group's weight 0). The
// score code is then printed with the mask taken as true (a full tile's elements), and a
// partial tile's elements where keep is false get the group's pad afterwards. Without it the
// score code holds the mask itself.
FG_OPTIONAL_FLAG(KeepOf, kKeep)

// Optional Spec member kProducerRegs (default 56; warp-specialized): the producer warpgroup's
// registers after setmaxnreg; the compute warpgroups take the rest (224 at 56).
FG_OPTIONAL(ProducerRegsOf, kProducerRegs, int, 56)

// Optional Spec member kNumDiag (default 0): values of the score code that depend on the row
// and key only through n - m, computed once per tile for each of its BM + BN - 1 deltas by
// Spec::diagonals(ctx, delta, float* d, pitch) (value t to d[t * pitch]); the score code reads
// them through TileView (dg, dbase, dpitch).
FG_OPTIONAL(DiagOf, kNumDiag, int, 0)

// Optional Spec member kNumKeyVals (default 0): values of the score code that depend on the key
// alone (and per-block values), computed once per tile for each of its BN keys by
// Spec::key_values(ctx, n, float* d, pitch) (value t to d[t * pitch]) into the diagonal values'
// area after them; the score code reads value t at tv.dg[(kNumDiag + t) * dpitch + n - n0].
FG_OPTIONAL(KeyValsOf, kNumKeyVals, int, 0)
// Optional Spec member kDiagCopies (default 2): copies of the values per diagonal and per key in
// a warp-specialized kernel, from 2 to kStages (tile i's values go to copy i % kDiagCopies; with
// fewer copies than stages, the producer waits until the compute warps are done with tile
// i - kDiagCopies before filling tile i's).
FG_OPTIONAL(DiagCopiesOf, kDiagCopies, int, 2)
// Optional Spec member kQBuffers (default 1, at most 2): a warp-specialized kernel holds Q's
// tiles in that many buffers, item k's in buffer k % kQBuffers, so with 2 the producer loads
// the next item's Q once it has issued this item's last key tile, not once the compute warps
// are done reading this item's Q.
FG_OPTIONAL(QBuffersOf, kQBuffers, int, 1)

// Optional Spec member kPlainGroups (default 0): bit g set makes group g plain: score<g> gives
// weights as they are (no running max, no exp), summed into the row sums and multiplied into
// the group's accumulators (sigmoid or relu weights); masked and out-of-range keys weigh 0.
FG_OPTIONAL(PlainGroupsOf, kPlainGroups, int, 0)

// Optional Spec member kBareGroups (default 0): bit g set: group g's running max is all the
// kernel keeps of it (a max or min over the keys beside the attention: no row sums, no P.V),
// so its scores take no exponentials and make no P operands.
FG_OPTIONAL(BareGroupsOf, kBareGroups, int, 0)

// Optional Spec member kWeightedGroups (default 0): bit g set weighs group g's probabilities
// before they multiply its values (key gates: sum(softmax(s) * gate * v)): after the row sums
// took them as they are, each p becomes p times Spec::weight<g>(c, m, n, ctx, tv), the product
// of the weights at (m, n), with the strong zero (arguments as score's: at a padded key, whose p
// is 0, n itself or, with kClampKeys, N - 1).
FG_OPTIONAL(WeightedGroupsOf, kWeightedGroups, int, 0)
// Optional Spec member kWeightsReadScores (default 0): bit g set: group g's weights read the
// scores c, so the kernel computes them with the scores (held until the probabilities are
// weighed: x may overwrite c); without it weight<g> reads no score.
FG_OPTIONAL(WeightsReadScoresOf, kWeightsReadScores, int, 0)
// Optional Spec member kWeighedSums (default 0): bit g set (with g's bit of kWeightedGroups)
// weighs the probabilities before the row sums take them (sum(exp(s - max) * g) as the
// normalizer: a softmax renormalized over its weights, a mask written as a factor).
FG_OPTIONAL(WeighedSumsOf, kWeighedSums, int, 0)

// Optional Spec members kPieces (default 1), kPiecePitchQK, kPiecePitchV: the operands held as
// bf16 pieces (the Spec interface above).
FG_OPTIONAL(PiecesOf, kPieces, int, 1)
FG_OPTIONAL(PitchQKOf, kPiecePitchQK, int, 0)
FG_OPTIONAL(PitchVOf, kPiecePitchV, int, 0)
#undef FG_OPTIONAL_FLAG
#undef FG_OPTIONAL

// Whether the Spec's Ctx has `int64_t* err` (generated Specs: the call's error words).
template <class C, class = void>
struct ErrOf {
  static constexpr bool value = false;
};
template <class C>
struct ErrOf<C, decltype(void(C::err))> {
  static constexpr bool value = true;
};

// Optional Spec member type Pre (generated Specs whose epilogue reads intermediates another
// kernel wrote): Spec::preload(ctx, m, e0, pre) reads them for columns e0, e0 + 1 of row m, and
// Spec::store(ctx, m, e0, o, st, pre) stores with them. The block's epilogue issues the loads of
// pre_chunk<Spec> column pairs before their stores, so their latencies overlap (a store between two
// loads would keep the compiler from moving the second above it).
struct NoPre {};
template <class T, class = void>
struct PreOf {
  using type = NoPre;
  static constexpr bool value = false;
};
template <class T>
struct PreOf<T, decltype(void(sizeof(typename T::Pre)))> {
  using type = typename T::Pre;
  static constexpr bool value = true;
};
// Column pairs a thread preloads at once: 64 bytes of loaded values in registers.
template <class T>
constexpr __host__ __device__ int pre_chunk(int pairs) {
  const int c = PreOf<T>::value ? (int)(64 / sizeof(typename PreOf<T>::type)) : pairs;
  return c < 1 ? 1 : c < pairs ? c : pairs;
}

// Optional Spec member kNumStaged (default 0) and its layout functions.
template <class T, class = void>
struct StagedOf {
  static constexpr int kNum = 0;
  static constexpr __host__ __device__ int elem_bytes(int) { return 1; }
  static constexpr __host__ __device__ bool rows(int) { return false; }
};
template <class T>
struct StagedOf<T, decltype(void(T::kNumStaged))> {
  static constexpr int kNum = T::kNumStaged;
  static constexpr __host__ __device__ int elem_bytes(int t) { return T::staged_elem_bytes(t); }
  static constexpr __host__ __device__ bool rows(int t) { return T::staged_rows(t); }
};

template <class Spec>
struct AttnSm80 {
  static constexpr bool kSkipRescale = SkipRescaleOf<Spec>::value;
  using Staged = StagedOf<Spec>;
  static constexpr int T = Staged::kNum;
  using Elem = typename Spec::Elem;
  static constexpr int S = Spec::kNumScores, G = Spec::kNumGroups, V = Spec::kNumV,
                       A = Spec::kNumAcc;
  // Arrays of the accumulators: A of them, or one unused where the kernel has none (A = 0: no
  // array may be of size 0 in device code).
  static constexpr int AS = A > 0 ? A : 1;
  static constexpr int D = Spec::kHeadDim, DV = Spec::kValueDim;
  // Operands as NP bf16 pieces: Q tile s*NP + p, K tile s*NP + p and V tile i*NP + p of a
  // stage hold piece p; a product sums the piece products i + j < NP.
  static constexpr int NP = PiecesOf<Spec>::value;
  static constexpr int kPitchQK = PitchQKOf<Spec>::value, kPitchV = PitchVOf<Spec>::value;
  // Group g of plain sums (kPlainGroups)
  static constexpr __host__ __device__ bool plain(int g) { return (PlainGroupsOf<Spec>::value >> g) & 1; }
  // Group g of a running max alone (kBareGroups)
  static constexpr __host__ __device__ bool bare(int g) { return (BareGroupsOf<Spec>::value >> g) & 1; }
  // Group g's weights are some accumulator's P operands (not a bare group's, nor any group's in
  // a kernel of no accumulators: those take no conversion to operands and no rescale)
  static constexpr __device__ bool reads_p(int g) {
    for (int a = 0; a < A; ++a)
      if (Spec::acc_group(a) == g) return true;
    return false;
  }
  // what an element the mask removes (or a padded key) holds: a logit of -inf, a plain weight 0
  static __device__ float pad(int g) { return plain(g) ? 0.f : neg_inf(); }
  // Group g of weighted probabilities (kWeightedGroups)
  static constexpr __host__ __device__ bool weighted(int g) { return (WeightedGroupsOf<Spec>::value >> g) & 1; }
  // ... whose row sums take them weighted (kWeighedSums)
  static constexpr __host__ __device__ bool weighs_sums(int g) { return (WeighedSumsOf<Spec>::value >> g) & 1; }
  // ... whose weights read the scores (kWeightsReadScores)
  static constexpr __host__ __device__ bool weights_read_scores(int g) { return (WeightsReadScoresOf<Spec>::value >> g) & 1; }
  static constexpr bool kHeldWeights = WeightsReadScoresOf<Spec>::value != 0;
  // The Spec's members of group g (score_scale<g>, score<g>, weight<g>) at a run-time g: a chain
  // of compares that folds to the one call where g is a constant (a loop over the groups,
  // unrolled). (NVRTC takes no generic lambdas in device code without -default-device.)
  template <int I = 0>
  static FG_DEV float score_scale_of(int g, const typename Spec::Ctx& ctx) {
    if constexpr (I + 1 < G)
      if (g != I) return score_scale_of<I + 1>(g, ctx);
    return Spec::template score_scale<I>(ctx);
  }
  // (kWeight: weight<g>, else score<g>)
  template <bool kWeight, int I = 0>
  static FG_DEV float element_of(int g, const float (&c)[S], int m, int n,
                                 const typename Spec::Ctx& ctx, const TileView& tv) {
    if constexpr (I + 1 < G)
      if (g != I) return element_of<kWeight, I + 1>(g, c, m, n, ctx, tv);
    if constexpr (kWeight) return Spec::template weight<I>(c, m, n, ctx, tv);
    else return Spec::template score<I>(c, m, n, ctx, tv);
  }
  static FG_DEV float score_of(int g, const float (&c)[S], int m, int n,
                               const typename Spec::Ctx& ctx, const TileView& tv) {
    return element_of<false>(g, c, m, n, ctx, tv);
  }
  static FG_DEV float weight_of(int g, const float (&c)[S], int m, int n,
                                const typename Spec::Ctx& ctx, const TileView& tv) {
    return element_of<true>(g, c, m, n, ctx, tv);
  }
  static constexpr int DIN = HeadDataOf<Spec>::d, DVIN = HeadDataOf<Spec>::dv;  // columns held
  // the columns Q_s and K_s hold (score_dim_data), and the k16 steps of score s's product
  // (overloads, not a trait's static member: NVRTC emits a global for such a member read here)
  template <class T>
  static constexpr __host__ __device__ auto din_of(int s, int) -> decltype(T::score_dim_data(s)) {
    return T::score_dim_data(s);
  }
  template <class T>
  static constexpr __host__ __device__ int din_of(int, long) { return DIN; }
  static constexpr __host__ __device__ int din(int s) { return din_of<Spec>(s, 0); }
  static constexpr __host__ __device__ int score_k16(int s) { return (din(s) + 15) / 16; }
  // TMA (64-column panels): the panels of score s's K that hold its columns (the rest of its
  // tile is never read: its k16 steps stop before them), and a stage's bytes the copies bring
  static constexpr __host__ __device__ int k_panels(int s) { return (din(s) + 63) / 64; }
  static constexpr __host__ __device__ int kv_tx_bytes() {
    int b = V * kVBytes;
    for (int s = 0; s < S; ++s) b += k_panels(s) * BN * 128;
    return b;
  }
  // (each at most DIN, a multiple of 8 unless it is DIN: load_tile_async's column bound)
  static constexpr __host__ __device__ bool score_dims_fit() {
    for (int s = 0; s < S; ++s)
      if (din(s) <= 0 || din(s) > DIN || (din(s) % 8 != 0 && din(s) != DIN)) return false;
    return true;
  }
  // Warp specialization: NWC compute warps (NTC threads) own the rows; NL threads load (the
  // producer warpgroup, or every thread of the block without it).
  static constexpr bool kWs = WarpSpecializedOf<Spec>::value;
  static constexpr int kStages = StagesOf<Spec>::value;
  static constexpr bool kTma = TmaOf<Spec>::value;
  static constexpr bool kPersistent = PersistentOf<Spec>::value;
  static constexpr int NW = Spec::kWarps, NT = 32 * NW, MW = Spec::kWarpMBlocks;
  static constexpr int NWC = kWs ? NW - 4 : NW, NTC = 32 * NWC, NL = kWs ? 128 : NT;
  static constexpr int BM = 16 * MW * NWC, BN = Spec::kBlockN;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) && !defined(FG_CAREFUL)
  static constexpr bool kWgmma = WgmmaOf<Spec>::value;
#else
  static constexpr bool kWgmma = false;
#endif
  static constexpr int kWgmmaN = WgmmaNOf<Spec>::value;
  static constexpr bool kPipe = kWgmma && kWs && PipelinedOf<Spec>::value;
  static constexpr bool kPingPong = kPipe && PingPongOf<Spec>::value;
  static constexpr bool kScanByWarps = kWs && ScanByWarpsOf<Spec>::value;
  // Registers per thread after setmaxnreg: the producer keeps kProducerRegs (the Spec's, 56 by
  // default), the compute warps take the rest of the block's 168 x 384 (a multiple of 8).
  static constexpr int kProducerRegs = ProducerRegsOf<Spec>::value;
  static constexpr int kComputeRegs = (168 * 384 - 128 * kProducerRegs) / 256 / 8 * 8;
  // (setmaxnreg lowers the producer and raises the compute warps, in multiples of 8)
  static_assert(kProducerRegs % 8 == 0 && kProducerRegs >= 24 && kProducerRegs <= 168 &&
                    kComputeRegs >= 168 && kComputeRegs <= 256,
                "registers");
  // Q stays in registers when the fragments that live across the key loop (Q, the accumulators,
  // the scores) fit a register budget; otherwise it is re-read from shared memory per tile
  // (wgmma reads it from shared memory).
  // (operands in pieces: Q's fragments, D / 4 registers per m-block and piece, and the P
  // pieces, G * NP * BN / 4, counted in full: the 16-bit count below is the measured tuning)
  static constexpr int kLiveRegs =
      NP == 1 ? S * MW * D / 8 + A * MW * DV / 2 + S * MW * BN / 2
              : S * NP * MW * D / 4 + A * MW * DV / 2 + S * MW * BN / 2 + G * NP * MW * BN / 4;
  static constexpr bool kQInRegs = !kWgmma && kLiveRegs <= 160;
  static constexpr int kQK = kQInRegs ? D / 16 : 1;  // k16 blocks of Q held in registers
  static constexpr int kQBytes = SmemTile<BM, D>::kBytes;
  static constexpr int kKBytes = SmemTile<BN, D>::kBytes;
  static constexpr int kVBytes = SmemTile<BN, DV>::kBytes;
  // Each stage's staged tiles lie after all stages' K and V tiles (which keep the swizzle's
  // 1 KiB alignment without padding), a stage's staged area rounded up to 128 bytes.
  static constexpr __host__ __device__ int staged_bytes(int t) {
    return (Staged::rows(t) ? BM : 1) * staged_pitch(Staged::elem_bytes(t), BN);
  }
  static constexpr __host__ __device__ int staged_off(int t) {  // from the stage's staged area
    return t == 0 ? 0 : staged_off(t - 1) + staged_bytes(t - 1);
  }
  static constexpr int kStagedBytes = (staged_off(T) + 127) / 128 * 128;
  static constexpr int kKAll = NP * S * kKBytes;  // a stage's K tiles; its V tiles follow
  static constexpr int kVStride = NP * kVBytes;   // from V_i's tiles to V_{i+1}'s
  static constexpr int kStageBytes = kKAll + V * kVStride;  // a stage's K and V tiles
  // The diagonal values follow the stages: one copy, whose writes and reads the loop's barriers
  // order, or, warp-specialized, the Spec's kDiagCopies (the producer fills tile i's copy
  // i % kDiagCopies once the compute warps are done with tile i - kDiagCopies).
  // (the values per key after them, BN of kDiagPitch floats each)
  static constexpr int ND = DiagOf<Spec>::value, NK = KeyValsOf<Spec>::value;
  static constexpr int kDiagPitch = (BM + BN - 1 + 3) / 4 * 4;
  static constexpr int kDiagBytes = (ND + NK) * kDiagPitch * 4;
  static constexpr int kDiagCopies = kWs && kStages > 1 ? DiagCopiesOf<Spec>::value : 1;
  // (a warp-specialized kernel needs two at least: with one, the producer would wait for the
  // release of tile i - 1 before filling tile i, which a pipelined loop releases after it)
  static_assert(!(kWs && kStages > 1) || (DiagCopiesOf<Spec>::value >= 2 &&
                                          DiagCopiesOf<Spec>::value <= kStages),
                "copies");
  static constexpr int kQAll = NP * S * kQBytes;  // the Q tiles of an item
  static constexpr int kQB = kWs ? QBuffersOf<Spec>::value : 1;  // Q's buffers
  static constexpr int kQArea = kQB * kQAll;  // every Q buffer, before the stages
  static constexpr int kStagedOff = kQArea + kStages * kStageBytes;  // the staged areas
  static constexpr int kDiagOff = kStagedOff + kStages * kStagedBytes;
  // Warp-specialized: the ring's mbarriers (full[kStages], empty[kStages]), each stage's tile
  // index and class (two ints; the stage of no tile: -1 and the next item), Q's mbarriers
  // (q_full and q_empty of each compute warpgroup and Q buffer), then from kRingOff + 128
  // (160 with two Q buffers) the producer's RangeGroup slots (2 x 4 warps x 16 bytes).
  static constexpr int kRingOff = kDiagOff + kDiagCopies * kDiagBytes;
  static constexpr int kRingSlotsOff = kQB == 1 ? 128 : 160, kRingBytes = kRingSlotsOff + 2 * 4 * 16;
  static constexpr int kSmemBytes = kRingOff + (kWs ? kRingBytes : 0);
  // floats per row of a split block's partial state: G running maxima, G row sums, A x DV
  static constexpr int kPartRow = 2 * G + A * DV;
  // The parallel indices with the value chunks (innermost), and the context of one of them.
  static constexpr int VS = ValueSplitOf<Spec>::value;
  static FG_DEV int parallel(const typename Spec::Params& p) { return Spec::num_parallel(p) * VS; }
  static FG_DEV void context(const typename Spec::Params& p, int par, typename Spec::Ctx& ctx) {
    Spec::make_ctx(p, (int)((unsigned)par / (unsigned)VS), (int)((unsigned)par % (unsigned)VS) * DV,
                   ctx);
  }
  static_assert(S >= 1 && G >= 1 && G <= 31 && V >= 0 && A >= 0 && (A == 0) == (V == 0),
                "unsupported numbers of scores / groups / values / accumulators");
  static_assert(MW == 1 || MW == 2, "a warp owns 16 or 32 query rows");
  static_assert(D % 32 == 0 && D <= 256 && DV % 32 == 0 && DV <= 256, "head dims");
  static_assert(DIN > D - 32 && DIN <= D && DVIN > DV - 32 && DVIN <= DV, "padding");
  static_assert(score_dims_fit(), "the scores' own head dims");
  static_assert(BN % 32 == 0 && BN <= 128, "key tile");
  static_assert(T >= 0 && T <= kMaxStaged, "staged gathers");
  static_assert(!WgmmaOf<Spec>::value || (NW % 4 == 0 && MW == 1 && D % 64 == 0 &&
                                          DV % 64 == 0 && BN % 64 == 0),
                "wgmma: warpgroups of 64 rows, 64-column panels");
  static_assert(!kWs || (WgmmaOf<Spec>::value && NW == 12), "warp specialization: two compute "
                "warpgroups of wgmma and a producer warpgroup");
  static_assert(kWgmmaN == 64 || kWgmmaN == 128, "wgmma instructions of 64 or 128 columns");
  static_assert(kQB >= 1 && kQB <= 2, "Q buffers");
  static_assert(!kWs || (24 * kStages + 32 * kQB <= kRingSlotsOff && kRingOff % 16 == 0 && NL == 128),
                "the ring area: mbarriers and tile indices, then the producer's range slots");
  static_assert(kStages >= 2 && kStages <= 4 && (kWs || kStages == 2), "stages");
  static_assert(NP >= 1 && NP <= 3 && (NP == 1 || (!WgmmaOf<Spec>::value && Elem::kBF16 &&
                                                   kPitchQK >= DIN && kPitchV >= DVIN)),
                "pieces: bf16, mma.sync, pitches of at least the columns held");
  static_assert(!kTma || kWs, "TMA copies are the producer warpgroup's");
  static_assert(!kPersistent || kWs, "a persistent grid: warp-specialized kernels only");
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(!kWs, "a warp-specialized Spec compiles for sm_90a only (mbarrier waits, setmaxnreg)");
#endif

  // A barrier of the compute warps (all threads without warp specialization); the OR of p over
  // them.
  static FG_DEV void sync_compute() {
    if constexpr (kWs) bar_sync<1, NTC>(); else __syncthreads();
  }
  static FG_DEV bool sync_compute_or(bool p) {
    if constexpr (kWs) return bar_sync_or<1, NTC>(p); else return __syncthreads_or(p);
  }
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// One k16 step of S (64 x BN per warpgroup) = Q K^T by wgmma, key columns 64n on: Q (the
// warpgroup's 64 rows, descriptor dq) and K (the step's column of its panel at kt) from their
// swizzled shared tiles (64-column panels: the 128-byte swizzle of wgmma's descriptors).
template <class K, int n, bool kIf>
FG_DEV void qk_step(float (&c)[K::BN / 8][4], u64 dq, u32 kt, int scale_d, int on) {
  if constexpr (K::kWgmmaN == 128 && 64 * (n + 2) <= K::BN) {
    mma_64x128x16_ss<typename K::Elem, 8 * n, K::BN / 8, kIf>(c, dq, desc_sw128(kt + n * 64 * 128),
                                                              scale_d, on);
    if constexpr (64 * (n + 2) < K::BN) qk_step<K, n + 2, kIf>(c, dq, kt, scale_d, on);
  } else {
    mma_64x64x16_ss<typename K::Elem, 8 * n, K::BN / 8, kIf>(c, dq, desc_sw128(kt + n * 64 * 128),
                                                             scale_d, on);
    if constexpr (64 * (n + 1) < K::BN) qk_step<K, n + 1, kIf>(c, dq, kt, scale_d, on);
  }
}
// kIf: issued only where `on` is not 0 (each wgmma under a guard predicate: a branch around
// them would make ptxas serialize the loop's wgmma)
// k16: the score's k16 steps (AttnSm80::score_k16; a constant once the callers' loop over the
// scores unrolls, so no branch is left around a wgmma)
template <class K, bool kIf = false>
FG_DEV void scores_wgmma(float (&c)[K::BN / 8][4], u32 q_tile, u32 k_tile, int wg, int on = 1,
                         int k16 = K::D / 16) {
  constexpr int D = K::D, BN = K::BN;
  const u32 q0 = q_tile + wg * 64 * 128;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    if (kk >= k16) break;
    const u32 off = (kk % 4) * 32;
    qk_step<K, 0, kIf>(c, desc_sw128(q0 + (kk / 4) * SmemTile<K::BM, D>::kPanelBytes + off),
                       k_tile + (kk / 4) * SmemTile<BN, D>::kPanelBytes + off, kk > 0,
                       kk == 0 ? 1 : on);
  }
}

// O_a += P_g(a) . V_i over keys 16kb .. 16kb + 15, value columns 64e on, for the accumulators of
// value tile i: P from registers (the A fragments), V MN-major from its swizzled tile at vt
// (rows are keys, 64 value columns per panel).
template <class K, class Spec, int i, int e>
FG_DEV void pv_step(float (&o)[K::AS][1][K::DV / 8][4], const u32 (&pa)[K::G][1][K::BN / 16][4],
                    u32 vt, int kb) {
  constexpr u32 kPanel = SmemTile<K::BN, K::DV>::kPanelBytes;
  const u64 dv = desc_sw128_mn(vt + e * kPanel + kb * 16 * 128, kPanel);
  constexpr bool wide = K::kWgmmaN == 128 && 64 * (e + 2) <= K::DV;
#pragma unroll
  for (int a = 0; a < K::A; ++a)
    if (Spec::acc_v(a) == i) {
      if constexpr (wide)
        mma_64x128x16_rs<typename K::Elem, true, 8 * e>(o[a][0], pa[Spec::acc_group(a)][0][kb], dv, 1);
      else
        mma_64x64x16_rs<typename K::Elem, true, 8 * e>(o[a][0], pa[Spec::acc_group(a)][0][kb], dv, 1);
    }
  constexpr int next = e + (wide ? 2 : 1);
  if constexpr (64 * next < K::DV) pv_step<K, Spec, i, next>(o, pa, vt, kb);
}
// Every value tile from i on (the stage's V tiles at v0, K::kVBytes apart).
template <class K, class Spec, int i>
FG_DEV void pv_wgmma(float (&o)[K::AS][1][K::DV / 8][4], const u32 (&pa)[K::G][1][K::BN / 16][4],
                     u32 v0) {
#pragma unroll
  for (int kb = 0; kb < K::BN / 16; ++kb) pv_step<K, Spec, i, 0>(o, pa, v0 + i * K::kVStride, kb);
  if constexpr (i + 1 < K::V) pv_wgmma<K, Spec, i + 1>(o, pa, v0);
}

// Keeps the compiler from reusing or moving the registers of an operand of asynchronous wgmma
// across wgmma.fence / wgmma.wait_group (the P fragments are read until the wait).
template <int N>
FG_DEV void fence_regs(const u32 (&a)[N][4]) {
#pragma unroll
  for (int j = 0; j < N; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) asm volatile("" ::"r"(a[j][r]) : "memory");
}
#endif

// S[b] (16 x BN per m-block b) = Q[b] K^T: Q from registers or from the shared Q tile; k16:
// the score's k16 steps (AttnSm80::score_k16).
template <class K, bool kQRegs, int QK>
FG_DEV void scores_mma(float (&c)[K::MW][K::BN / 8][4], const u32 (&qa)[K::MW][QK][4],
                       const LdmAddr<K::BM, K::D>& aq, const LdmAddr<K::BN, K::D>& ak,
                       int qrow0, int k16 = K::D / 16) {
  constexpr int MW = K::MW, D = K::D, BN = K::BN;
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    if (kk >= k16) break;
    u32 qf[MW][4];
#pragma unroll
    for (int b = 0; b < MW; ++b) {
      if constexpr (kQRegs) {
#pragma unroll
        for (int r = 0; r < 4; ++r) qf[b][r] = qa[b][kk][r];
      } else {
        ldmatrix_x4(qf[b], aq.at(qrow0 + b * 16, kk * 16));
      }
    }
#pragma unroll
    for (int np = 0; np < BN / 16; ++np) {
      u32 kb[4];
      ldmatrix_x4(kb, ak.at(np * 16, kk * 16));
#pragma unroll
      for (int b = 0; b < MW; ++b) {
        K::Elem::mma(c[b][2 * np], qf[b], kb[0], kb[1]);
        K::Elem::mma(c[b][2 * np + 1], qf[b], kb[2], kb[3]);
      }
    }
  }
}

// Staged tiles t, t+1, ... of key tile [n0, n0 + BN) into a stage's staged area.
template <class K, int t, class Ctx>
FG_DEV void issue_staged(unsigned char* area, const Ctx& ctx, int m0, int M, int n0, int N,
                         int tid) {
  constexpr bool kRows = K::Staged::rows(t);
  load_staged<kRows ? K::BM : 1, K::BN, K::Staged::elem_bytes(t), K::NL>(
      area + K::staged_off(t), ctx.staged[t], m0, M, n0, N, tid);
  if constexpr (t + 1 < K::T) issue_staged<K, t + 1>(area, ctx, m0, M, n0, N, tid);
}

// The careful build's products of one key's values on the CUDA cores: f(x) of each value x
// (its 16 bits) of key `key` in the V tiles at vt, added to the accumulators of group g at row
// half h of m-block b, at this lane's columns.
template <class K, class Spec, class F>
FG_DEV void add_key_values(float (&o)[K::AS][K::MW][K::DV / 8][4], const unsigned char* vt, int g,
                           int b, int h, int key, int col_t, F f) {
#pragma unroll
  for (int a = 0; a < K::A; ++a) {
    if (Spec::acc_group(a) != g) continue;
    const unsigned char* t = vt + Spec::acc_v(a) * K::kVStride;
#pragma unroll
    for (int te = 0; te < K::DV / 8; ++te)
#pragma unroll
      for (int i = 0; i < 2; ++i)
        o[a][b][te][2 * h + i] += f(tile_at<K::BN, K::DV>(t, key, te * 8 + col_t + i));
  }
}

// The keys of row half h whose weight (its 16 bits in the A fragments `frag` of one m-block)
// satisfies `pred`: this lane's, then its quad's (a bit per key of the tile, out[key / 32]).
template <class K, class P>
FG_DEV void key_mask(u32 (&out)[K::BN / 32], const u32 (&frag)[K::BN / 16][4], int h, int col_t,
                     P pred) {
#pragma unroll
  for (int w = 0; w < K::BN / 32; ++w) out[w] = 0;
#pragma unroll
  for (int kb = 0; kb < K::BN / 16; ++kb)
#pragma unroll
    for (int r = h; r < 4; r += 2)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int key = (2 * kb + (r >> 1)) * 8 + col_t + j;
        if (pred((frag[kb][r] >> (16 * j)) & 0xffffu)) out[key / 32] |= 1u << (key % 32);
      }
#pragma unroll
  for (int w = 0; w < K::BN / 32; ++w) {
    out[w] |= __shfl_xor_sync(0xffffffffu, out[w], 1);
    out[w] |= __shfl_xor_sync(0xffffffffu, out[w], 2);
  }
}

// The careful build's weights of inf or NaN (a plain group's, or probabilities times P.V
// weights; a softmax's lie in [0, 1]): the tensor cores would compute inf * 0 = NaN where the
// strong zero gives 0. Each such weight's products with its key's values (0 at a value of 0) are
// added on the CUDA cores to the accumulators of its row, and the weight set to 0 (in every
// piece) for the P.V product. Every compute thread of the block calls it.
template <class K, class Spec>
FG_DEV void add_nonfinite_weights(float (&o)[K::AS][K::MW][K::DV / 8][4],
                                  u32 (&pa)[K::G * K::NP][K::MW][K::BN / 16][4],
                                  const unsigned char* vt, int lane) {
  using Elem = typename Spec::Elem;
  constexpr int MW = K::MW, BN = K::BN, KB = BN / 16, W = BN / 32;
  constexpr u32 kMant = 0x7fffu & ~Elem::kExp;
  const int col_t = 2 * (lane & 3);
#pragma unroll
  for (int g = 0; g < K::G; ++g)
#pragma unroll
    for (int b = 0; b < MW; ++b)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // the keys of this row whose weight is +inf, -inf, NaN
        u32 pinf[W], ninf[W], nan[W];
        const u32(&frag)[KB][4] = pa[g * K::NP][b];
        key_mask<K>(pinf, frag, h, col_t, [](u32 x) { return x == Elem::kExp; });
        key_mask<K>(ninf, frag, h, col_t, [](u32 x) { return x == (Elem::kExp | 0x8000u); });
        key_mask<K>(nan, frag, h, col_t,
                    [](u32 x) { return nonfinite16<Elem>(x) && (x & kMant) != 0; });
#pragma unroll
        for (int w = 0; w < W; ++w)
          for (u32 m = pinf[w] | ninf[w] | nan[w]; m != 0; m &= m - 1) {
            const int key = w * 32 + __ffs(m) - 1;
            const u32 bit = 1u << (key % 32);
            const float p = (nan[w] & bit)    ? __int_as_float(0x7fc00000)
                            : (ninf[w] & bit) ? neg_inf()
                                              : -neg_inf();
            add_key_values<K, Spec>(o, vt, g, b, h, key, col_t, [&](u32 x) {
              const float f = Elem::to_f32(x);
              return f == 0.f ? 0.f : p * f;  // (the strong zero)
            });
          }
        // this lane's non-finite weights of the row to 0, in every piece
#pragma unroll
        for (int kb = 0; kb < KB; ++kb)
#pragma unroll
          for (int r = h; r < 4; r += 2) {
            const u32 v = pa[g * K::NP][b][kb][r];
            const u32 keep = (nonfinite16<Elem>(v & 0xffffu) ? 0u : 0xffffu) |
                             (nonfinite16<Elem>(v >> 16) ? 0u : 0xffff0000u);
#pragma unroll
            for (int p = 0; p < K::NP; ++p) pa[g * K::NP + p][b][kb][r] &= keep;
          }
      }
}

// Masked keys contribute nothing, whatever V holds. The tensor cores compute 0 * NaN = NaN, so a
// tile with masked keys whose V tiles (at generic address vt) hold inf or NaN comes here: each
// such value is added on the CUDA cores to the accumulators of the rows whose weight for its key
// is not 0 (P from the A fragments pa), and then set to 0 in shared memory for the P.V product.
// Every compute thread of the block calls it (it synchronizes them).
template <class K, class Spec>
FG_DEV void add_nonfinite_values(float (&o)[K::AS][K::MW][K::DV / 8][4],
                                 const u32 (&pa)[K::G * K::NP][K::MW][K::BN / 16][4], unsigned char* vt,
                                 int lane, int tid) {
  constexpr int MW = K::MW, BN = K::BN, DV = K::DV, W = BN / 32;
  const int col_t = 2 * (lane & 3);
#pragma unroll
  for (int g = 0; g < K::G; ++g)
#pragma unroll
    for (int b = 0; b < MW; ++b)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // the keys of this row whose weight is not 0, and those of a negative weight (a plain
        // or weighted group's)
        u32 live[W], neg[W];
        key_mask<K>(live, pa[g * K::NP][b], h, col_t, [](u32 x) { return (x & 0x7fffu) != 0; });
        key_mask<K>(neg, pa[g * K::NP][b], h, col_t, [](u32 x) { return (x & 0x8000u) != 0; });
#pragma unroll
        for (int w = 0; w < W; ++w)
          for (u32 m = live[w]; m != 0; m &= m - 1) {
            const int key = w * 32 + __ffs(m) - 1;
            const bool minus = (neg[w] >> (key % 32)) & 1u;
            add_key_values<K, Spec>(o, vt, g, b, h, key, col_t, [&](u32 x) {
              if (!nonfinite16<typename Spec::Elem>(x)) return 0.f;
              const float f = Spec::Elem::to_f32(x);
              return minus ? -f : f;
            });
          }
      }
  K::sync_compute();  // every thread read the values before any is cleared
#pragma unroll
  for (int i = 0; i < K::V; ++i) tile_zero_nonfinite<typename Spec::Elem, BN, DV, K::NTC>(vt + i * K::kVStride, tid);
  K::sync_compute();
}

template <class Spec>
FG_DEV void attn_fwd_sm80(const typename Spec::Params& params) {
  using K = AttnSm80<Spec>;
  constexpr int S = K::S, G = K::G, V = K::V, A = K::A, D = K::D, DV = K::DV;
  constexpr int BM = K::BM, BN = K::BN, MW = K::MW;
  constexpr int NT8 = BN / 8;   // n8 tiles of S per m-block
  constexpr int KB = BN / 16;   // k16 blocks of P
  constexpr int ET8 = DV / 8;   // n8 tiles of each accumulator

  extern __shared__ __align__(1024) unsigned char fg_smem[];
  const u32 s_base = smem_u32(fg_smem);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  typename Spec::Ctx ctx;
  // Work items: (row tile, parallel index x key chunk). A block computes the item of its grid
  // coordinates, or, walking (kPersistent and a call with Params::m_tiles > 0), item blockIdx.x
  // and then the items it takes in order from a counter (kPersistent above), of m_tiles * P',
  // row tiles innermost (the items of one parallel index, which share K/V, run side by side).
  // (the host keeps m_tiles * P' + gridDim.x below 2^31)
  int ksplit = 1;
  bool walk = false;
  int n_items = 1, m_tiles = 1;
  // The key split and the walk's bookkeeping, from the parameters. A warp-specialized kernel's
  // roles read them each on its own after the role split (as they find their first item), so
  // that nothing of the walk is live across setmaxnreg: a value live in both roles must fit
  // the producer's registers too, and ptxas spilled the item count and the current item there.
  auto read_walk = [&] {
    if constexpr (KeySplitOf<Spec>::value) ksplit = (int)params.key_split;
    if constexpr (K::kPersistent) {
      walk = params.m_tiles > 0;
      if (walk) {
        m_tiles = (int)params.m_tiles;
        n_items = m_tiles * K::parallel(params) * ksplit;
      }
    }
  };
  // The current item: its context, extents, rows [m0, m1) and key tiles [j_begin, j_end).
  int pidx = 0, chunk = 0, M = 0, N = 0, m0 = 0, m1 = 0, j_begin = 0, j_end = 0;
  // Makes item w current (a pure function of w); false if it has no rows (grid blocks past the
  // parallel indices, row tiles past M), and then no key tiles either (a walking block runs such
  // an item as one of no tiles and no stores: the producer's take decides the next item alone).
  auto begin_item = [&](int w) {
    j_begin = j_end = 0;
    int mt_i, mts;
    if (walk) {
      pidx = (unsigned)w / (unsigned)m_tiles;
      mt_i = w - pidx * m_tiles;
      mts = m_tiles;
    } else {
      // grid y (and z beyond 65535 indices): the parallel index times the key split (the
      // chunk of the key loop innermost); blocks past the end have no item
      mt_i = (int)blockIdx.x;
      pidx = (int)(blockIdx.y + gridDim.y * blockIdx.z);
      mts = (int)gridDim.x;
    }
    const int par = pidx / ksplit;
    chunk = pidx - par * ksplit;
    if (par >= K::parallel(params)) return false;
    K::context(params, par, ctx);
    M = ctx.M;
    N = ctx.N;
    m0 = (Spec::kReverseM ? mts - 1 - mt_i : mt_i) * BM;
    if (m0 >= M || M <= 0) return false;
    m1 = min(m0 + BM, M);
    if constexpr (BlockRowsOf<Spec>::value) Spec::block_rows(ctx, m0, m1);
    // this item's key tiles: chunk `chunk` of `ksplit` equal runs
    const int n_tiles = N > 0 ? (N + BN - 1) / BN : 0;
    const int per_chunk = (n_tiles + ksplit - 1) / ksplit;
    j_begin = min(n_tiles, chunk * per_chunk);
    j_end = min(n_tiles, j_begin + per_chunk);
    return true;
  };
  // A walking block's items after its first come from the counter err[8]: item gridDim.x plus
  // the count before the take (by one thread). err[9] counts the blocks done taking; the last of
  // them returns both to 0, for the next launch (which the kernel boundary orders after it).
  auto take_item = [&]() -> int {
    if constexpr (K::kPersistent) {
      return (int)gridDim.x +
             (int)atomicAdd(reinterpret_cast<unsigned long long*>(params.err + 8), 1ull);
    } else {
      return n_items;
    }
  };
  auto done_taking = [&] {  // one thread a block, after the block's last take
    if constexpr (K::kPersistent) {
      unsigned long long* const c = reinterpret_cast<unsigned long long*>(params.err + 8);
      __threadfence();
      if (atomicAdd(c + 1, 1ull) == gridDim.x - 1) {
        __threadfence();  // (every block's takes came before its count)
        atomicExch(c, 0ull);
        atomicExch(c + 1, 0ull);
      }
    }
  };
  // The block's first item, made current: the item of its grid coordinates, or, walking, item
  // blockIdx.x; false if the block has none (no rows, outside a walk). `rows`: it has rows.
  int w = 0;
  bool rows = false;
  auto first_item = [&] {
    read_walk();
    w = walk ? (int)blockIdx.x : 0;
    rows = w < n_items && begin_item(w);
    return walk ? w < n_items : rows;
  };

  // Q tiles of the current item -> shared by cp.async, issued by the whole block (one cp.async
  // group), or, warp-specialized, by the producer warpgroup, the rows of each compute
  // warpgroup on their own (`half` = the warpgroup: its 64 rows, each thread's arrival on that
  // warpgroup's q_full triggered once its copies have landed; an item without rows copies
  // nothing). q_tid: the thread's index among them. (The shared-memory addresses come from an
  // opaque copy of the base and the thread index, so the compiler recomputes them here instead
  // of holding them across the key loop.)
  // (warp-specialized: Q's mbarriers, in the ring area below: q_full of warpgroup h and Q
  // buffer b, then q_empty of each; `buf`: the buffer, item k's is k % kQB)
  const u32 q_bars = s_base + K::kRingOff + 24 * K::kStages;
  auto q_full = [&](int h, int b) { return q_bars + 8 * (h + 2 * b); };
  auto q_empty = [&](int h, int b) { return q_bars + 16 * K::kQB + 8 * (h + 2 * b); };
  auto load_q = [&](int q_tid, int half, int buf) {
    constexpr int NQ = K::kWs ? K::NL : K::NT;
    if (rows) {
      u32 q0 = s_base;
      asm volatile("mov.b32 %0, %0;" : "+r"(q0));
      asm volatile("mov.b32 %0, %0;" : "+r"(q_tid));
#pragma unroll
      for (int s = 0; s < S; ++s)
#pragma unroll
        for (int p = 0; p < K::NP; ++p) {
          // (where checks read the scores, rows past M copy row M - 1: the score code of a
          // padded row then computes row M - 1's elements, and reports only what they report)
          const u32 dst = q0 + buf * K::kQAll + (s * K::NP + p) * K::kQBytes;
          const bf16raw* src = ctx.q[s] + p * K::kPitchQK;
          constexpr bool kClamp = ChecksReadScoresOf<Spec>::value;
          if constexpr (K::kWs) {
            if (half == 0)
              load_tile_async<BM / 2, D, NQ, K::DIN, kClamp, BM, 0>(dst, src, ctx.q_ld[s], m0, M,
                                                                   q_tid, K::din(s));
            else
              load_tile_async<BM / 2, D, NQ, K::DIN, kClamp, BM, BM / 2>(
                  dst, src, ctx.q_ld[s], m0 + BM / 2, M, q_tid, K::din(s));
          } else {
            load_tile_async<BM, D, NQ, K::DIN, kClamp>(dst, src, ctx.q_ld[s], m0, M, q_tid,
                                                       K::din(s));
          }
        }
    }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    // (columns held not a multiple of 8: load_tile_async gathers by plain loads and shared
    // stores, which only a release arrival orders before the waiters' reads)
    if constexpr (K::kWs) {
      if constexpr (K::DIN % 8 != 0)
        mbar_arrive(q_full(half, buf));
      else
        cp_async_mbar_arrive(q_full(half, buf));
    }
#endif
    (void)half;
    (void)buf;
    cp_async_commit();
  };
  if constexpr (!K::kWs) {
    if (!first_item()) return;
    load_q(tid, -1, 0);
  }
  // the loading threads: the producer warpgroup, or the whole block
  const int lt = K::kWs ? tid - K::NTC : tid;

  // next non-empty key tile at or after j (block-uniform scalar scan, O(n_tiles) in total)
  int cls_next = kTileEmpty;
  // Spans of kSpan tiles are tested first: classify over the span's box is as sound as over one
  // tile (interval analysis is conservative), so an empty span skips kSpan tiles with one test
  // (sliding windows and the rows above a causal diagonal scan O(n / (64·kSpan)), not O(n / 64)).
  // Then spans of 4 inside a non-empty span (a document's edges; bench/RESULTS.md).
  constexpr int kSpan = 16;
  // (One classify in the code: the unit at j is the largest of kSpan, 4 and 1 tiles that lines
  // up and that j has not descended from yet.)
  auto next_tile = [&](int j) {
    int umax = kSpan;
    while (j < j_end) {
      const int u = umax >= kSpan && j % kSpan == 0 && j + kSpan <= j_end ? kSpan
                    : umax >= 4 && j % 4 == 0 && j + 4 <= j_end     ? 4
                                                                     : 1;
      const int c = Spec::classify(ctx, m0, m1, j * BN, min((j + u) * BN, N));
      if (u == 1) cls_next = c;
      if (c != kTileEmpty) {
        if (u == 1) break;
        umax = u / 4;  // a non-empty unit: its first smaller unit next
        continue;
      }
      j += u;
      umax = kSpan;
    }
    return j;
  };
  const u32 s_kv = s_base + K::kQArea;
  // generic pointer to a stage's staged tiles (the score code reads them as plain loads)
  auto staged_area = [&](int stg) {
    return fg_smem + K::kStagedOff + stg * K::kStagedBytes;
  };
  // K/V tiles by cp.async (unless `kv` is false: TMA brings them) and the staged tiles.
  auto issue_kv = [&](int j, int stage, bool kv = true) {
    const u32 st = s_kv + stage * K::kStageBytes;
    if (kv) {
#pragma unroll
      for (int s = 0; s < S; ++s)
#pragma unroll
        for (int p = 0; p < K::NP; ++p)
          load_tile_async<BN, D, K::NL, K::DIN>(st + (s * K::NP + p) * K::kKBytes,
                                                ctx.k[s] + p * K::kPitchQK, ctx.k_ld[s], j * BN,
                                                N, lt, K::din(s));
#pragma unroll
      for (int i = 0; i < V; ++i)
#pragma unroll
        for (int p = 0; p < K::NP; ++p)
          load_tile_async<BN, DV, K::NL, K::DVIN>(st + K::kKAll + i * K::kVStride +
                                                      p * K::kVBytes,
                                                  ctx.v[i] + p * K::kPitchV, ctx.v_ld[i], j * BN,
                                                  N, lt);
    }
    if constexpr (K::T > 0)
      issue_staged<K, 0>(staged_area(stage), ctx, m0, M, j * BN, N, lt);
  };

  // The diagonal values of tile jt at the deltas of its rows and keys inside M x N (0 at the
  // others, which only rows and keys past the ends read), by the loading threads into copy
  // `copy` (K::kDiagCopies): before the barrier of landed(), or before the producer publishes
  // the tile's stage.
  auto diag_area = [&](int copy) {
    return reinterpret_cast<float*>(fg_smem + K::kDiagOff + copy * K::kDiagBytes);
  };
  auto fill_diagonals = [&](int jt, int copy) {
    if constexpr (K::ND + K::NK > 0) {
      float* const da = diag_area(copy);
      const int n0 = jt * BN, n1 = min(n0 + BN, N);
      if constexpr (K::ND > 0) {
        const int base = n0 - (m0 + BM - 1), lo = n0 - (m1 - 1), hi = n1 - 1 - m0;
        for (int t = lt; t < BM + BN - 1; t += K::NL) {
          const int dl = base + t;
          if (dl >= lo && dl <= hi) {
            Spec::diagonals(ctx, dl, da + t, K::kDiagPitch);
          } else {
#pragma unroll
            for (int k = 0; k < K::ND; ++k) da[k * K::kDiagPitch + t] = 0.f;
          }
        }
      }
      if constexpr (K::NK > 0) {
        float* const ka = da + K::ND * K::kDiagPitch;
        for (int t = lt; t < BN; t += K::NL) {
          if (n0 + t < n1) {
            Spec::key_values(ctx, n0 + t, ka + t, K::kDiagPitch);
          } else {
#pragma unroll
            for (int k = 0; k < K::NK; ++k) ka[k * K::kDiagPitch + t] = 0.f;
          }
        }
      }
    } else {
      (void)jt;
      (void)copy;
    }
  };

  // All but the newest cp.async group have landed and every thread sees them (wgmma, in the
  // async proxy, after a proxy fence: cp.async wrote them in the generic one).
  auto landed = [&] {
    cp_async_wait<1>();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (K::kWgmma) fence_proxy_async();
#endif
    __syncthreads();
  };
  // The ring of the warp-specialized kernel, after the diagonal values: mbarriers full[s] (the
  // stage's tile index and class are written, its copies have landed: every producer thread
  // arrived) and empty[s] (every compute thread is done with it), then each stage's tile index
  // (-1: no more tiles) and class (with kLastTile on the item's last tile; with -1: the next
  // item). Q has two more per compute warpgroup and Q buffer, for the warpgroup's 64 rows:
  // q_full(h, b) (the item's rows landed: the producer's copies of them, the buffer's k-th item
  // completing phase k) and q_empty(h, b) (every thread of warpgroup h is done reading them:
  // the scores of the item's last tile, or of its stage of no tile). So the producer reloads
  // one warpgroup's rows while the other still computes its last scores (in ping-pong,
  // warpgroup 1 runs half a turn behind), and with two buffers (kQB) it loads the next item's
  // rows before this item's are read.
  const u32 ring = s_base + K::kRingOff;
  int* const ring_tile = reinterpret_cast<int*>(fg_smem + K::kRingOff + 16 * K::kStages);
  int j = j_begin, cls = kTileEmpty;
  if constexpr (K::kWs) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (tid == 0) {
      for (int s = 0; s < K::kStages; ++s) {
        mbar_init(ring + 8 * s, K::NL);
        mbar_init(ring + 8 * (K::kStages + s), K::NTC);
      }
      for (int b = 0; b < K::kQB; ++b)
        for (int h = 0; h < 2; ++h) {
          mbar_init(q_full(h, b), K::NL);
          mbar_init(q_empty(h, b), K::NTC / 2);
        }
    }
    __syncthreads();
    if (warp >= K::NWC) {
      // ---- the producer warpgroup: each item's Q, then for each non-empty tile, wait until
      // its stage is empty, copy its K/V and staged tiles, fill its diagonal values and write
      // its index and class; publish a stage once its copies have landed (one tile later) ----
      regs_release<K::kProducerRegs>();
      if (!first_item()) {
        if (walk && lt == 0) done_taking();  // (a block past the items: takes none)
        return;
      }
      load_q(lt, 0, 0);
      load_q(lt, 1, 0);
      // the data ranges of the tile scan by the four producer warps together (named barrier 4;
      // with kScanByWarps the key ranges by one warp each, scan_tiles)
      ctx.rg.warps = 4;
      ctx.rg.first_warp = K::NWC;
      ctx.rg.bar = 4;
      ctx.rg.slots = ring + K::kRingSlotsOff;
      // K/V by TMA (kTma): one thread adds the tile's bytes to the stage's `full` barrier and
      // issues a copy per 64-column panel of each operand; else by cp.async (issue_kv)
      constexpr bool tma = K::kTma;
      auto issue_tma = [&](int jt, int stg) {
        if constexpr (K::kTma) {
          const u32 st = s_kv + stg * K::kStageBytes, bar = ring + 8 * stg;
          mbar_expect_tx_only(bar, K::kv_tx_bytes());
#pragma unroll
          for (int o = 0; o < S + V; ++o) {
            // (a narrower score's K: only the panels of its own columns, K::k_panels; the
            // others are never read)
            const int C = o < S ? 64 * K::k_panels(o) : DV;
            const u32 dst = st + (o < S ? o * K::kKBytes : K::kKAll + (o - S) * K::kVStride);
#pragma unroll
            for (int pn = 0; pn < C / 64; ++pn)
              tma_load_5d(dst + pn * BN * 128, &params.tma[o], bar, ctx.tma_c[o][0] + 64 * pn,
                          jt * BN, ctx.tma_c[o][1], ctx.tma_c[o][2], ctx.tma_c[o][3]);
          }
        } else {
          (void)jt;
          (void)stg;
        }
      };
      // The next non-empty tile at or after j (kScanByWarps): a descent over levels of units
      // of 16, 4 and 1 tiles, groups of four units aligned to 4 units; a group's four units are
      // classified at once, one a warp, and its results kept (lv_base, and lv_cls: a byte a
      // unit) until the item ends, so the tiles after a found one read them instead of
      // classifying again. An empty unit is skipped whole; a non-empty one is descended into; a
      // non-empty tile is the answer. (Units are cut at j_end; a unit past it is empty.)
      int lv_base[3];
      u32 lv_cls[3];
      auto scan_tiles = [&](int j) {
        if constexpr (K::kScanByWarps) {
          if (j == j_begin) lv_base[0] = lv_base[1] = lv_base[2] = -1;  // a new item
          while (j < j_end) {
            bool skipped = false;
            int need = -1, ng0 = 0;  // a level whose group is not classified yet
#pragma unroll
            for (int l = 0; l < 3; ++l) {
              const int u = l == 0 ? kSpan : l == 1 ? 4 : 1;  // (next_tile's spans)
              if (skipped || need >= 0 || j % u != 0) continue;
              const int g0 = j - j % (4 * u);
              if (lv_base[l] != g0) {
                need = l;
                ng0 = g0;
                continue;
              }
              const int c = (int)(lv_cls[l] >> (8 * ((j - g0) / u))) & 0xff;
              if (c == kTileEmpty) {
                j += u;
                skipped = true;
              } else if (l == 2) {
                cls_next = c;
                return j;
              }
            }
            if (need < 0) continue;
            // (one classify in the code for the three levels: it is the scan's largest part)
            const int u = need == 0 ? kSpan : need == 1 ? 4 : 1;
            const int a = ng0 + u * (warp - K::NWC), b = min(a + u, j_end);
            int c = kTileEmpty;
            ctx.rg.warps = 1;
            if (a < b) c = Spec::classify(ctx, m0, m1, a * BN, min(b * BN, N));
            ctx.rg.warps = 4;
            int cw[4];
            group_exchange(c, ctx.rg, cw);
#pragma unroll
            for (int l = 0; l < 3; ++l)
              if (l == need) {
                lv_cls[l] = (u32)cw[0] | (u32)cw[1] << 8 | (u32)cw[2] << 16 | (u32)cw[3] << 24;
                lv_base[l] = ng0;
              }
          }
          return j;
        } else {
          return next_tile(j);
        }
      };
      // The next item, taken at the end of this one and made current (the producer needs
      // nothing more of this one; an item without rows has no tiles): lane 0 of the first
      // producer warp takes it, the four warps exchange it; n_items when none is left.
      auto take_next = [&] {
        int wn = n_items;
        if (walk) {
          int all[4];
          group_exchange(lt == 0 ? take_item() : 0, ctx.rg, all);
          // (an unsigned bound: a counter that was not zero before the call could wrap)
          wn = (unsigned)all[0] < (unsigned)n_items ? all[0] : n_items;
          if (wn < n_items) {
            rows = begin_item(wn);
          } else if (lt == 0) {
            done_taking();
          }
        }
        return wn;
      };
      // stages filled (the last one of each item says: no more tiles, and which item is next);
      // whether the previous stage holds a tile not yet published; items begun
      int it = 0, items = 0;
      bool pending = false;
      for (;;) {  // the block's items
        int jp = scan_tiles(j_begin);
        for (;; ++it) {
          const int stg = it % K::kStages;
          if (it >= K::kStages) {
            const u32 eb = ring + 8 * (K::kStages + stg), ep = (it / K::kStages - 1) & 1;
            if (!mbar_try_wait(eb, ep)) {  // the ring is full: publish the previous tile first
              if (pending) {
                cp_async_wait<0>();
                fence_proxy_async();
                mbar_arrive(ring + 8 * ((it - 1) % K::kStages));
                pending = false;
              }
              mbar_wait(eb, ep);
            }
          }
          const bool done = jp >= j_end;
          if (!done) {
            if (tma && lt == 0) issue_tma(jp, stg);
            issue_kv(jp, stg, !tma);
          }
          cp_async_commit();
          if (pending) {
            cp_async_wait<1>();
            fence_proxy_async();
            mbar_arrive(ring + 8 * ((it - 1) % K::kStages));
            pending = false;
          }
          if constexpr (K::ND + K::NK > 0) {
            if (!done) {
              // the diagonal copy of tile it - kDiagCopies: free once the compute warps are
              // done with it (with a copy per stage, the wait for this stage above was that wait)
              constexpr int C = K::kDiagCopies;
              if (C < K::kStages && it >= C)
                mbar_wait(ring + 8 * (K::kStages + (it - C) % K::kStages),
                          ((it - C) / K::kStages) & 1);
              fill_diagonals(jp, it % K::kDiagCopies);
            }
          }
          if (done) break;
          const int cls_p = cls_next, jn = scan_tiles(jp + 1);
          if (lt == 0) {
            ring_tile[2 * stg] = jp;
            ring_tile[2 * stg + 1] = cls_p | (jn >= j_end ? kLastTile : 0);
          }
          pending = true;
          jp = jn;
        }
        // the stage of no tile, published at once: -1 and the next item
        const int w_next = take_next();
        if (lt == 0) {
          ring_tile[2 * (it % K::kStages)] = -1;
          ring_tile[2 * (it % K::kStages) + 1] = w_next;
        }
        cp_async_wait<0>();
        mbar_arrive(ring + 8 * (it % K::kStages));
        ++it;
        // the next item's Q, once the compute warps are done reading this one's (their last
        // scores), and its tiles into the stages they free during this one's epilogue
        w = w_next;
        if (w >= n_items) return;
        // (item `items` of the block, into buffer qb: each warpgroup's rows once it is done
        // with those of item items - kQB, the buffer's last)
        ++items;
        const int qb = items % K::kQB;
        for (int h = 0; h < 2; ++h) {
          if (K::kQB == 1 || items >= K::kQB)
            mbar_wait(q_empty(h, qb), ((items - K::kQB) / K::kQB) & 1);
          load_q(lt, h, qb);
        }
      }
    }
    regs_take<K::kComputeRegs>();
    if (!first_item()) return;
#endif
  }
  const int wrow0 = warp * 16 * MW;  // first row of this warp inside the block
  constexpr int SQ = S * K::NP;        // Q tiles (pieces of each score's Q)
  LdmAddr<BM, D> aq_lane[SQ];         // Q tile addresses (used when Q is re-read per tile)
#pragma unroll
  for (int s = 0; s < SQ; ++s)
    aq_lane[s] = LdmAddr<BM, D>(s_base + s * K::kQBytes, lane_row_a(lane), lane_col_a(lane));
  u32 qa[SQ][MW][K::kQK][4];
  int rm[MW][2];  // rows of this thread: [b][h] = m-block b, half h (clamped to M - 1)
  const int col_t = 2 * (lane & 3);
  float o[K::AS][MW][ET8][4];
  float mrun[G][MW][2], lsum[G][MW][2];
  float sc[G];  // score units -> base-2 logits (positive)
  // The current item's start: its Q landed (warp-specialized: the producer's copies, item k
  // completing q_full's phase k) and in registers when it fits, the row clamps, the
  // accumulators, maxima and sums reset.
  int q_items = 0;  // warp-specialized: items begun
  int q_buf = 0;    // the current item's Q buffer (q_base: its address)
  u32 q_base = s_base;
  auto start_item = [&] {
    if constexpr (K::kWs) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      q_buf = q_items % K::kQB;
      mbar_wait(q_full(warp / 4, q_buf), (q_items / K::kQB) & 1);
      ++q_items;
      fence_proxy_async();  // (the copies came through the generic proxy, wgmma reads async)
      if constexpr (K::kQB > 1) {
        q_base = s_base + q_buf * K::kQAll;
#pragma unroll
        for (int s = 0; s < SQ; ++s)
          aq_lane[s] = LdmAddr<BM, D>(q_base + s * K::kQBytes, lane_row_a(lane), lane_col_a(lane));
      }
#endif
    } else {
      j = next_tile(j_begin);
      cls = cls_next;
      if (j < j_end) issue_kv(j, 0);
      cp_async_commit();
      landed();
    }
    if constexpr (K::kQInRegs) {
#pragma unroll
      for (int s = 0; s < SQ; ++s)
#pragma unroll
        for (int b = 0; b < MW; ++b)
          load_a_frags<BM, D>(qa[s][b], q_base + s * K::kQBytes, wrow0 + b * 16, lane);
    }
#pragma unroll
    for (int b = 0; b < MW; ++b)
#pragma unroll
      for (int h = 0; h < 2; ++h) rm[b][h] = min(m0 + wrow0 + b * 16 + (lane >> 2) + 8 * h, M - 1);
#pragma unroll
    for (int a = 0; a < A; ++a)
#pragma unroll
      for (int b = 0; b < MW; ++b) zero(o[a][b]);
#pragma unroll
    for (int g = 0; g < G; ++g) sc[g] = K::score_scale_of(g, ctx);
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int b = 0; b < MW; ++b) {
        mrun[g][b][0] = mrun[g][b][1] = neg_inf();
        lsum[g][b][0] = lsum[g][b][1] = 0.f;
      }
  };

#ifdef FG_COUNT_TILES
  int counted = 0, counted_full = 0;  // key tiles this item computes / computes unmasked
#endif
  // The careful build (FG_CAREFUL) follows the strong zero where the tensor cores would not: inf
  // or NaN values of V at keys whose weight is 0 contribute nothing (add_nonfinite_values), and a
  // rescale by 0 clears the accumulators. The host runs it only after the plain build flagged a
  // block whose accumulators ended non-finite (err[7]), so the plain build pays nothing for it.
#ifdef FG_CAREFUL
  constexpr bool kCareful = true;
#else
  constexpr bool kCareful = false;
#endif
  // The probabilities x of group g, row half h of m-block b, times the group's P.V weights
  // (kWeightedGroups; keys n clamped to N - 1: a padded key's probability is 0), computed here
  // or, where they read the scores, held in wt since the scores were at hand.
  using HeldWeights = float[K::kHeldWeights ? G : 1][K::kHeldWeights ? MW : 1]
                           [K::kHeldWeights ? NT8 : 1][4];
  auto weigh_half = [&](float (&x)[G][MW][NT8][4], const HeldWeights& wt, int g, int b, int h,
                        int n0, const TileView& tv) {
    if constexpr (WeightedGroupsOf<Spec>::value != 0) {
      const float none[S] = {};  // (weight<g> reads no score unless it is held)
#pragma unroll
      for (int t = 0; t < NT8; ++t)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          const int n = n0 + t * 8 + col_t + j;
          const int nk = ClampKeysOf<Spec>::value ? min(n, N - 1) : n;
          float w;
          if constexpr (K::kHeldWeights) {
            if (K::weights_read_scores(g)) w = wt[g][b][t][2 * h + j];
          }
          if (!K::weights_read_scores(g)) w = K::weight_of(g, none, rm[b][h], nk, ctx, tv);
          float& p = x[g][b][t][2 * h + j];
          p = (p == 0.f || w == 0.f) ? 0.f : p * w;  // (the strong zero)
        }
    } else {
      (void)x, (void)wt, (void)g, (void)b, (void)h, (void)n0, (void)tv;
    }
  };
  // Group g's weights at element (b, t, i), key n, into wt, where they read the scores cv (0
  // unless `live`: a padded key's, whose probability is 0).
  auto hold_weights = [&](HeldWeights& wt, const float (&cv)[S], int b, int t, int i, int n,
                          const TileView& tv, bool live) {
    if constexpr (K::kHeldWeights) {
#pragma unroll
      for (int g = 0; g < G; ++g)
        if (K::weights_read_scores(g))
          wt[g][b][t][i] = live ? K::weight_of(g, cv, rm[b][i >> 1], n, ctx, tv) : 0.f;
    } else {
      (void)wt, (void)cv, (void)b, (void)t, (void)i, (void)n, (void)tv, (void)live;
    }
  };
  // Element code and online softmax of key tile jt (classified clst, its staged tiles in stage
  // stgt, its diagonal values in copy dcopy) on the scores c: the running maxima and row sums
  // move on, the tile's weights go to x (to_operands makes them P.V operands; x may share c's
  // registers: an element's scores are read before its weights are written), and alpha / grew
  // say how to rescale the accumulators (rescale).
  auto softmax_tile = [&](float (&c)[S][MW][NT8][4], int jt, int clst, int stgt, int dcopy,
                          float (&x)[G][MW][NT8][4], float (&alpha)[G][MW][2],
                          bool (&grew)[G][MW]) {
#ifdef FG_COUNT_TILES
    ++counted;
    counted_full += clst == kTileFull && jt * BN + BN <= N;
#endif
    const int n0 = jt * BN;
    TileView tv;
    tv.m0 = m0;
    tv.n0 = n0;
    tv.bn = BN;
    tv.dg = diag_area(dcopy);
    tv.dbase = n0 - (m0 + BM - 1);
    tv.dpitch = K::kDiagPitch;
#pragma unroll
    for (int t = 0; t < K::T; ++t) tv.p[t] = staged_area(stgt) + K::staged_off(t);
    HeldWeights wt;  // (kHeldWeights: the weights that read the scores)
    // One element loop for every tile: the score code with the tile mask taken as true (a full
    // tile's elements), at the key itself or, where it reads device memory by the key
    // (kClampKeys), at min(n, N - 1); where a check reads the products (kChecksReadScores),
    // only at keys below N (a padded key's product is 0).
#pragma unroll
    for (int b = 0; b < MW; ++b)
#pragma unroll
      for (int t = 0; t < NT8; ++t)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float cv[S];
#pragma unroll
          for (int s = 0; s < S; ++s) cv[s] = c[s][b][t][i];
          const int n = n0 + t * 8 + col_t + (i & 1);
          const int nk = ClampKeysOf<Spec>::value ? min(n, N - 1) : n;
          const bool live = !ChecksReadScoresOf<Spec>::value || n < N;
          hold_weights(wt, cv, b, t, i, nk, tv, live);
#pragma unroll
          for (int g = 0; g < G; ++g)
            x[g][b][t][i] = live ? K::score_of(g, cv, rm[b][i >> 1], nk, ctx, tv) : K::pad(g);
        }
    // A partial tile (or the last one, past N): its padded keys, and its elements the tile mask
    // removes (kKeep), take the group's pad (-inf, a plain group's 0).
    if (clst != kTileFull || n0 + BN > N) {
#pragma unroll
      for (int b = 0; b < MW; ++b)
#pragma unroll
        for (int t = 0; t < NT8; ++t)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int n = n0 + t * 8 + col_t + (i & 1);
            bool kept = n < N;
            // (not under the test n < N: its loads of row data (doc[m]) stay one per row)
            if constexpr (KeepOf<Spec>::value)
              kept = Spec::keep(rm[b][i >> 1], ClampKeysOf<Spec>::value ? min(n, N - 1) : n, ctx,
                                tv) & kept;
            if (!kept)
#pragma unroll
              for (int g = 0; g < G; ++g) x[g][b][t][i] = K::pad(g);
          }
    }
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int b = 0; b < MW; ++b) {
        grew[g][b] = false;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if (K::plain(g)) {  // the weights as they are: no max, nothing to rescale
            alpha[g][b][h] = 1.f;
            lsum[g][b][h] += row_sum_partial(x[g][b], h);
            continue;
          }
          // running max in score units; base-2 exponent = (x - max) * sc as one FFMA
          const float mnew = fmaxf(mrun[g][b][h], row_max(x[g][b], h));
          if (K::bare(g)) {  // (nothing to rescale, no probabilities)
            alpha[g][b][h] = 1.f;
            mrun[g][b][h] = mnew;
            continue;
          }
          const float nbase = mnew == neg_inf() ? 0.f : -mnew * sc[g];
          grew[g][b] |= mnew != mrun[g][b][h];
          alpha[g][b][h] = mnew == mrun[g][b][h] ? 1.f : ex2(fmaf(mrun[g][b][h], sc[g], nbase));
          mrun[g][b][h] = mnew;
#pragma unroll
          for (int t = 0; t < NT8; ++t) {
            x[g][b][t][2 * h] = ex2(fmaf(x[g][b][t][2 * h], sc[g], nbase));
            x[g][b][t][2 * h + 1] = ex2(fmaf(x[g][b][t][2 * h + 1], sc[g], nbase));
          }
          if (K::weighs_sums(g)) weigh_half(x, wt, g, b, h, n0, tv);  // (row sums of the weighted ones)
          lsum[g][b][h] = lsum[g][b][h] * alpha[g][b][h] + row_sum_partial(x[g][b], h);
        }
      }
    // the weights of P.V (kWeightedGroups), once the row sums took the probabilities
    if constexpr (WeightedGroupsOf<Spec>::value != 0) {
#pragma unroll
      for (int g = 0; g < G; ++g)
#pragma unroll
        for (int b = 0; b < MW; ++b)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            if (K::weighted(g) && !K::weighs_sums(g)) weigh_half(x, wt, g, b, h, n0, tv);
    }
  };
  // The weights x as the P.V operands (as pieces: each the rounding of what the ones before
  // left; x is consumed).
  auto to_operands = [&](float (&x)[G][MW][NT8][4], u32 (&pa_out)[G * K::NP][MW][KB][4]) {
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int b = 0; b < MW; ++b)
#pragma unroll
        for (int p = 0; p < K::NP; ++p) {
          if (!K::reads_p(g)) continue;  // (no P.V reads them)
          acc_to_a<typename Spec::Elem, KB>(pa_out[g * K::NP + p][b], x[g][b]);
          if (p + 1 < K::NP) sub_a_frags<typename Spec::Elem, KB>(x[g][b], pa_out[g * K::NP + p][b]);
        }
  };
  // Accumulators need rescaling only where a running max grew; optionally skip the multiplies
  // when no row of the warp changed (warp-uniform branch).
  auto rescale = [&](const float (&alpha)[G][MW][2], const bool (&grew)[G][MW]) {
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int b = 0; b < MW; ++b)
        if (K::reads_p(g) && (!K::kSkipRescale || __any_sync(0xffffffffu, grew[g][b]))) {
#pragma unroll
          for (int a = 0; a < A; ++a)
            if (Spec::acc_group(a) == g) rescale_rows<kCareful>(o[a][b], alpha[g][b][0], alpha[g][b][1]);
        }
  };
  u32 pa[G * K::NP][MW][KB][4];
  float alpha[G][MW][2];
  bool grew[G][MW];
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // wgmma, asynchronous until wg_wait: the scores of the tile in `stage` into c (one commit
  // group), O_a += P_g(a) . V_v(a) of the tile in `stage` (another); fences for the compiler.
  // (on = 0, the scores of a stage of no tile: only the first k-step issued (scores_wgmma), on
  // the stage's stale K, and never read)
  auto issue_scores = [&](float (&c)[S][MW][NT8][4], int stage, int on = -1) {
    if constexpr (K::kWgmma) {
      wg_fence();  // (c is written by wgmma only: no fence of it before)
#pragma unroll
      for (int s = 0; s < S; ++s) {
        if (on < 0)
          scores_wgmma<K>(c[s][0], q_base + s * K::kQBytes,
                          s_kv + stage * K::kStageBytes + s * K::kKBytes, warp / 4, 1,
                          K::score_k16(s));
        else
          scores_wgmma<K, true>(c[s][0], q_base + s * K::kQBytes,
                                s_kv + stage * K::kStageBytes + s * K::kKBytes, warp / 4, on,
                                K::score_k16(s));
      }
      wg_commit();
    } else {
      (void)c;
      (void)stage;
    }
  };
  auto scores_landed = [&](float (&c)[S][MW][NT8][4]) {
#pragma unroll
    for (int s = 0; s < S; ++s) fence_acc(c[s][0]);
  };
  auto pv_fence = [&] {
#pragma unroll
    for (int a = 0; a < A; ++a) fence_acc(o[a][0]);
#pragma unroll
    for (int g = 0; g < G; ++g)
      if (K::reads_p(g)) fence_regs(pa[g][0]);
  };
  auto issue_pv = [&](int stage) {
    if constexpr (K::kWgmma && A > 0) {
      pv_fence();  // the rescale and the operands, then wgmma
      wg_fence();
      pv_wgmma<K, Spec, 0>(o, pa, s_kv + stage * K::kStageBytes + K::kKAll);
      wg_commit();
    } else {
      (void)stage;
    }
  };
#endif
  // One key tile jt (class clst) from stage `stage`: scores, element code and online softmax,
  // the rescale, P.V. q_last: the item's last tile (warp-specialized: the thread is done with Q
  // once its scores are, and says so on q_empty).
  auto compute_tile = [&](int jt, int clst, int stage, int dcopy, bool q_last) {
    const u32 st = s_kv + stage * K::kStageBytes;
    // ---- scores ----
    float c[S][MW][NT8][4];
    if constexpr (K::kWgmma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      issue_scores(c, stage);
      wg_wait<0>();
      scores_landed(c);
#endif
    } else {
#pragma unroll
      for (int s = 0; s < S; ++s) {
#pragma unroll
        for (int b = 0; b < MW; ++b) zero(c[s][b]);
        // pieces: the products of Q piece i and K piece j, i + j < NP, smallest first
#pragma unroll
        for (int t = K::NP * (K::NP + 1) / 2 - 1; t >= 0; --t) {
          const int i = piece_pair_i(t), j = piece_pair_j(t);
          const LdmAddr<BN, D> ak(st + (s * K::NP + j) * K::kKBytes, lane_row_kt(lane),
                                  lane_col_kt(lane));
          scores_mma<K, K::kQInRegs, K::kQK>(c[s], qa[s * K::NP + i], aq_lane[s * K::NP + i],
                                             ak, wrow0, K::score_k16(s));
        }
      }
    }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (K::kWs)
      if (q_last) mbar_arrive(q_empty(warp / 4, q_buf));
#endif
    (void)q_last;
    // ---- element code (score expressions, masks), online softmax per group and m-block ----
    {
      float x[G][MW][NT8][4];
      softmax_tile(c, jt, clst, stage, dcopy, x, alpha, grew);
      to_operands(x, pa);
    }
    rescale(alpha, grew);
    // ---- careful: inf or NaN in V contributes only where the weight is not 0 (masked keys,
    // and weights that underflowed, in any tile) ----
    if constexpr (kCareful) {
      unsigned char* vt = fg_smem + (st - s_base) + K::kKAll;  // (piece 0 of each V_i)
      if constexpr (PlainGroupsOf<Spec>::value != 0 || WeightedGroupsOf<Spec>::value != 0) {
        bool np = false;  // weights of inf or NaN (unbounded groups only)
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
          for (int b = 0; b < MW; ++b)
#pragma unroll
            for (int kb = 0; kb < KB; ++kb)
#pragma unroll
              for (int r = 0; r < 4; ++r)
                np |= K::reads_p(g) && x2_any_nonfinite<typename Spec::Elem>(pa[g * K::NP][b][kb][r]);
        if (K::sync_compute_or(np)) add_nonfinite_weights<K, Spec>(o, pa, vt, lane);
      }
      bool nf = false;
#pragma unroll
      for (int i = 0; i < V; ++i) nf |= tile_any_nonfinite<typename Spec::Elem, BN, DV, K::NTC>(vt + i * K::kVStride, tid);
      if (K::sync_compute_or(nf)) add_nonfinite_values<K, Spec>(o, pa, vt, lane, tid);
    }
    // ---- O_a += P_g(a) . V_v(a) ----
    if constexpr (K::kWgmma) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      issue_pv(stage);
      wg_wait<0>();
      pv_fence();
#endif
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i)
#pragma unroll
        for (int vp = K::NP - 1; vp >= 0; --vp) {  // V piece vp times P pieces pp < NP - vp
          const LdmAddr<BN, DV> av(st + K::kKAll + i * K::kVStride + vp * K::kVBytes,
                                   lane_row_v(lane), lane_col_v(lane));
#pragma unroll
          for (int kb = 0; kb < KB; ++kb)
#pragma unroll
            for (int ep = 0; ep < DV / 16; ++ep) {
              u32 vb[4];
              ldmatrix_x4_trans(vb, av.at(kb * 16, ep * 16));
#pragma unroll
              for (int a = 0; a < A; ++a)
                if (Spec::acc_v(a) == i)
#pragma unroll
                  for (int pp = K::NP - 1 - vp; pp >= 0; --pp)
#pragma unroll
                    for (int b = 0; b < MW; ++b) {
                      const u32 (&pf)[4] = pa[Spec::acc_group(a) * K::NP + pp][b][kb];
                      Spec::Elem::mma(o[a][b][2 * ep], pf, vb[0], vb[1]);
                      Spec::Elem::mma(o[a][b][2 * ep + 1], pf, vb[2], vb[3]);
                    }
            }
        }
    }
  };
  int it_c = 0;  // warp-specialized: stages consumed, the last one of each item included
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // Warp-specialized: waits until stage `it` (counted) is published and reads its tile index and
  // class, and whether the tile is its item's last (`last`), or, for the stage of no tile, -1
  // and the next item (lane 0 reads them for its warp).
  // `release`: this thread is done with the stage. Every compute thread arrives, after its own
  // reads of the stage (staged tiles, diagonal values, the tile index), so each read is ordered
  // before the producer's next copy by that thread's own arrival. (With one arrival a warp after
  // __syncwarp, the order rested on the warp barrier, which ptxas compiles to nothing in converged
  // code, and compute-sanitizer's racecheck, which sees the compiled code, reported the next copy
  // into the stage.)
  auto stage_tile = [&](int it, int& jt, int& clst, bool& last) {
    const int stg = it % K::kStages;
    mbar_wait(ring + 8 * stg, (it / K::kStages) & 1);
    jt = clst = 0;
    if (lane == 0) {
      jt = ring_tile[2 * stg];
      clst = ring_tile[2 * stg + 1];
    }
    jt = __shfl_sync(0xffffffffu, jt, 0);
    clst = __shfl_sync(0xffffffffu, clst, 0);
    last = false;
    if (jt >= 0) {
      last = (clst & kLastTile) != 0;
      clst &= ~kLastTile;
    }
  };
  auto release = [&](int it) { mbar_arrive(ring + 8 * (K::kStages + it % K::kStages)); };
#endif
  for (;;) {  // the block's items (one unless it walks)
    start_item();
    int w_after = n_items;  // warp-specialized: the next item, from the stage of no tile
    if constexpr (K::kPipe) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      // ---- the compute warpgroups, pipelined: the scores of the next stage's tile and P.V of
      // this one go to the tensor cores together, the next softmax runs while P.V does (the
      // rescale and the new operands wait for it). The scores of the stage of no tile are
      // computed and not read (a branch around wgmma would make ptxas serialize them all). A
      // thread releases a stage once its P.V is done. Ping-pong: warpgroup wg issues at named
      // barrier 2 + wg, and hands the turn to the other (one hand-off per tile). The turns run
      // on from item to item (both warpgroups take as many in each: one more than its tiles),
      // so warpgroup 0 issues the next item's first scores while warpgroup 1 stores this one's
      // rows: warpgroup 1 gives warpgroup 0 the block's first turn, warpgroup 0 takes the
      // block's last hand-off. --
      const int wg = warp / 4;
      auto turn_take = [&] {
        if constexpr (K::kPingPong) {
          if (wg == 0) bar_sync<2, K::NTC>(); else bar_sync<3, K::NTC>();
        }
      };
      auto turn_give = [&] {
        if constexpr (K::kPingPong) {
          if (wg == 0) bar_arrive<3, K::NTC>(); else bar_arrive<2, K::NTC>();
        }
      };
      if (K::kPingPong && wg == 1 && q_items == 1) bar_arrive<2, K::NTC>();
      int jt, clst;
      bool last;  // (not read: the scores of the stage of no tile are Q's last reads here)
      int is = it_c;  // the stage (counted) of the tile whose scores are in c
      stage_tile(is, jt, clst, last);
      if (jt < 0) w_after = clst;
      // The scores c and the weights x share registers (softmax_tile reads an element's scores
      // before it writes its weights): the next scores go to c once the weights are operands
      // (the spent weights are the wgmma's read-write accumulator operands, but its first
      // k-step overwrites them: scale-d 0). Each turn starts with the softmax of the tile scored last (under the
      // P.V issued at the end of the turn before), so the element code is in the kernel once.
      constexpr int SG = S > G ? S : G;
      float cx[SG][MW][NT8][4];
      auto& c = *reinterpret_cast<float (*)[S][MW][NT8][4]>(&cx);
      auto& x = *reinterpret_cast<float (*)[G][MW][NT8][4]>(&cx);
      turn_take();
      issue_scores(c, is % K::kStages);
      turn_give();
      wg_wait<0>();
      scores_landed(c);
      if (jt < 0) mbar_arrive(q_empty(wg, q_buf));  // (an item of no tiles)
      for (bool first = true; jt >= 0; first = false) {
        softmax_tile(c, jt, clst, is % K::kStages, is % K::kDiagCopies, x, alpha, grew);
        wg_wait<0>();  // the P.V of the turn before (none in the first)
        pv_fence();
        if (!first) {
          release(it_c);
          ++it_c;
          rescale(alpha, grew);
        }
        to_operands(x, pa);
        int jn, cls_n;
        stage_tile(is + 1, jn, cls_n, last);
        if (jn < 0) w_after = cls_n;
        turn_take();
        issue_scores(c, (is + 1) % K::kStages, jn >= 0);
        issue_pv(is % K::kStages);
        turn_give();
        wg_wait<(A > 0 ? 1 : 0)>();  // the scores (P.V still running; no P.V with A = 0)
        scores_landed(c);
        if (jn < 0) mbar_arrive(q_empty(wg, q_buf));  // (Q's last reads: the scores of the stage of no tile)
        ++is;
        jt = jn;
        clst = cls_n;
      }
      wg_wait<0>();  // the last tile's P.V (none for an item of no tiles)
      pv_fence();
      if (is != it_c) {
        release(it_c);
        ++it_c;
      }
      release(it_c);  // the stage of no tile (reused)
      ++it_c;
      if (K::kPingPong && wg == 0 && w_after >= n_items) bar_sync<2, K::NTC>();
#endif
    } else if constexpr (K::kWs) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
      // ---- the compute warps: each stage as the producer publishes it, until the one of no
      // tile; a thread done with a stage releases it ----
      for (bool any = false;; ++it_c) {
        int jt, clst;
        bool last;
        stage_tile(it_c, jt, clst, last);
        if (jt < 0 && !any) mbar_arrive(q_empty(warp / 4, q_buf));  // (an item of no tiles: Q not read)
        if (jt >= 0) {
          any = true;
          compute_tile(jt, clst, it_c % K::kStages, it_c % K::kDiagCopies, last);
          // (careful: the zeros add_nonfinite_values stored come before the stage's next TMA
          // copy)
          if constexpr (kCareful && K::kTma) fence_proxy_async();
        }
        release(it_c);  // (the last one too: reused)
        if (jt < 0) {
          w_after = clst;
          ++it_c;
          break;
        }
      }
#endif
    } else {
      // ---- double buffering: tile j computes while the next non-empty tile loads ----
      int stage = 0;
      while (j < j_end) {
        const int jn = next_tile(j + 1);
        const int cls_n = cls_next;
        if (jn < j_end) issue_kv(jn, stage ^ 1);
        cp_async_commit();
        fill_diagonals(j, 0);
        landed();
        compute_tile(j, cls, stage, 0, false);
        __syncthreads();  // the stage is refilled by the next iteration's prefetch
        j = jn;
        cls = cls_n;
        stage ^= 1;
      }
      cp_async_wait<0>();
    }
#ifdef FG_COUNT_TILES
    // The profile build: err[4..6] += tiles computed, skipped as empty, computed unmasked.
    if (tid == 0) {
      atomicAdd((unsigned long long*)(ctx.err + 4), (unsigned long long)counted);
      atomicAdd((unsigned long long*)(ctx.err + 5), (unsigned long long)(j_end - j_begin - counted));
      atomicAdd((unsigned long long*)(ctx.err + 6), (unsigned long long)counted_full);
    }
    counted = counted_full = 0;
#endif
    // Persistent: the next item (the producer took it and is loading its Q since this item's
    // last scores).
    const int w_next = walk ? w_after : n_items;

    // ---- epilogue ----
    bool nonfinite = false;  // an accumulator of a stored row is inf or NaN
    // A fresh context from an opaque copy of the parallel index: keeps the output pointers out of
    // the registers of the main loop (the compiler cannot merge the two contexts).
    // The parallel index and the split's bookkeeping again from the block index and the
    // parameters (free to re-read), so that none of it stays live across the key loop.
    const int pidx_out =
        walk ? (int)((unsigned)w / (unsigned)m_tiles) : (int)(blockIdx.y + gridDim.y * blockIdx.z);
    bool split_out = false;
    if constexpr (KeySplitOf<Spec>::value) split_out = params.key_split > 1;
    int par2 = pidx_out;
    if constexpr (KeySplitOf<Spec>::value) par2 = pidx_out / (int)params.key_split;
    asm volatile("mov.b32 %0, %0;" : "+r"(par2));
    K::context(params, par2, ctx);
#pragma unroll
    for (int b = 0; b < MW; ++b) {
      RowStats<G> rs[2];  // quad reductions first: every lane must take part in the shuffles
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int g = 0; g < G; ++g) {
          rs[h].l[g] = quad_sum(lsum[g][b][h]);
          rs[h].rcp_l[g] = 1.f / rs[h].l[g];
          rs[h].inv_l[g] = rs[h].l[g] > 0.f ? rs[h].rcp_l[g] : 0.f;
          rs[h].mx[g] = mrun[g][b][h] * sc[g];
        }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m0 + wrow0 + b * 16 + (lane >> 2) + 8 * h;
        if (m >= M) continue;
        if constexpr (KeySplitOf<Spec>::value) {
          if (split_out) {  // the row's partial state, for attn_combine_sm80: the accumulators,
                            // the running maxima (score units) and the row sums
            float* row = params.part + ((i64)pidx_out * M + m) * K::kPartRow;
#pragma unroll
            for (int t = 0; t < ET8; ++t)
#pragma unroll
              for (int a = 0; a < A; ++a) {
                const float v0 = o[a][b][t][2 * h], v1 = o[a][b][t][2 * h + 1];
                nonfinite |= ((__float_as_uint(v0) & 0x7f800000u) == 0x7f800000u) |
                             ((__float_as_uint(v1) & 0x7f800000u) == 0x7f800000u);
                row[2 * G + a * DV + t * 8 + col_t] = v0;
                row[2 * G + a * DV + t * 8 + col_t + 1] = v1;
              }
            if ((lane & 3) == 0) {
#pragma unroll
              for (int g = 0; g < G; ++g) {
                row[g] = mrun[g][b][h];
                row[G + g] = rs[h].l[g];
              }
            }
            continue;
          }
        }
        // the outputs by value column (none without accumulators), then the row's own
        if constexpr (A > 0) {
          constexpr int PC = pre_chunk<Spec>(ET8);
#pragma unroll
          for (int t0 = 0; t0 < ET8; t0 += PC) {
            typename PreOf<Spec>::type pre[PC];
            if constexpr (PreOf<Spec>::value) {
#pragma unroll
              for (int u = 0; u < PC; ++u)
                if (t0 + u < ET8 && (t0 + u) * 8 + col_t < K::DVIN)
                  Spec::preload(ctx, m, (t0 + u) * 8 + col_t, pre[u]);
            }
#pragma unroll
            for (int u = 0; u < PC; ++u) {
              const int t = t0 + u;
              if (t >= ET8) break;
              float ov[K::AS][2];
#pragma unroll
              for (int a = 0; a < A; ++a) {
                ov[a][0] = o[a][b][t][2 * h];
                ov[a][1] = o[a][b][t][2 * h + 1];
                nonfinite |= ((__float_as_uint(ov[a][0]) & 0x7f800000u) == 0x7f800000u) |
                             ((__float_as_uint(ov[a][1]) & 0x7f800000u) == 0x7f800000u);
              }
              if (t * 8 + col_t < K::DVIN) {
                if constexpr (PreOf<Spec>::value)
                  Spec::store(ctx, m, t * 8 + col_t, ov, rs[h], pre[u]);
                else
                  Spec::store(ctx, m, t * 8 + col_t, ov, rs[h]);
              }
            }
          }
        }
        if ((lane & 3) == 0) Spec::store_row(ctx, m, rs[h]);
      }
    }
    // A non-finite accumulator may be a product 0 * inf of a key whose weight is 0: the plain build
    // flags the call (err[7] = 1; every writer writes 1) and the host runs the careful build.
    if constexpr (!kCareful && ErrOf<typename Spec::Ctx>::value)
      if (nonfinite) ctx.err[7] = 1;
    if (w_next >= n_items) break;
    w = w_next;
    begin_item(w);
  }
}

// Flash-decoding's second step: merges the partial states of the key_split blocks of each row
// tile (the running maxima M_s and row sums l_s of every group, the accumulators O_s), with
// M = max_s M_s and weights 2^((M_s - M) * scale): l = sum_s w_s l_s, O = sum_s w_s O_s (a weight
// of 0 gives 0 whatever O_s holds), then stores the row as the kernel's epilogue does. One
// thread per (row, value-column pair), or per row without accumulators; grid y (and z) over the
// parallel index.
template <class Spec>
FG_DEV void attn_combine_sm80(const typename Spec::Params& params) {
  using K = AttnSm80<Spec>;
  constexpr int G = K::G, A = K::A, DV = K::DV, W = K::kPartRow;
  const int par = (int)(blockIdx.y + gridDim.y * blockIdx.z);
  if (par >= K::parallel(params)) return;
  typename Spec::Ctx ctx;
  K::context(params, par, ctx);
  const int M = ctx.M, ks = (int)params.key_split;
  const int idx = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  constexpr int kPairs = A > 0 ? DV / 2 : 1;  // threads a row
  const int m = idx / kPairs, e0 = (idx % kPairs) * 2;
  if (m >= M) return;
  float sc[G];
#pragma unroll
  for (int g = 0; g < G; ++g) sc[g] = K::score_scale_of(g, ctx);
  RowStats<G> rs;
  float mx[G];
#pragma unroll
  for (int g = 0; g < G; ++g) mx[g] = neg_inf();
  for (int s = 0; s < ks; ++s) {
    const float* row = params.part + ((i64)(par * ks + s) * M + m) * W;
#pragma unroll
    for (int g = 0; g < G; ++g) mx[g] = fmaxf(mx[g], row[g]);
  }
  float ov[K::AS][2];
#pragma unroll
  for (int a = 0; a < A; ++a) ov[a][0] = ov[a][1] = 0.f;
#pragma unroll
  for (int g = 0; g < G; ++g) rs.l[g] = 0.f;
  for (int s = 0; s < ks; ++s) {
    const float* row = params.part + ((i64)(par * ks + s) * M + m) * W;
    float w[G];
#pragma unroll
    for (int g = 0; g < G; ++g) {
      // (a plain group's partial sums add as they are)
      w[g] = K::plain(g) ? 1.f : (mx[g] == neg_inf() ? 0.f : ex2((row[g] - mx[g]) * sc[g]));
      if (w[g] != 0.f) rs.l[g] += w[g] * row[G + g];
    }
#pragma unroll
    for (int a = 0; a < A; ++a) {
      const float wa = w[Spec::acc_group(a)];
      if (wa != 0.f) {
        ov[a][0] += wa * row[2 * G + a * DV + e0];
        ov[a][1] += wa * row[2 * G + a * DV + e0 + 1];
      }
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    rs.rcp_l[g] = 1.f / rs.l[g];
    rs.inv_l[g] = rs.l[g] > 0.f ? rs.rcp_l[g] : 0.f;
    rs.mx[g] = mx[g] * sc[g];
  }
  if constexpr (A > 0)
    if (e0 < K::DVIN) Spec::store(ctx, m, e0, ov, rs);
  if (e0 == 0) Spec::store_row(ctx, m, rs);
}

}  // namespace fg

#endif  // FG_ATTN_SM80_CUH
