// The CUDA sm80-path emitter (see emit_sm80.h): recognizes the template's structure in a plan
// kernel (scores, softmax groups, row sums, P.V accumulators), then writes the Spec: Params,
// make_ctx (parallel index -> grid dims -> buffer offsets by the buffers' own strides, so GQA
// and any layout fall out), classify() by interval arithmetic of the plan's tile mask over the
// tile's index box, score<g>() through the shared ElementEmitter with the CUDA table, and
// store()/store_row() from the plan's epilogue values.
// Preconditions: a plan from compile_program; head-dim extents in `sizes`.
// Tests: tests/cuda/nvrtc_examples_test.cpp, tests/gpu/cuda_examples_test.cpp.
#include "codegen/interval_code.h"
#include "codegen/cuda/emit_sm80.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "codegen/element_code.h"
#include "codegen/target.h"
#include "compiler/pipeline.h"
#include "flashgen/error.h"
#include "passes/passes.h"

namespace flashgen {

namespace {

std::string S(int64_t v) { return std::to_string(v); }

// The CUDA element table: the shared one, with the MUFU tanh (|err| ~ 2^-11, far inside the bf16
// tolerance) for soft-capping.
TargetTable adapt(Target which) {
  TargetTable x = target_table(which);
  x.float_fn[Op::Tanh] = "fg::fast_tanh";
  return x;
}

const TargetTable& cuda_table(Target t) {
  static const TargetTable t80 = adapt(Target::cuda_sm80);
  static const TargetTable t90 = adapt(Target::cuda_sm90);
  return t == Target::cuda_sm90 ? t90 : t80;
}

class Sm80Writer {
 public:
  Sm80Writer(const Plan& plan, int kernel, Target target, const Extents& sizes,
             const SmemBudget& budget)
      : plan_(plan), p_(plan.program), k_(plan.kernels[kernel]), T_(cuda_table(target)),
        em_(plan, k_, T_), sizes_(sizes), budget_(budget) {}

  CudaKernelSource write() {
    analyse();
    CudaKernelSource out;
    out.source = source();
    launch_.rows_per_warp = 16 * mw_;
    for (int h : hoisted_) launch_.hoisted.push_back(node_text(p_, h));
    Sm80Structure& st = launch_.structure;
    for (const Score& sc : scores_) st.scores.push_back({sc.node, sc.qbuf, sc.kbuf});
    for (const Group& g : groups_) st.groups.push_back({g.max_node, g.arg, g.sums});
    for (const Acc& a : pv_) st.pv.push_back({a.node, a.group, vbufs_[a.vidx]});
    st.head_dim = cdim_;
    st.value_dim = vdim_;
    out.launch = launch_;
    return out;
  }

 private:
  const Plan& plan_;
  const Program& p_;
  const PlanKernel& k_;
  const TargetTable& T_;
  ElementEmitter em_;
  const Extents& sizes_;
  const SmemBudget budget_;
  Sm80Launch launch_;

  struct Score { int node, qbuf, kbuf; };
  struct Group { int max_node, arg; std::vector<int> sums; };
  struct Acc { int node, group, vidx; };
  std::vector<Score> scores_;
  std::vector<Group> groups_;
  std::vector<int> vbufs_;   // distinct V buffers
  std::vector<Acc> pv_;      // P.V accumulators
  int cdim_ = -1, vdim_ = -1;
  int64_t D_ = 0, DV_ = 0;
  // Mask gathers bounded by their data over the tile (data_ranges; found by analyse), and those
  // over the row dim, bounded once per block.
  std::vector<DataRange> data_ranges_;
  std::set<int> ranged_, row_ranged_;
  std::set<int> unchecked_;  // parameters whose every gather indexes by plain dim indices
  // Gathers the score code reads by (parallel dims..., [row dim,] key dim): staged through
  // shared memory with the K/V tiles (fg::load_staged). arg_dims: the index dim per position.
  struct Staged { int param, buffer, elem_bytes; bool rows; std::vector<int> arg_dims; int node; };
  std::vector<Staged> candidates_, staged_;

  [[noreturn]] void fail(const std::string& why) const {
    throw BackendError("kernel " + k_.name + " does not fit the CUDA sm80 attention template: " +
                       why);
  }
  std::string nt(int id) const { return "%" + S(id) + " (" + node_text(p_, id) + ")"; }
  const Node& N(int id) const { return p_.nodes[id]; }
  // k_.grid is in memory order (not a sorted DimSet): search it linearly.
  bool is_par(int d) const {
    return d != k_.row_dim && std::find(k_.grid.begin(), k_.grid.end(), d) != k_.grid.end();
  }
  int buffer_of_param(int param) const {
    for (size_t b = 0; b < plan_.buffers.size(); ++b)
      if (plan_.buffers[b].kind == PlanBuffer::Input && plan_.buffers[b].param == param)
        return static_cast<int>(b);
    fail("parameter " + p_.params[param].name + " has no buffer");
  }
  int64_t head_extent(int d) const {
    auto it = sizes_.find(p_.dims[d]);
    if (it == sizes_.end())
      throw BackendError("the CUDA target specializes head dims: give the extent of '" +
                         p_.dims[d] + "' (e.g. --sizes " + p_.dims[d] + "=64)");
    return it->second;
  }
  bool is_acc(int node) const {
    for (const Accumulator& a : k_.accs)
      if (a.node == node) return true;
    return false;
  }
  void ancestors(int id, std::set<int>& out) const {
    if (!out.insert(id).second) return;
    for (int a : N(id).args) ancestors(a, out);
  }

  // A bf16 parameter load over (grid dims..., `lead`, `inner`) with `inner` innermost.
  int operand_buffer(int node, int lead, int inner, const char* role) const {
    const Node& n = N(node);
    if (n.op != Op::Param) fail(std::string(role) + " operand " + nt(node) + " is not a parameter");
    const Parameter& P = p_.params[n.param];
    if (P.type != DType::bf16)
      fail(std::string(role) + " '" + P.name + "' is " + dtype_name(P.type) +
           "; the sm80 tensor-core path takes bf16");
    if (P.dims.empty() || P.dims.back() != inner)
      fail(std::string(role) + " '" + P.name + "' must have '" + p_.dims[inner] +
           "' as its innermost dim");
    bool has_lead = false;
    for (int d : P.dims) {
      if (d == lead) has_lead = true;
      else if (d != inner && !is_par(d))
        fail(std::string(role) + " '" + P.name + "' has dim '" + p_.dims[d] +
             "' that is neither parallel nor the row/key/head dim");
    }
    if (!has_lead) fail(std::string(role) + " '" + P.name + "' lacks dim '" + p_.dims[lead] + "'");
    return buffer_of_param(n.param);
  }

