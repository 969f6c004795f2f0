// The launch half of a tensor-core kernel's lowered description: the attention structure
// recognized (Sm80Structure) and how the host launches and binds the kernel (Sm80Launch), with
// the device budget lowering fits it to (SmemBudget). One plan kernel -> one CUDA translation
// unit that instantiates the generic FlashAttention-2 template fg::attn_fwd_sm80<Spec>
// (codegen/cuda/fg_attn_sm80.cuh) with a generated Spec (src/codegen/cuda/README.md: the plan ->
// Spec mapping). The decisions are made by lower_tensor_core (lower/tensor_core.h), the printing
// by print_tensor_core (codegen/cuda/emit_sm80.cpp).
//
// What fits: one kernel with one streamed reduction dim; score contractions of two float
// parameters over one eliminated dim (the tensor-core Q.K^T; operands other than one 16-bit
// type as bf16 pieces); groups: online Max (or Min) accumulators whose argument is element
// code over the scores, with online Sum accumulators that are either exp(x_g - safe(M_g)) (row
// sums) or exp(x_g - safe(M_g)) * v (P.V with a parameter v), or none (a bare group), or plain
// groups: Sum accumulators of weights w (element code over the scores) or w * v, with no max;
// epilogue values over (row, value dim) or (row). How many of each fit is a matter of
// resources: the scores' and groups' weights of a key tile and the accumulators of a value
// chunk within the registers, the stages of K and V tiles within shared memory. Anything else
// is a BackendError that says what did not fit (no silent fallback).
// Head dims (the eliminated dims) and dtypes specialize the source; every other extent is a
// run-time value in Params, so one compiled kernel serves every batch, head count and length.
// Accumulators wider than the register budget split the value columns across blocks (a grid
// factor, Sm80Launch::value_split); element values over parallel dims only are computed once per
// block in make_ctx.
// Tests: tests/cuda/nvrtc_examples_test.cpp (every example compiles through NVRTC for sm_80
// and sm_90a), tests/gpu/cuda_examples_test.cpp (results against the reference on the GPU).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "flashgen/compile.h"
#include "flashgen/ref.h"
#include "ir/index_range.h"
#include "plan/plan.h"