  void analyse() {
    if (plan_.kernels.size() != 1)
      fail("the plan has " + S(plan_.kernels.size()) +
           " kernels (materialized intermediates are not supported on the CUDA backend yet)");
    if (k_.red_dim < 0) fail("it has no streamed reduction dim");
    if (k_.row_dim < 0) fail("it has no row dim");
    for (const PlanValue& v : k_.values)
      if (v.load_buffer >= 0) fail("it reads a materialized intermediate");
    // Scores: contractions over one eliminated dim.
    for (const PlanValue& v : k_.values) {
      if (!v.contraction) continue;
      const Node& n = N(v.node);
      if (n.reduce.size() != 1 || !dimset_contains(k_.elim, n.reduce[0]))
        fail("contraction " + nt(v.node) + " is not over one eliminated dim");
      if (cdim_ >= 0 && n.reduce[0] != cdim_)
        fail("score contractions over different dims");
      cdim_ = n.reduce[0];
      const Node& mul = N(n.args[0]);
      if (mul.op != Op::Mul) fail("contraction " + nt(v.node) + " is not a sum of a product");
      int a = mul.args[0], b = mul.args[1];
      if (!dimset_contains(N(a).dims, k_.row_dim)) std::swap(a, b);
      Score s{v.node, operand_buffer(a, k_.row_dim, cdim_, "query"),
              operand_buffer(b, k_.red_dim, cdim_, "key")};
      scores_.push_back(s);
    }
    if (scores_.empty()) fail("no tensor-core contraction (q.k over a head dim) feeds the loop");
    if (scores_.size() > 2) fail(S(scores_.size()) + " score contractions (at most 2)");
    // Groups: online Max over the key dim.
    for (const Accumulator& a : k_.accs) {
      const Node& n = N(a.node);
      if (n.reduce != DimSet{k_.red_dim})
        fail("accumulator " + nt(a.node) + " reduces more than the key dim");
      if (a.op == Op::Min) fail("Min accumulator " + nt(a.node) + " (only softmax groups)");
      if (a.op == Op::Max) groups_.push_back({a.node, n.args[0], {}});
    }
    if (groups_.empty()) fail("no online max (softmax) over the key dim");
    if (groups_.size() > 2) fail(S(groups_.size()) + " softmax groups (at most 2)");
    // Sums: row sums and P.V.
    std::set<int> explained;
    for (const Accumulator& a : k_.accs) {
      if (a.op != Op::Sum) continue;
      if (a.rescale_by.size() != 1)
        fail("online sum " + nt(a.node) + " is not rescaled by exactly one running max");
      const Node& n = N(a.node);
      int x = n.args[0];
      // The group of the running max the sum is rescaled by, and its exp(x - safe(max)) factor
      // (the plan's Accumulator: fuse recognized the one-pass form).
      int g = -1;
      for (size_t i = 0; i < groups_.size(); ++i)
        if (groups_[i].max_node == a.rescale_by[0]) g = static_cast<int>(i);
      if (g < 0) fail("online sum " + nt(a.node) + " is rescaled by a max that is no group's");
      auto online_exp = [&](int id) {
        return std::find(a.exp_factors.begin(), a.exp_factors.end(), id) != a.exp_factors.end() &&
               N(N(id).args[0]).args[0] == groups_[g].arg;
      };
      if (online_exp(x)) {
        groups_[g].sums.push_back(a.node);
        explained.insert(x);
        explained.insert(N(x).args[0]);
        continue;
      }
      const Node& m = N(x);
      if (m.op != Op::Mul) fail("online sum " + nt(a.node) + " is neither exp(x - max) nor exp(x - max) * v");
      int e = m.args[0], v = m.args[1];
      if (!online_exp(e)) std::swap(e, v);
      if (!online_exp(e)) fail("online sum " + nt(a.node) + " does not sum exp(x - max) * v");
      int vd = -1;
      for (int d : N(v).dims)
        if (dimset_contains(k_.elim, d)) vd = d;
      if (vd < 0) fail("value of " + nt(a.node) + " has no head dim");
      if (vdim_ >= 0 && vd != vdim_) fail("P.V accumulators over different value dims");
      vdim_ = vd;
      int vb = operand_buffer(v, k_.red_dim, vdim_, "value");
      int vi = -1;
      for (size_t i = 0; i < vbufs_.size(); ++i)
        if (vbufs_[i] == vb) vi = static_cast<int>(i);
      if (vi < 0) {
        vi = static_cast<int>(vbufs_.size());
        vbufs_.push_back(vb);
      }
      pv_.push_back({a.node, g, vi});
      explained.insert({x, e, N(e).args[0], v});
    }
    if (pv_.empty()) fail("no P.V accumulator (sum of exp(x - max) * v over the key dim)");
    if (pv_.size() > 4) fail(S(pv_.size()) + " P.V accumulators (at most 4)");
    if (vbufs_.size() > 2) fail(S(vbufs_.size()) + " value tensors (at most 2)");
    // Every body value must be score element code or a recognized accumulator part.
    std::set<int> score_code;
    for (const Group& g : groups_) ancestors(g.arg, score_code);
    for (const PlanValue& v : k_.values) {
      if (v.phase != Phase::Body || is_acc(v.node)) continue;
      if (score_code.count(v.node) || explained.count(v.node)) continue;
      fail("body value " + nt(v.node) + " is neither score element code nor part of an online "
           "accumulator");
    }
    // Element code reads only the scores, accumulators and inline expressions: another reduction
    // held in its own array (e.g. a per-row norm of q computed before the key loop) has no
    // place in the template.
    for (const PlanValue& v : k_.values) {
      if (v.inlined || v.contraction || is_acc(v.node) || !is_reduction(N(v.node).op)) continue;
      bool score = false;
      for (const Score& sc : scores_) score = score || sc.node == v.node;
      if (!score)
        fail("value " + nt(v.node) + " is computed in " + phase_name(v.phase) +
             " (a reduction other than the key loop's), which the template does not hold");
    }
    D_ = head_extent(cdim_);
    DV_ = head_extent(vdim_);
    if (D_ % 32 != 0 || D_ > 256 || D_ <= 0)
      fail("head dim " + p_.dims[cdim_] + " = " + S(D_) + " (the sm80 path needs a multiple of "
           "32 up to 256)");
    if (DV_ % 32 != 0 || DV_ > 256 || DV_ <= 0)
      fail("value dim " + p_.dims[vdim_] + " = " + S(DV_) + " (the sm80 path needs a multiple of "
           "32 up to 256)");
    for (int d : k_.elim)
      if (d != cdim_ && d != vdim_) fail("eliminated dim '" + p_.dims[d] + "' is neither the "
                                         "score contraction dim nor the value dim");
    // Outputs: over (par..., row[, value dim]).
    for (int b : k_.writes) {
      const PlanBuffer& B = plan_.buffers[b];
      if (B.kind != PlanBuffer::Output) fail("it writes an intermediate buffer");
      if (B.type != DType::bf16 && B.type != DType::f32)
        fail("output " + B.name + " is " + dtype_name(B.type) + " (bf16 or f32 on the sm80 path)");
      for (int d : B.dims)
        if (d != k_.row_dim && d != vdim_ && !is_par(d))
          fail("output " + B.name + " has dim '" + p_.dims[d] + "'");
    }
    // Gathers by plain dim indices: checked once on the host (extents), not per element.
    std::map<int, bool> direct;
    for (const PlanValue& v : k_.values) {
      const Node& n = N(v.node);
      if (n.op != Op::Gather) continue;
      bool d = direct.count(n.param) ? direct[n.param] : true;
      for (int a : n.args) d = d && N(a).op == Op::Index;
      direct[n.param] = d;
    }
    for (const auto& [param, d] : direct)
      if (d) unchecked_.insert(param);
    for (const PlanValue& v : k_.values) {
      const Node& n = N(v.node);
      if (n.op != Op::Gather || !unchecked_.count(n.param)) continue;
      for (size_t i = 0; i < n.args.size(); ++i)
        launch_.gather_checks.push_back({n.param, static_cast<int>(i), N(n.args[i]).dim});
    }
    find_staged(score_code);
    // Launch shape (tuning from bench/NOTES.md).
    const int Sn = static_cast<int>(scores_.size()), A = static_cast<int>(pv_.size());
    // Small heads (D + DV <= 64, e.g. Evoformer's d = 32) do little tensor-core work per score
    // element, so the element code and its latencies dominate: 16 rows per warp and 5 blocks
    // per SM (<= 102 registers) hide them better than 32 rows and 2 blocks (the A/B
    // measurements: bench/NOTES.md, sessions 3 and 4).
    const bool small_heads = D_ + DV_ <= 64 && Sn == 1 && A == 1;  // (as measured)
    mw_ = (Sn == 1 && A == 1 && DV_ <= 128 && D_ <= 128 && !small_heads) ? 2 : 1;
    // Value-column split: when the accumulators of all value columns would not fit the
    // registers (more than 128 f32 per thread), blocks take column chunks of the value dim
    // (a grid factor) and recompute the scores per chunk, as FA2 does for wide heads.
    vsplit_ = 1;
    while (A * mw_ * (DV_ / vsplit_) / 2 > 128 && (DV_ / (2 * vsplit_)) % 32 == 0) vsplit_ *= 2;
    DVc_ = DV_ / vsplit_;
    launch_.value_split = vsplit_;
    launch_.min_blocks = mw_ == 2 ? 2 : (small_heads ? 5 : 1);
    skip_ = D_ >= 96 || Sn == 2;
    launch_.entry = k_.name;
    launch_.warps = 4;
    launch_.block_m = 16 * mw_ * 4;
    staged_ = fit_staged(launch_.min_blocks);
    // Small heads: staged tiles are worth more than a fifth block (bench/NOTES.md, session 4).
    if (small_heads && fit_staged(4).size() > staged_.size()) {
      launch_.min_blocks = 4;
      staged_ = fit_staged(4);
    }
    launch_.smem_bytes = smem_bytes(staged_);
    for (const Staged& t : staged_) launch_.staged.push_back(node_text(p_, t.node));
    launch_.row_dim = k_.row_dim;
    for (int d : k_.grid)
      if (d != k_.row_dim) launch_.par_dims.push_back(d);
    launch_.num_buffers = static_cast<int>(plan_.buffers.size());
    for (const PlanBuffer& B : plan_.buffers)
      launch_.max_rank = std::max<int>(launch_.max_rank, static_cast<int>(B.dims.size()));
    launch_.num_dims = static_cast<int>(p_.dims.size());
    launch_.head_dims = {{p_.dims[cdim_], D_}};
    if (vdim_ != cdim_) launch_.head_dims.push_back({p_.dims[vdim_], DV_});
    launch_.num_scores = Sn;
    launch_.num_acc = A;
    launch_.head_dim = D_;
    launch_.value_dim = DV_;
    launch_.mask_node = k_.tiles.mask;
    find_hoisted();
    // Data the classifier bounds per tile (data_ranges), when the tiles are classified.
    if (k_.tiles.mask >= 0 && (k_.tiles.skip_empty || k_.tiles.unmasked_full)) {
      auto par = [this](int d) { return is_par(d); };
      data_ranges_ = data_range_gathers(p_, k_.tiles.mask, k_.row_dim, k_.red_dim, par);
      for (const DataRange& dr : data_ranges_) {
        ranged_.insert(dr.node);
        if (dr.over == k_.row_dim) row_ranged_.insert(dr.node);
      }
    }
    // Dims the device indexes with 32-bit ints: rows, keys, the grid, and every dim whose index
    // or size the element code reads (the emitter's int_range assumes them below 2^31).
    std::set<int> narrow = {k_.row_dim, k_.red_dim};
    narrow.insert(launch_.par_dims.begin(), launch_.par_dims.end());
    for (const Node& n : p_.nodes)
      if (n.op == Op::Index || n.op == Op::Size) narrow.insert(n.dim);
    launch_.int32_dims.assign(narrow.begin(), narrow.end());
  }

  // The dim of each index of a gather (meaningful when they are plain dim indices).
  std::vector<int> arg_dims(int gather) const {
    std::vector<int> dims;
    for (int a : N(gather).args) dims.push_back(N(a).dim);
    return dims;
  }
  // Candidates for staging: reads of the score code -- plain parameter reads, or gathers whose
  // every index is a plain dim index (unchecked_: the host checked the extents, so every
  // element of a tile inside M x N is in range) -- over the block's parallel dims, at most once
  // the row dim and exactly once the key dim. Each key tile needs a rows x keys (or 1 x keys)
  // tile of them, which can travel with K/V.
  void find_staged(const std::set<int>& score_code) {
    for (int id : score_code) {
      const Node& n = N(id);
      // gathers by plain dim indices (unchecked_), or plain reads of a parameter
      if (!(n.op == Op::Gather && unchecked_.count(n.param)) && n.op != Op::Param) continue;
      const std::vector<int> dims = n.op == Op::Param ? p_.params[n.param].dims : arg_dims(id);
      int rows = 0, keys = 0;
      bool ok = true;
      for (int d : dims) {
        rows += d == k_.row_dim;
        keys += d == k_.red_dim;
        ok = ok && (d == k_.row_dim || d == k_.red_dim || is_par(d));
      }
      if (!ok || rows > 1 || keys != 1) continue;
      bool seen = false;  // the same tile read twice (pair[b, h, m, n] in two places)
      for (const Staged& t : candidates_)
        seen = seen || (t.param == n.param && t.arg_dims == dims);
      if (seen) continue;
      const DType t = p_.params[n.param].type;
      candidates_.push_back(
          {n.param, buffer_of_param(n.param), dtype_bytes(t), rows == 1, dims, id});
    }
    // (row, key) tiles first: they replace a load per score element, key tiles one per column
    std::stable_sort(candidates_.begin(), candidates_.end(),
                     [](const Staged& a, const Staged& b) { return a.rows > b.rows; });
  }
  static constexpr size_t kMaxStaged = 4;  // fg::kMaxStaged