namespace flashgen {

// The attention structure the template recognized in a kernel, once (node ids of plan.program;
// buffers are plan buffer ids): the tensor-core score contractions (q.k over the head dim), the
// softmax groups (an online max of a score expression, and the row sums it rescales) and the
// P.V accumulators (a group's exp(x - max) times a value tile).
struct Sm80Structure {
  struct Score { int node, q_buffer, k_buffer, dim = -1; };  // dim: the head dim it contracts
  // A group: an online max of a score expression `arg` and the row sums it rescales (softmax),
  // or, with max_node -1, plain sums of the weights `arg` (no max: sigmoid or relu weights).
  // A softmax group's score as the template takes it: `arg` peeled, outermost first, of masks
  // where(cond, x, -inf) (step node: cond) and of positive uniform factors that join the exp2
  // scale (x / f, f a positive constant or the sqrt of a size or of a positive constant; x * c,
  // c a positive constant; step node: f or c), down to `score_rest`.
  struct ScoreStep {
    enum Kind : uint8_t { mask, divide, multiply } kind;
    int node;
    bool operator==(const ScoreStep&) const = default;
  };
  struct Group {
    int max_node, arg;
    std::vector<int> sums;
    std::vector<ScoreStep> score_steps = {};
    int score_rest = -1;
    // A Min accumulator (max_node its node): the running max is of -arg (its masks are
    // where(cond, x, inf), a mask step each, kept as -inf), and its value is minus the max.
    bool negate = false;
    // Factors (score element code over the row and the key: key gates, per-key or per-element
    // weights, the score itself) the group's probabilities are multiplied by, with a strong
    // zero, before they weigh the values (sum(softmax(s) * g * v)); empty: none.
    std::vector<int> pv_weight = {};
    // The row sums take the weighted probabilities too (sum(exp(s - max) * g): a softmax
    // renormalized over its weights, a mask written as a factor).
    bool weigh_sums = false;
    // A weight reads a score (attention entropy: sum(p * s, n)): the kernel computes the
    // weights with the scores, before the probabilities replace them.
    bool weight_reads_scores = false;
    // Its running max is all the kernel keeps of it (a max or min over the keys beside the
    // attention: no row sums, no P.V): no exponentials, no P operands.
    bool bare = false;
  };
  struct PV { int node, group, v_buffer; };
  std::vector<Score> scores;
  std::vector<Group> groups;
  std::vector<PV> pv;
  int value_dim = -1;  // dim id (each score's head dim: Score::dim)
};

// How the host launches and binds one generated kernel.
struct Sm80Launch {
  std::string entry;            // extern "C" kernel name
  int warps = 4, block_m = 128, smem_bytes = 0;
  // Hopper: the block's products by wgmma on two compute warpgroups of 64 rows (16 rows a warp;
  // fg_sm90.cuh), the element code and softmax as on the mma.sync path (its careful build runs
  // the same shape with mma.sync).
  bool wgmma = false;
  // The columns of one wgmma instruction (kWgmmaN: 64, or 128 where the key tile and the value
  // columns are multiples of it).
  int wgmma_n = 64;
  // Why the products stay on mma.sync on cuda-sm90 (empty: wgmma, or a cuda-sm80 target; why a
  // wgmma kernel's value split is wider than its accumulators need: value_split_why).
  std::string products_why;
  // Hopper, with wgmma: the last `producer_warps` (4) of `warps` are a producer warpgroup that
  // fills a ring of `stages` K/V stages guarded by mbarriers (fg_attn_sm80.cuh,
  // kWarpSpecialized); the warps before it compute. Without it, all warps load and compute,
  // double-buffered (stages = 2).
  bool warp_specialized = false;
  int producer_warps = 0;
  int stages = 2;
  // Copies of the values per diagonal and per key (fg::AttnSm80::kDiagCopies) where the kernel
  // is warp-specialized and has some: one per stage where shared memory holds them (the
  // producer fills a tile's values as far ahead as its K/V), else two (the producer waits until
  // the compute warps are done with tile i - 2 before filling tile i's). 1 elsewhere.
  int diag_copies = 1;
  // Warp-specialized: Q's tiles in `q_buffers` buffers (1 or 2), item k's in buffer k % 2, so
  // the producer loads the next item's Q as soon as it knows the item (when it has issued this
  // one's last key tile) instead of once the compute warps are done reading this one's: 2
  // where shared memory holds it beside the stages (choose_wgmma).
  int q_buffers = 1;
  // Warp-specialized kernels run a persistent grid (kPersistent): as many blocks as are
  // resident at once (sm count x min_blocks), block b computing work item (row tile, parallel
  // index x key chunk) b and then the items it takes in order from a counter in the error
  // words; the producer fills the next item's stages under the last one's epilogue. A per-call
  // choice (choose_key_split): without a tile mask, short key loops; with one (causal, a
  // window, document's ids) at every length, since its items' work differs (a block whose
  // items are short takes more of them) and is short where the mask is sparse.
  // Warp-specialized: each compute warpgroup issues the next tile's scores with this tile's
  // P.V and runs the next softmax while P.V is on the tensor cores (kPipelined); with
  // ping_pong the two warpgroups also take turns at issuing their products (kPingPong), so
  // one's softmax runs under the other's products. Lowering's choose_pipelining says when.
  bool pipelined = false, ping_pong = false;
  // The walking code runs that pipelined loop with ping-pong where `walk_pipelined`. Where
  // that differs from the main loop (`pipelined`), the walking calls have a build of their
  // own, `walk_entry` (its own program: FG_ONLY_WALK, compiled at the first call that walks),
  // and the main entry has no walking code: it ignores Params::m_tiles, so a grid launched
  // to walk must launch `walk_entry`. Otherwise (walk_entry empty) the main entry walks too.
  bool persistent = false;
  // The items' work differs (a tile mask the interval rules decide for some tile: causal,
  // windows, documents), so a persistent kernel walks at every length (choose_key_split).
  bool items_differ = false;
  // Warp-specialized kernels whose classify reads data (doc[n]: a data range a tile): the
  // producer's four warps classify four spans of tiles at once, each warp its own, instead of
  // all four together one span after another (kScanByWarps; fg_attn_sm80.cuh's scan_tiles).
  bool scan_by_warps = false;
  // Warp-specialized: the producer warpgroup's registers after setmaxnreg (the compute
  // warpgroups take the rest of the block's 168 x 384, a multiple of 8): 56, or 88 where the
  // tiles are classified by data (the producer holds the data ranges' pointers and the scan's
  // state across the walk; at 56 it spilled: bench/NOTES.md, sessions 26, 27 and 29). The
  // compute warpgroups then have 208: at 200 (a producer of 104) document ran 1.20x slower
  // (bench/NOTES.md, session 30).
  static constexpr int kProducerRegsDefault = 56;  // (fg_attn_sm80.cuh's default too)
  int producer_regs = kProducerRegsDefault;
  std::string walk_entry;
  bool walk_pipelined = false;
  // Warp-specialized: the K tiles (one per score, in order) and the V tiles (one per distinct
  // value tensor) come by TMA bulk tensor copies, one 5-dim tensor map per operand in Params,
  // its dims innermost first: the operand's column dim (head or value dim; stride 1), the key
  // dim, the buffer's parallel dims, then dims of extent 1. A call whose
  // tensors a map cannot describe (bases or strides not multiples of 16 bytes, a stride of 0)
  // copies them by cp.async as without: the host decides per call (cuda_call.h,
  // tma_map_shapes) and launches the kernel built with FG_KV_CP_ASYNC, compiled at the first
  // call that needs it.
  // Empty: cp.async always (no producer warpgroup, or an operand with other dims or more than
  // three parallel ones).
  struct TmaOperand {
    int buffer = -1;           // plan buffer
    std::vector<int> pos;      // the map's dims (innermost first) as positions of the buffer
    std::vector<int> dims;     // and as dim ids: column, key, then parallel dims (at most 3)
    bool value_chunk = false;  // the column coordinate starts at the block's value chunk
  };
  std::vector<TmaOperand> tma;
  // Operands that are not all of one 16-bit type (f32, f8, or bf16 beside f16) reach the
  // tensor cores as `pieces` bf16 pieces each (x = x0 + x1 + ...; Spec::kPieces), as many as the
  // widest type needs: a product multiplies the pieces i, j with i + j < pieces (3 pieces for
  // f32: 6 mma per product, f32 accuracy; 2 for f16 beside bf16: 3; f8 alone: 1), on the
  // mma.sync shape (no wgmma). Before the kernel the host writes each
  // operand buffer's pieces into device scratch with `split_entry` (fg::split_pieces): the
  // buffer's dims packed, a row of its innermost extent x `pieces` (piece p at p x that
  // extent), and binds them to Params buffer `slot` (after the plan's buffers; its strides over
  // `dims`). The element code reads the buffers themselves.
  int pieces = 1;
  struct SplitOperand {
    int buffer = -1, slot = -1;
    std::vector<int> dims;  // the buffer's dims, innermost last
    DType type = DType::bf16;  // the buffer's
    std::string name;
  };
  std::vector<SplitOperand> split;
  std::string split_entry;
  int min_blocks = 1;           // kMinBlocks: __launch_bounds__ blocks per SM (caps registers)
  int row_dim = -1;             // grid x covers ceil(ext(row_dim) / block_m) tiles
  int key_dim = -1;             // the streamed key loop's dim
  std::vector<int> par_dims;    // flattened into grid y/z: product of their extents
  int value_split = 1;          // times this many value-column chunks (innermost)
  std::string value_split_why;  // why value_split > 1 (empty when it is 1)
  // Flash-decoding (a per-call choice: choose_key_split in lower/tensor_core.h): `few_entry`
  // is the kernel with one warp of 16 rows per block (calls of at most 16 rows; few_smem_bytes
  // of shared memory; the same key tiles, which staged reads are printed for); either kernel
  // may split each row tile's key loop across key_split blocks (grid y * key_split), which
  // write part_row_of(few) floats of partial state per row to device memory for
  // `combine_entry`, or `few_combine_entry` after the few-rows kernel (one thread per row and
  // value-column pair, 128 per block; grid y*z the parallel index) to merge and store.
  std::string few_entry, combine_entry;
  int few_smem_bytes = 0, part_row = 0;
  int few_block_n = 64;         // the few-rows kernel's keys per tile
  int few_blocks_per_sm = 1;    // few-rows blocks resident per SM (shared memory, at most 8)
  int value_cols = 0;           // value columns per block (the padded chunk: kValueDim)
  // The few-rows kernel's value split, its own (SpecFew::kValueSplit; its one warp holds the
  // accumulators of its rows, where the full kernel's may spread over a warpgroup): chunks
  // of few_value_cols columns, partial rows of few_part_row floats, merged by
  // few_combine_entry (the combine of SpecFew, in the few-rows kernel's module).
  int few_value_split = 1, few_value_cols = 0, few_part_row = 0;
  std::string few_combine_entry;
  std::string few_value_split_why;  // why few_value_split > 1 (empty when it is 1)
  // The value split, chunk width and partial row of the full (few = false) or few-rows kernel.
  int value_split_of(bool few) const { return few ? few_value_split : value_split; }
  int value_cols_of(bool few) const { return few ? few_value_cols : value_cols; }
  int part_row_of(bool few) const { return few ? few_part_row : part_row; }
  // The combine kernel's threads a row: one per value-column pair of the chunk, or one where
  // the kernel has no P.V accumulator (the template's kPairs).
  int combine_threads_per_row(bool few) const { return num_acc > 0 ? value_cols_of(few) / 2 : 1; }
  int num_buffers = 0, max_rank = 1, num_dims = 0;  // num_buffers: the plan's, then `split`'s
  // Params = { const void* buf[num_buffers]; i64 st[num_buffers][max_rank];
  //            i64 ext[num_dims]; i64* err; i64 key_split; float* part; i64 m_tiles; }
  //            (m_tiles: the row tiles of a walking call, read by kPersistent kernels; all 8-byte
  //            fields, in this order), then with TMA operands, from the next 64-byte
  //            boundary, one 16-word map per operand. The words (the printer static_asserts
  //            the struct against them; the host fills them):
  int params_base_words() const { return num_buffers * (1 + max_rank) + num_dims + 4; }
  int params_maps_word() const { return (params_base_words() + 7) / 8 * 8; }
  int params_words() const {
    return tma.empty() ? params_base_words()
                       : params_maps_word() + 16 * static_cast<int>(tma.size());
  }
  std::vector<std::pair<std::string, int64_t>> head_dims;  // the extents compiled in
  // For FLOP counts: per (row, key) pair 2 * score_dims (the scores' head dims summed) and
  // 2 * value_dim per accumulator.
  int64_t score_dims = 0, value_dim = 0;
  int num_acc = 1;
  int mask_node = -1;               // the plan's tile mask (FLOPs count unmasked pairs only)
  std::vector<int> int32_dims;      // dims whose extents must stay below 2^31 (32-bit indices)
  // An integer count of a bool summed in f32 (a row sum of a plain group): exact while the key
  // extent is at most this (2^24); 0: none. The host refuses a call past it.
  int64_t count_keys_limit = 0;
  // For `explain`: query rows per warp (16 or 32), keys per tile, element values computed once
  // per block (node text).
  int rows_per_warp = 16, block_n = 64;
  std::vector<std::string> hoisted;
  std::vector<std::string> staged;  // gathers staged through shared memory (node text)
  // score values per diagonal of a tile (functions of n - m), computed per tile in shared
  // memory: BM + BN - 1 floats each (node text)
  std::vector<std::string> diagonal;
  // score values per key of a tile (functions of the key index), computed once per key of a
  // tile into the same shared memory as the diagonal values (node text)
  std::vector<std::string> key_values;
  // Gathers whose indices are plain dim indices (pair[b, h, m, n], doc[m]) run unchecked on the
  // device; the host checks ext(index dim) <= ext(parameter dim) before the launch instead.
  struct GatherCheck { int param, pos, index_dim; };
  std::vector<GatherCheck> gather_checks;
  // Gathers by computed indices proved in range (ir/index_range.h) run unchecked too, under
  // these relations of the extents; a call where one fails runs the same kernels built with
  // FG_CHECK_GATHERS, which check every gather on the device (the careful build always does).
  std::vector<ExtentCondition> range_conditions;
  std::vector<std::string> range_condition_text;  // for explain
  // A check of the score code (a checked gather's index, the divisor of x % y) reads a score
  // product: at a padded key the product is 0, which could fail a check no real element fails,
  // so the score code runs only at real keys (kChecksReadScores). Otherwise it runs at every
  // key (a padded one's result discarded), which keeps its loads of row data out of a
  // per-element test.
  bool checks_read_scores = false;
  // The score code (and the P.V weights) runs once per element of every key tile, a padded
  // key of the last tile (n >= N) included, whose result is then replaced. keep_pass: the
  // tile mask's removed elements contribute nothing (TileClasses::unmasked_full) and the mask
  // reads no score, so the score code is printed with the mask taken as true and the mask
  // runs as a pass of its own on a partial tile's elements (Spec::keep, kKeep); else the
  // score code holds the mask. clamp_keys: the per-element code reads device memory by the
  // key (a parameter, gather or intermediate over the key dim that no staged tile holds) or
  // takes x % y with y over the key dim (a staged tile is zero past N), so at a padded key it
  // runs at min(n, N - 1) (kClampKeys); otherwise at n itself, whose shared-memory reads keep
  // their immediate offsets.
  bool keep_pass = false;
  bool clamp_keys = false;
  Sm80Structure structure;
};

// Shared memory of the GPU a kernel is for: staged tiles are kept only while they fit it
// (fit_staged). Without a device at hand, the target's: cuda-sm80 an A100 (164 KiB per SM,
// 163 per block), cuda-sm90 an H100/H200 (228, 227); run_cuda passes the running device's.
struct SmemBudget {
  int per_sm = 0, per_block = 0;  // bytes
};
SmemBudget smem_budget(Target target);
// The SMs of the target's GPU without a device at hand (explain's flash-decoding line): an
// A100's 108 for cuda-sm80, an H100/H200's 132 for cuda-sm90.
int target_sm_count(Target target);

// The head dims (eliminated dims) of a plan's kernels, by name: what `sizes` must give.
std::vector<std::string> cuda_head_dims(const Plan& plan);

}  // namespace flashgen