  // Shared memory of the launch with staged tiles `st` (the layout of fg::AttnSm80: Q tiles,
  // then two stages of K, V and the staged tiles rounded up to 1 KiB; the generated source
  // static_asserts that both agree).
  int smem_bytes(const std::vector<Staged>& staged) const {
    const int BM = launch_.block_m, BN = launch_.block_n, Sn = static_cast<int>(scores_.size());
    int st = 0;
    for (const Staged& t : staged) st += (t.rows ? BM : 1) * (BN * t.elem_bytes + 16);
    st = (st + 1023) / 1024 * 1024;
    return static_cast<int>(Sn * BM * D_ * 2 +
                            2 * (Sn * BN * D_ * 2 + vbufs_.size() * BN * DVc_ * 2 + st));
  }
  // Staged tiles cost shared memory: of the candidates (in order), the ones that still leave
  // the blocks per SM that shared memory allows (budget_.per_sm, 1 KiB reserved per block) at
  // `min_blocks` (at least 2; or as many as without staged tiles, if fewer) and fit one block's
  // limit (budget_.per_block); at most kMaxStaged.
  std::vector<Staged> fit_staged(int min_blocks) const {
    auto blocks = [this](int bytes) { return std::min(32, budget_.per_sm / (bytes + 1024)); };
    const int want = std::min(blocks(smem_bytes({})), std::max(min_blocks, 2));
    std::vector<Staged> kept;
    for (const Staged& c : candidates_) {
      if (kept.size() == kMaxStaged) break;
      kept.push_back(c);
      const int bytes = smem_bytes(kept);
      if (blocks(bytes) < want || bytes > budget_.per_block) kept.pop_back();
    }
    return kept;
  }

  int mw_ = 1, vsplit_ = 1;
  int64_t DVc_ = 0;  // value columns per block (DV_ / vsplit_)
  bool skip_ = false;
  std::set<int> hoisted_;  // nodes computed once per block in make_ctx (analyse: find_hoisted)

  // ---- element code ----
  std::string buf(int b) const { return "ctx.B" + S(b); }
  std::string stride(int b, size_t i) const { return "ctx.s" + S(b) + "_" + S(i); }
  std::string extent(int d) const {
    if (d == cdim_) return S(D_);
    if (d == vdim_) return S(DV_);
    return "ctx.n" + S(d);
  }
  // A context: `idx` names the index of row/red/value dims; `acc` maps accumulators.
  // Values over parallel dims only (slope[h], a scalar weight, a per-head bias) are the same
  // for every element of a block: computed once in make_ctx and read from Ctx (no per-element
  // loads; the compiler cannot hoist loads across the loop's shared-memory asm).
  bool hoistable(int id) const {
    const Node& n = N(id);
    if (n.op == Op::Const || n.op == Op::Index || n.op == Op::Size) return false;
    for (int d : n.dims)
      if (!is_par(d)) return false;
    // Only inline element code over inputs: reductions and the kernel's own arrays (running
    // maxima, row sums of the key loop) are not known in make_ctx.
    std::set<int> anc;
    ancestors(id, anc);
    bool reads = false;
    for (int a : anc) {
      const PlanValue* v = k_.value(a);
      if (is_reduction(N(a).op) || !v || !v->inlined || v->load_buffer >= 0) return false;
      reads = reads || N(a).op == Op::Param || N(a).op == Op::Gather;
    }
    return reads;
  }
  // The values make_ctx computes once per block: the hoistable nodes the element code reaches
  // first (the element emitter stops at them) from what it prints with hoisting on, the groups'
  // scores and the stored values; scores and accumulators are read, not expanded.
  void find_hoisted() {
    std::set<int> seen;
    std::vector<int> stack;
    for (const Group& g : groups_) stack.push_back(g.arg);
    for (int b : k_.writes) stack.push_back(plan_.buffers[b].node);
    while (!stack.empty()) {
      const int id = stack.back();
      stack.pop_back();
      if (!seen.insert(id).second) continue;
      const PlanValue* v = k_.value(id);
      if (!v || v->load_buffer >= 0) continue;
      if (hoistable(id)) {
        hoisted_.insert(id);
        continue;
      }
      bool score = false;
      for (const Score& sc : scores_) score = score || sc.node == id;
      if (score || (is_acc(id) && !v->inlined)) continue;
      for (int a : N(id).args) stack.push_back(a);
    }
  }
  // The score code's read of a staged tile (param at index dims `dims`, which are the block's
  // parallel dims, m and n: find_staged), or "" when that read is not staged.
  std::string staged_read(int param, const std::vector<int>& dims) const {
    for (size_t t = 0; t < staged_.size(); ++t) {
      const Staged& st = staged_[t];
      if (st.param != param || st.arg_dims != dims) continue;
      const DType ty = p_.params[param].type;
      return load_element(ty, "fg::staged_at<" + storage_ctype(ty) + ">(tv.p[" + S(t) +
                                  "], fg::staged_pitch(" + S(st.elem_bytes) + ", kBlockN), " +
                                  (st.rows ? "m - tv.m0" : "0") + ", n - tv.n0)");
    }
    return "";
  }
  // `staged`: the score code, where tv (fg::TileView) locates the staged tiles.
  ElementContext context(std::function<std::string(int)> idx,
                         std::function<std::string(int)> acc, int assume_true,
                         ElementContext* self, bool hoist = true, bool staged = false) const {
    ElementContext c;
    c.assume_true = assume_true;
    c.err = "ctx.err";
    if (hoist)
      c.hoisted = [this](int node) -> std::string {
        return hoisted_.count(node) ? "ctx.h" + S(node) : "";
      };
    c.index = [this, idx](int d) {
      if (is_par(d)) return "ctx.g" + S(d);
      std::string s = idx(d);
      if (s.empty()) fail("element code needs the index of dim '" + p_.dims[d] + "' here");
      return s;
    };
    c.extent = [this](int d) { return extent(d); };
    c.local = [this, acc, self](int node) {
      for (size_t s = 0; s < scores_.size(); ++s)
        if (scores_[s].node == node) return "c[" + S(s) + "]";
      if (is_acc(node)) {
        std::string a = acc(node);
        if (a.empty()) fail("accumulator " + nt(node) + " is read inside the key loop");
        return a;
      }
      return "(" + em_.compute(node, *self) + ")";
    };
    c.param = [this, staged](int param, const std::vector<std::string>& idx) {
      if (staged) {
        std::string st = staged_read(param, p_.params[param].dims);
        if (!st.empty()) return st;
      }
      int b = buffer_of_param(param);
      std::string off = "0";
      for (size_t i = 0; i < idx.size(); ++i) off += " + (" + idx[i] + ") * " + stride(b, i);
      return load_element(plan_.buffers[b].type, buf(b) + "[" + off + "]");
    };
    c.gather = [this, staged](int node, int param, const std::vector<std::string>& idx) {
      bool plain = true;  // staged reads stand for gathers by plain dim indices only
      for (int a : N(node).args) plain = plain && N(a).op == Op::Index;
      if (staged && plain) {
        std::string st = staged_read(param, arg_dims(node));
        if (!st.empty()) return st;
      }
      std::string a;
      for (const auto& e : idx) a += ", " + e;
      return "G" + S(buffer_of_param(param)) + "(ctx" + a + ")";
    };
    c.load = [this](int, int node) -> std::string { fail("load of " + nt(node)); };
    return c;
  }

  // The score of group g with its outermost positive constant factored into *scale.
  std::string scaled(int id, const ElementContext& c, std::string* scale) const {
    const Node& n = N(id);
    if (id != c.assume_true && n.op == Op::Where && is_const(p_, n.args[2], -INFINITY))
      return "(((bool)(" + em_.value(n.args[0], c) + ")) ? " + scaled(n.args[1], c, scale) +
             " : fg::neg_inf())";
    auto pos_uniform = [&](int a) {
      const Node& x = N(a);
      if (!x.dims.empty() || is_integer(x.type) || x.type == DType::boolean) return false;
      if (x.op == Op::Const) return x.value > 0 && std::isfinite(x.value);
      if (x.op == Op::Sqrt) {
        const Node& y = N(x.args[0]);
        return y.op == Op::Size || (y.op == Op::Const && y.value > 0 && std::isfinite(y.value));
      }
      return false;
    };
    if (n.op == Op::Div && pos_uniform(n.args[1]) && !is_integer(n.type)) {
      *scale += " / (float)(" + em_.value(n.args[1], c) + ")";
      return scaled(n.args[0], c, scale);
    }
    if (n.op == Op::Mul && !is_integer(n.type)) {
      for (int i = 0; i < 2; ++i)
        if (N(n.args[i]).op == Op::Const && pos_uniform(n.args[i])) {
          *scale += " * (float)(" + em_.value(n.args[i], c) + ")";
          return scaled(n.args[1 - i], c, scale);
        }
    }
    return "((float)(" + em_.value(id, c) + "))";
  }

  // The type fg::warp_range bounds a parameter's values in: its own, exactly (bool and i32 as
  // int, bf16/f16/f8/f32 as float, i64/f64 as double).
  std::string range_type(int param) const {
    switch (p_.params[param].type) {
      case DType::boolean: case DType::i32: return "int";
      case DType::i64: case DType::f64: return "double";
      default: return "float";
    }
  }
  // Data in the mask (doc[m] == doc[n]; which gathers: data_range_gathers, shared with the CPU)
  // is bounded over the tile by the min and max of the values it reads there (fg::warp_range:
  // one warp-strided pass), so tiles between different documents are skipped and tiles inside
  // one document skip the mask, for any data (sorted ids only make it effective). Everything
  // else stays unknown. Over the keys: a pass over <= 1024 elements per classify call; over the
  // rows, which are the block's for every call, one pass per block (block_rows, into Ctx).
  std::string data_ranges(const std::string& indent) const {
    std::ostringstream os;
    for (const DataRange& dr : data_ranges_) {
      if (dr.over == k_.row_dim) continue;
      os << indent << "double r" << dr.node << "lo, r" << dr.node << "hi;  // "
         << node_text(p_, dr.node) << " over the tile\n"
         << indent << range_pass(dr.node, dr.over, "n0", "n1", "r" + S(dr.node)) << "\n";
    }
    return os.str();
  }
  // One fg::warp_range call: gather `id` over [i0, i1) of dim `over` into <out>lo, <out>hi.
  std::string range_pass(int id, int over, const std::string& i0, const std::string& i1,
                         const std::string& out) const {
    const Node& n = N(id);
    std::string args;
    for (int a : n.args)
      args += N(a).dim == over ? ", (int64_t)i" : ", (int64_t)ctx.g" + S(N(a).dim);
    const std::string T = range_type(n.param);
    return "fg::warp_range<" + T + ">([&](int i) { return (" + T + ")G" +
           S(buffer_of_param(n.param)) + "(ctx" + args + "); }, " + i0 + ", " + i1 + ", " + out +
           "lo, " + out + "hi);";
  }

  std::string classify_code() const {
    std::ostringstream os;
    os << "  static __device__ int classify(const Ctx& ctx, int m0, int m1, int n0, int n1) {\n";
    os << "    (void)ctx; (void)m0; (void)m1; (void)n0; (void)n1;\n";
    if (k_.tiles.mask < 0 || (!k_.tiles.skip_empty && !k_.tiles.unmasked_full)) {
      os << "    return " << (k_.tiles.mask < 0 ? "fg::kTileFull" : "fg::kTilePartial")
         << ";\n  }\n";
      return os.str();
    }
    IntervalTarget t;
    t.indent = "    ";
    t.leaf = [&](int id) -> std::optional<std::pair<std::string, std::string>> {
      const Node& n = N(id);
      bool boolean = n.type == DType::boolean;
      switch (n.op) {
        case Op::Const: {  // the value of the node's type (an f32 constant rounded to f32)
          if (boolean) return std::make_pair(std::string(n.value != 0 ? "1.0" : "0.0"),
                                             std::string(n.value != 0 ? "1.0" : "0.0"));
          if (is_float(n.type) && n.type != DType::f32) return std::nullopt;  // unknown
          std::string v = "(double)" + em_.literal(n.value, n.type);
          return std::make_pair(v, v);
        }
        case Op::Size: return std::make_pair("(double)" + extent(n.dim), "(double)" + extent(n.dim));
        case Op::Index: {
          int d = n.dim;
          if (d == k_.row_dim) return std::make_pair(std::string("(double)m0"), std::string("(double)(m1 - 1)"));
          if (d == k_.red_dim) return std::make_pair(std::string("(double)n0"), std::string("(double)(n1 - 1)"));
          if (is_par(d)) return std::make_pair("(double)ctx.g" + S(d), "(double)ctx.g" + S(d));
          return std::make_pair(std::string("0.0"), "(double)(" + extent(d) + " - 1)");
        }
        case Op::Gather:
          if (ranged_.count(id)) {
            const std::string r = (row_ranged_.count(id) ? "ctx.r" : "r") + S(id);
            return std::make_pair(r + "lo", r + "hi");
          }
          return std::nullopt;
        default: return std::nullopt;
      }
    };
    os << data_ranges(t.indent);
    os << emit_interval_bounds(p_, k_.tiles.mask, t);
    auto lo = interval_lo;
    auto hi = interval_hi;
    int m = k_.tiles.mask;
    if (k_.tiles.skip_empty) os << "    if (" << hi(m) << " == 0.0) return fg::kTileEmpty;\n";
    if (k_.tiles.unmasked_full) os << "    if (" << lo(m) << " == 1.0) return fg::kTileFull;\n";
    os << "    return fg::kTilePartial;\n  }\n";
    return os.str();
  }

  std::string source() const {
    const int Sn = static_cast<int>(scores_.size()), G = static_cast<int>(groups_.size());
    const int V = static_cast<int>(vbufs_.size()), A = static_cast<int>(pv_.size());
    const int NB = launch_.num_buffers, R = launch_.max_rank, ND = launch_.num_dims;
    std::ostringstream os;
    os << "// Generated by flashgen: kernel " << k_.name << " of program " << p_.name
       << ", CUDA sm80 path (mma.sync; also runs on Hopper compiled for sm_90a).\n";
    os << "// Head dims compiled in:";
    for (const auto& [n, e] : launch_.head_dims) os << " " << n << "=" << e;
    os << "; every other extent is a run-time value in Params.\n";
    os << "#include \"fg_attn_sm80.cuh\"\n";
    os << T_.prelude << "\n";
    os << "struct Params {\n  const void* buf[" << NB << "];\n  int64_t st[" << NB << "][" << R
       << "];\n  int64_t ext[" << ND << "];\n  int64_t* err;\n};\n\n";
    os << "struct Spec {\n";
    os << "  static constexpr int kNumScores = " << Sn << ", kNumGroups = " << G
       << ", kNumV = " << V << ", kNumAcc = " << A << ";\n";
    os << "  static constexpr int kHeadDim = " << D_ << ", kValueDim = " << DVc_
       << ", kWarps = 4, kWarpMBlocks = " << mw_ << ", kBlockN = " << launch_.block_n
       << ", kMinBlocks = " << launch_.min_blocks
       << ";\n";
    os << "  static constexpr bool kReverseM = " << (k_.tiles.mask >= 0 ? "true" : "false")
       << ", kSkipRescale = " << (skip_ ? "true" : "false") << ";\n";
    if (!staged_.empty()) {
      const int T = static_cast<int>(staged_.size());
      os << "  // staged gathers (fg::load_staged):";
      for (size_t t = 0; t < staged_.size(); ++t)
        os << (t ? "; " : " ") << node_text(p_, staged_[t].node);
      os << "\n  static constexpr int kNumStaged = " << T << ";\n";
      os << "  static constexpr __host__ __device__ int staged_elem_bytes(int t) { return ";
      for (int t = 0; t < T - 1; ++t) os << "t == " << t << " ? " << staged_[t].elem_bytes << " : ";
      os << staged_[T - 1].elem_bytes << "; }\n";
      os << "  static constexpr __host__ __device__ bool staged_rows(int t) { return ";
      for (int t = 0; t < T - 1; ++t)
        os << "t == " << t << " ? " << (staged_[t].rows ? "true" : "false") << " : ";
      os << (staged_[T - 1].rows ? "true" : "false") << "; }\n";
    }
    os << "  static constexpr __device__ int acc_group(int a) { return ";
    for (int a = 0; a < A - 1; ++a) os << "a == " << a << " ? " << pv_[a].group << " : ";
    os << pv_[A - 1].group << "; }\n";
    os << "  static constexpr __device__ int acc_v(int a) { return ";
    for (int a = 0; a < A - 1; ++a) os << "a == " << a << " ? " << pv_[a].vidx << " : ";
    os << pv_[A - 1].vidx << "; }\n";
    os << "  using Params = ::Params;\n";
    std::ostringstream bd;
    // gathers
    std::set<int> gathered;  // buffers whose read helper is printed
    for (const PlanValue& v : k_.values) {
      const Node& n = N(v.node);
      if (n.op != Op::Gather) continue;
      int b = buffer_of_param(n.param);
      if (!gathered.insert(b).second) continue;
      const Parameter& P = p_.params[n.param];
      bd << "  static __device__ " << em_.ctype(P.type == DType::i32 ? DType::i64 : P.type)
         << " G" << b << "(const Ctx& ctx";
      for (size_t i = 0; i < P.dims.size(); ++i) bd << ", int64_t i" << i;
      bd << ") {\n";
      std::string off = "0";
      const bool checked = !unchecked_.count(n.param);
      for (size_t i = 0; i < P.dims.size(); ++i) {
        if (checked)
          bd << "    if (i" << i << " < 0 || i" << i << " >= ctx.n" << P.dims[i]
             << ") { fg_report(ctx.err, 1, " << n.param << ", " << i << ", i" << i
             << "); return 0; }\n";
        off += " + i" + S(i) + " * ctx.s" + S(b) + "_" + S(i);
      }
      if (!checked) bd << "    // indices are dim indices: the host checked their extents\n";
      bd << "    return " << load_element(P.type, "ctx.B" + S(b) + "[" + off + "]") << ";\n  }\n";
    }
    bd << classify_code();
    if (!row_ranged_.empty()) {  // the rows' data ranges, once per block
      bd << "  static constexpr bool kBlockRows = true;\n"
            "  static __device__ void block_rows(Ctx& ctx, int m0, int m1) {\n";
      for (int id : row_ranged_)
        bd << "    " << range_pass(id, k_.row_dim, "m0", "m1", "ctx.r" + S(id)) << "\n";
      bd << "  }\n";
    }
    // scores
    std::vector<std::string> scale(G), masked(G), plain(G);
    for (int g = 0; g < G; ++g) {
      auto idx = [this](int d) -> std::string {
        if (d == k_.row_dim) return "m";
        if (d == k_.red_dim) return "n";
        return "";
      };
      auto noacc = [](int) { return std::string(); };
      ElementContext cm, cf;
      cm = context(idx, noacc, -1, &cm, true, /*staged=*/true);
      cf = context(idx, noacc, k_.tiles.unmasked_full ? k_.tiles.mask : -1, &cf, true,
                   /*staged=*/true);
      std::string sc1 = "", sc2 = "";
      masked[g] = scaled(groups_[g].arg, cm, &sc1);
      plain[g] = scaled(groups_[g].arg, cf, &sc2);
      scale[g] = sc1;
    }
    bd << "  template <int g>\n  static __device__ float score_scale(const Ctx& ctx) {\n"
          "    (void)ctx;\n";
    for (int g = 0; g < G; ++g)
      bd << "    if (g == " << g << ") return fg::kLog2e" << scale[g] << ";\n";
    bd << "    return fg::kLog2e;\n  }\n";
    bd << "  template <int g, bool kMasked>\n  static __device__ float score(const float (&c)["
       << Sn << "], int m, int n, const Ctx& ctx,\n                                 "
          "const fg::TileView& tv) {\n    (void)c; (void)m; (void)n; (void)ctx; (void)tv;\n";
    for (int g = 0; g < G; ++g) {
      bd << "    if (g == " << g << ") {\n      if (kMasked) return " << masked[g]
         << ";\n      return " << plain[g] << ";\n    }\n";
    }
    bd << "    return 0.f;\n  }\n";
    // stores
    auto acc_map = [this](int node) -> std::string {
      for (size_t a = 0; a < pv_.size(); ++a)
        if (pv_[a].node == node) return "oj[" + S(a) + "]";
      for (size_t g = 0; g < groups_.size(); ++g) {
        if (groups_[g].max_node == node) return "(st.mx[" + S(g) + "] * fg::kLn2)";
        for (int s : groups_[g].sums)
          if (s == node) return "st.l[" + S(g) + "]";
      }
      return "";
    };
    std::ostringstream st, sr, pairs, after;
    const std::string ebase = vsplit_ > 1 ? "ctx.vc * " + S(DVc_) + " + " : "";
    for (int b : k_.writes) {
      const PlanBuffer& B = plan_.buffers[b];
      bool per_e = std::find(B.dims.begin(), B.dims.end(), vdim_) != B.dims.end();
      auto idx = [this, per_e](int d) -> std::string {
        if (d == k_.row_dim) return "((int64_t)m)";
        if (per_e && d == vdim_) return "((int64_t)e)";
        return "";
      };
      ElementContext c;
      c = context(idx, acc_map, -1, &c);
      std::string off = "0";
      for (size_t i = 0; i < B.dims.size(); ++i)
        off += " + " + c.index(B.dims[i]) + " * ctx.s" + S(b) + "_" + S(i);
      std::string val = "(float)(" + em_.value(B.node, c) + ")";
      std::string conv = B.type == DType::bf16 ? "fg::f32_to_bf16(" + val + ")" : val;
      if (!per_e) {
        sr << "      ctx.B" << b << "[" << off << "] = " << conv << ";\n";
      } else if (B.type == DType::bf16 && B.dims.back() == vdim_) {
        // The runtime allocates outputs packed, so columns e, e+1 are adjacent: one 4-byte store.
        st << "      vals" << b << "[j] = " << val << ";\n";
        pairs << "    float vals" << b << "[2];\n";
        after << "    {\n      const int e = " << ebase << "e0;\n      fg::store_bf16x2(&ctx.B" << b << "[" << off
              << "], vals" << b << "[0], vals" << b << "[1]);\n    }\n";
      } else {
        st << "      ctx.B" << b << "[" << off << "] = " << conv << ";\n";
      }
    }
    bd << "  static __device__ void store(const Ctx& ctx, int m, int e0, const float (&o)[" << A
       << "][2], const fg::RowStats<" << G << ">& st) {\n"
       << "    (void)ctx; (void)m; (void)o; (void)st;\n" << pairs.str()
       << "#pragma unroll\n    for (int j = 0; j < 2; ++j) {\n      const int e = " << ebase
       << "e0 + j; (void)e;\n"
       << "      float oj[" << A << "];\n#pragma unroll\n      for (int a = 0; a < " << A
       << "; ++a) oj[a] = o[a][j];\n      (void)oj;\n"
       << st.str() << "    }\n" << after.str() << "  }\n";
    bd << "  static __device__ void store_row(const Ctx& ctx, int m, const fg::RowStats<" << G
       << ">& st) {\n    (void)ctx; (void)m; (void)st;\n    float oj[1] = {0.f}; (void)oj;\n"
       << (vsplit_ > 1 ? "    if (ctx.vc != 0) return;  // per-row values: chunk 0 writes them\n" : "")
       << sr.str() << "  }\n";
    // Ctx
    os << "  struct Ctx : fg::CtxBase<" << Sn << ", " << V << "> {\n";
    for (int d = 0; d < ND; ++d) os << "    int64_t n" << d << ";  // " << p_.dims[d] << "\n";
    for (int d : launch_.par_dims) os << "    int64_t g" << d << ";\n";
    if (vsplit_ > 1) os << "    int vc;  // value-column chunk: columns [vc, vc + 1) * " << DVc_ << "\n";
    for (int b = 0; b < NB; ++b) {
      const PlanBuffer& B = plan_.buffers[b];
      bool in = B.kind == PlanBuffer::Input;
      os << "    " << (in ? "const " : "") << storage_ctype(B.type) << "* B" << b << ";  // "
         << B.name << "\n";
      for (size_t i = 0; i < B.dims.size(); ++i) os << "    int64_t s" << b << "_" << i << ";\n";
    }
    for (int h : hoisted_) os << "    " << em_.ctype(N(h).type) << " h" << h << ";  // " << node_text(p_, h) << "\n";
    if (!staged_.empty()) os << "    fg::StagedSrc staged[" << staged_.size() << "];\n";
    for (int id : row_ranged_)
      os << "    double r" << id << "lo, r" << id << "hi;  // " << node_text(p_, id)
         << " over the block's rows (block_rows)\n";
    os << "    int64_t* err;\n  };\n";
    // num_parallel, make_ctx
    os << "  static __device__ int num_parallel(const Params& p) {\n    return (int)(" << vsplit_;
    for (int d : launch_.par_dims) os << " * p.ext[" << d << "]";
    os << ");\n  }\n";
    os << "  static __device__ void make_ctx(const Params& p, int par, Ctx& ctx) {\n";
    for (int d = 0; d < ND; ++d) os << "    ctx.n" << d << " = p.ext[" << d << "];\n";
    // 32-bit unsigned division: the host keeps P below 2^31 and parallel extents are at
    // most P (a 64-bit divide is a ~70-instruction routine, paid twice per block).
    os << "    unsigned rem = (unsigned)par; (void)rem;\n";
    if (vsplit_ > 1) os << "    ctx.vc = (int)(rem % " << vsplit_ << "u); rem /= " << vsplit_ << "u;\n";
    for (auto it = launch_.par_dims.rbegin(); it != launch_.par_dims.rend(); ++it)
      os << "    ctx.g" << *it << " = rem % (unsigned)ctx.n" << *it << "; rem /= (unsigned)ctx.n"
         << *it << ";\n";
    for (int b = 0; b < NB; ++b) {
      const PlanBuffer& B = plan_.buffers[b];
      bool in = B.kind == PlanBuffer::Input;
      os << "    ctx.B" << b << " = (" << (in ? "const " : "") << storage_ctype(B.type) << "*)p.buf["
         << b << "];\n";
      for (size_t i = 0; i < B.dims.size(); ++i)
        os << "    ctx.s" << b << "_" << i << " = p.st[" << b << "][" << i << "];\n";
    }
    os << "    ctx.err = p.err;\n";
    {
      ElementContext ch;
      ch = context([](int) { return std::string(); }, [](int) { return std::string(); }, -1, &ch,
                   /*hoist=*/false);
      for (int h : hoisted_)
        os << "    ctx.h" << h << " = " << em_.compute(h, ch) << ";\n";
    }
    os << "    ctx.M = (int)ctx.n" << k_.row_dim << "; ctx.N = (int)ctx.n" << k_.red_dim << ";\n";
    auto operand = [&](const char* f, int i, int b, int lead) {
      const PlanBuffer& B = plan_.buffers[b];
      std::string off = "0";
      std::string ld = "0";
      for (size_t j = 0; j < B.dims.size(); ++j) {
        if (is_par(B.dims[j])) off += " + ctx.g" + S(B.dims[j]) + " * ctx.s" + S(b) + "_" + S(j);
        if (B.dims[j] == lead) ld = "ctx.s" + S(b) + "_" + S(j);
        if (vsplit_ > 1 && lead == k_.red_dim && B.dims[j] == vdim_ && f == std::string("v"))
          off += " + (int64_t)ctx.vc * " + S(DVc_) + " * ctx.s" + S(b) + "_" + S(j);
      }
      os << "    ctx." << f << "[" << i << "] = (const fg::bf16raw*)ctx.B" << b << " + (" << off
         << ");\n    ctx." << f << "_ld[" << i << "] = " << ld << ";\n";
    };
    for (int s = 0; s < Sn; ++s) {
      operand("q", s, scores_[s].qbuf, k_.row_dim);
      operand("k", s, scores_[s].kbuf, k_.red_dim);
    }
    for (int i = 0; i < V; ++i) operand("v", i, vbufs_[i], k_.red_dim);
    for (size_t t = 0; t < staged_.size(); ++t) {
      const Staged& st = staged_[t];
      std::string off = "0", rs = "0", cs = "0";
      for (size_t i = 0; i < st.arg_dims.size(); ++i) {
        const int d = st.arg_dims[i];
        const std::string s = "ctx.s" + S(st.buffer) + "_" + S(i);
        if (d == k_.row_dim) rs = s + " * " + S(st.elem_bytes);
        else if (d == k_.red_dim) cs = s + " * " + S(st.elem_bytes);
        else off += " + ctx.g" + S(d) + " * " + s;
      }
      os << "    ctx.staged[" << t << "].base = (const unsigned char*)(ctx.B" << st.buffer << " + ("
         << off << "));\n    ctx.staged[" << t << "].row_stride = " << rs << ";\n    ctx.staged["
         << t << "].col_stride = " << cs << ";\n";
    }
    os << "  }\n";
    os << bd.str() << "};\n\n";
    os << "static_assert(fg::AttnSm80<Spec>::kSmemBytes == " << launch_.smem_bytes
       << ", \"the host launches with the emitter's shared-memory size\");\n";
    os << "extern \"C\" __global__ void __launch_bounds__(32 * Spec::kWarps, Spec::kMinBlocks)\n"
       << k_.name << "(const Params p) { fg::attn_fwd_sm80<Spec>(p); }\n";
    return os.str();
  }
};

}  // namespace

SmemBudget smem_budget(Target target) {
  if (target == Target::cuda_sm90) return {228 * 1024, 227 * 1024};
  return {164 * 1024, 163 * 1024};
}

CudaKernelSource emit_sm80_kernel(const Plan& plan, int kernel, Target target,
                                  const Extents& sizes, const SmemBudget& budget) {
  if (target == Target::cpu) throw BackendError("emit_sm80_kernel: target cpu is not CUDA");
  if (kernel < 0 || kernel >= plan.kernel_count())
    throw BackendError("emit_sm80_kernel: no kernel " + std::to_string(kernel));
  return Sm80Writer(plan, kernel, target, sizes, budget).write();
}

CudaKernelSource emit_sm80_kernel(const Plan& plan, int kernel, Target target,
                                  const Extents& sizes) {
  return emit_sm80_kernel(plan, kernel, target, sizes, smem_budget(target));
}

std::vector<std::string> cuda_head_dims(const Plan& plan) {
  std::vector<std::string> out;
  for (const PlanKernel& k : plan.kernels)
    for (int d : k.elim)
      if (std::find(out.begin(), out.end(), plan.program.dims[d]) == out.end())
        out.push_back(plan.program.dims[d]);
  return out;
}

}  // namespace flashgen
