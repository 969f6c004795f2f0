// The CUDA sm80-path printer (see emit_sm80.h): prints a lowered tensor-core kernel
// (lower/tensor_core.h: the structure, launch, staged tiles, hoisted values and data ranges are
// decided there) as the template's Spec: Params, make_ctx (parallel index -> grid dims ->
// buffer offsets by the buffers' own strides, so GQA and any layout fall out), classify() by
// interval arithmetic of the plan's tile mask over the tile's index box, score<g>() through the
// shared ElementEmitter with the CUDA table, and store()/store_row() from the plan's epilogue
// values.
// Preconditions: a plan from compile_program, the kernel lowered by lower_tensor_core.
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
#include "lower/tensor_core.h"
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

class Printer : public TensorCoreView {
 public:
  Printer(const Plan& plan, const TensorCoreKernel& tc, const std::vector<DType>& storage)
      : TensorCoreView(plan, tc.kernel), a_(tc), storage_(storage), T_(cuda_table(tc.target)),
        em_(plan, k_, T_) {
    if (storage_.size() != plan.buffers.size())
      throw BackendError("print_tensor_core: the device storage of " +
                         std::to_string(storage_.size()) + " buffers for a plan of " +
                         std::to_string(plan.buffers.size()));
  }

  std::string print() const { return source(); }

 private:
  using Score = TensorCoreKernel::Score;
  using Group = TensorCoreKernel::Group;
  using Acc = TensorCoreKernel::Acc;
  using Staged = TensorCoreKernel::Staged;
  const TensorCoreKernel& a_;
  const std::vector<DType>& storage_;  // LoweredCuda::storage
  const TargetTable& T_;
  ElementEmitter em_;
  // The lowered kernel's fields, under the names the printing below uses.
  const Sm80Launch& launch_ = a_.launch;
  const std::vector<Score>& scores_ = a_.scores;
  const std::vector<Group>& groups_ = a_.groups;
  const std::vector<int>& vbufs_ = a_.vbufs;
  const std::vector<Acc>& pv_ = a_.pv;
  const int& vdim_ = a_.vdim;
  const int64_t& D_ = a_.D;
  const int64_t& DV_ = a_.DV;
  const int64_t& DVc_ = a_.DVc;
  const int64_t& Dt_ = a_.Dt;
  const int64_t& DVt_ = a_.DVt;
  const int& mw_ = a_.mw;
  const int& vsplit_ = a_.vsplit;
  const bool& skip_ = a_.skip;
  const std::set<int>& unchecked_ = a_.unchecked;
  const std::vector<Staged>& staged_ = a_.staged;
  const std::set<int>& hoisted_ = a_.hoisted;
  const std::vector<int>& diagonal_ = a_.diagonal;
  const std::vector<int>& key_values_ = a_.key_values;
  const std::vector<DataRange>& data_ranges_ = a_.data_ranges;
  const std::set<int>& ranged_ = a_.ranged;
  const std::set<int>& row_ranged_ = a_.row_ranged;

  // ---- element code ----
  std::string buf(int b) const { return "ctx.B" + S(b); }
  std::string stride(int b, size_t i) const { return "ctx.s" + S(b) + "_" + S(i); }
  std::string extent(int d) const {
    for (const auto& sc : scores_)
      if (d == sc.dim) return S(sc.D);
    if (d == vdim_) return S(DV_);
    return "ctx.n" + S(d);
  }
  // The score code's read of a staged tile (param at index dims `dims`, which are the block's
  // parallel dims, m and n: find_staged), or "" when that read is not staged.
  // (param -1: the intermediate `buffer`, in its memory order)
  std::string staged_read(int param, const std::vector<int>& dims, int buffer = -1) const {
    const int t = a_.staged_tile(param, buffer, dims);
    if (t < 0) return "";
    const Staged& st = staged_[t];
    const DType ty = param >= 0 ? p_.params[param].type : storage_[buffer];
    return load_element(ty, "fg::staged_at<" + storage_ctype(ty) + ">(tv.p[" + S(t) +
                                "], fg::staged_pitch(" + S(st.elem_bytes) + ", tv.bn), " +
                                (st.rows ? "m - tv.m0" : "0") + ", n - tv.n0)");
  }
  // A context: `idx` names the index of row/red/value dims; `acc` maps accumulators.
  // `staged`: the score code, where tv (fg::TileView) locates the staged tiles.
  ElementContext context(std::function<std::string(int)> idx,
                         std::function<std::string(int)> acc, int assume_true,
                         ElementContext* self, bool hoist = true, bool staged = false) const {
    ElementContext c;
    c.assume_true = assume_true;
    c.err = "ctx.err";
    if (hoist)
      c.hoisted = [this, staged](int node) -> std::string {
        if (staged) {  // the score code: values per tile line from the tile's shared memory
          for (size_t t = 0; t < diagonal_.size(); ++t)
            if (diagonal_[t] == node)
              return "tv.dg[" + S(t) + " * tv.dpitch + (n - m) - tv.dbase]";
          for (size_t t = 0; t < key_values_.size(); ++t)
            if (key_values_[t] == node)
              return "tv.dg[" + S(diagonal_.size() + t) + " * tv.dpitch + (n - tv.n0)]";
        }
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
      // (staged reads stand for gathers by plain dim indices only)
      if (staged && TensorCoreKernel::by_dim_indices(p_, node)) {
        std::string st = staged_read(param, arg_dims(node));
        if (!st.empty()) return st;
      }
      std::string a;
      for (const auto& e : idx) a += ", " + e;
      return "G" + S(buffer_of_param(param)) + "(ctx" + a + ")";
    };
    // Intermediates: a cluster split's values (lower/split_clusters.cpp), read in the epilogue
    // at the row and value column being stored; a query's or a key's norm
    // (lower/cut_head_reductions.cpp), read by the score code too, from its staged tile where
    // the launch stages it.
    c.load = [this, c, staged](int b, int) -> std::string {
      const PlanBuffer& B = plan_.buffers[b];
      if (staged) {
        std::string st = staged_read(-1, B.dims, b);
        if (!st.empty()) return "((" + em_.ctype(B.type) + ")" + st + ")";
      }
      std::string off = "0";
      for (size_t i = 0; i < B.dims.size(); ++i)
        off += " + " + c.index(B.dims[i]) + " * ctx.s" + S(b) + "_" + S(i);
      return "((" + em_.ctype(B.type) + ")ctx.B" + S(b) + "[" + off + "])";
    };
    return c;
  }

  // A softmax group's score in the form lowering recognized (TensorCoreKernel::ScoreStep): its
  // masks around the rest, its factors into *scale.
  std::string scaled(const Group& g, const ElementContext& c, std::string* scale) const {
    std::string open, close;
    for (const TensorCoreKernel::ScoreStep& s : g.score_steps) {
      switch (s.kind) {
        case TensorCoreKernel::ScoreStep::mask:
          open += "(((bool)(" + em_.value(s.node, c) + ")) ? ";
          close = " : fg::neg_inf())" + close;
          break;
        case TensorCoreKernel::ScoreStep::divide:
          *scale += " / (float)(" + em_.value(s.node, c) + ")";
          break;
        case TensorCoreKernel::ScoreStep::multiply:
          *scale += " * (float)(" + em_.value(s.node, c) + ")";
          break;
      }
    }
    // (a Min accumulator's group: the running max of the negated scores)
    return open + (g.negate ? "(-(float)(" : "((float)(") + em_.value(g.score_rest, c) + "))" +
           close;
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
  // Data in the mask (doc[m] == doc[n]; which gathers: the plan's TileClasses::data_ranges)
  // is bounded over the tile by the min and max of the values it reads there (fg::warp_range:
  // one warp-strided pass), so tiles between different documents are skipped and tiles inside
  // one document skip the mask, for any data (sorted ids only make it effective). Everything
  // else stays unknown. Over the keys: a pass over a span's keys (at most 16 tiles) per classify
  // call; over the rows, which are the block's for every call, one pass per block (block_rows,
  // into Ctx).
  std::string data_ranges(const std::string& indent) const {
    std::ostringstream os;
    for (const DataRange& dr : data_ranges_) {
      if (dr.over == k_.row_dim) continue;
      if (dr.over < 0) {  // over the block's parallel dims only: one value (len[b], win)
        os << data_value_bounds(p_, dr.node,
                                data_read(dr.node, [](int d) { return "(int64_t)ctx.g" + S(d); }),
                                indent, node_text(p_, dr.node) + ", one value per block");
        continue;
      }
      os << indent << "double r" << dr.node << "lo, r" << dr.node << "hi;  // "
         << node_text(p_, dr.node) << " over the tile\n"
         << indent << range_pass(dr.node, dr.over, "n0", "n1", "r" + S(dr.node)) << "\n";
    }
    return os.str();
  }
  // The value of data read `id` (a gather by plain dim indices, or a parameter read by name)
  // at the indices index(dim) of its dims, as the element code reads it (not staged).
  std::string data_read(int id, const std::function<std::string(int)>& index) const {
    const ElementContext c = context(index, {}, -1, nullptr, false);
    std::vector<std::string> idx;
    for (int d : read_dims(p_, id)) idx.push_back(index(d));
    return N(id).op == Op::Gather ? c.gather(id, N(id).param, idx) : c.param(N(id).param, idx);
  }
  // One fg::warp_range call: data read `id` over [i0, i1) of dim `over` into <out>lo, <out>hi.
  // Printed unconditionally at the top of classify and block_rows: the warps ctx.rg names
  // compute each range together and meet at a barrier inside the call (the producer's four; one
  // warp, no barrier, where the producer's warps classify a unit each: kScanByWarps).
  std::string range_pass(int id, int over, const std::string& i0, const std::string& i1,
                         const std::string& out) const {
    const std::string T = range_type(N(id).param);
    const std::string v = data_read(id, [over](int d) {
      return d == over ? std::string("(int64_t)i") : "(int64_t)ctx.g" + S(d);
    });
    return "fg::warp_range<" + T + ">([&](int i) { return (" + T + ")" + v + "; }, " + i0 +
           ", " + i1 + ", " + out + "lo, " + out + "hi, ctx.rg);";
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
        case Op::Gather: case Op::Param:
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

  // Params buffer b: a plan buffer, or the pieces of a split operand (Sm80Launch::split).
  struct Slot {
    std::string ctype, name;
    size_t rank;
  };
  Slot slot(int b) const {
    if (b < static_cast<int>(plan_.buffers.size())) {
      const PlanBuffer& B = plan_.buffers[b];
      const bool in = B.kind == PlanBuffer::Input;
      if (B.kind == PlanBuffer::Intermediate)
        return {storage_ctype(storage_[b]), B.name, B.dims.size()};
      return {(in ? "const " : "") + storage_ctype(B.type), B.name, B.dims.size()};
    }
    for (const Sm80Launch::SplitOperand& o : launch_.split)
      if (o.slot == b)
        return {"const uint16_t", plan_.buffers[o.buffer].name + " in bf16 pieces", o.dims.size()};
    throw BackendError("print_tensor_core: Params buffer " + S(b) + " is no buffer");
  }

  std::string source() const {
    const int Sn = static_cast<int>(scores_.size()), G = static_cast<int>(groups_.size());
    const int V = static_cast<int>(vbufs_.size()), A = static_cast<int>(pv_.size());
    const int NB = launch_.num_buffers, R = launch_.max_rank, ND = launch_.num_dims;
    // blocks of some kernel take value-column chunks (Ctx::e_begin)
    const bool chunked = vsplit_ > 1 || launch_.few_value_split > 1;
    std::ostringstream os;
    os << "// Generated by flashgen: kernel " << k_.name << " of program " << p_.name
       << (launch_.wgmma ? ", CUDA sm90 path (wgmma on two warpgroups, a producer warpgroup; "
                           "the careful build and the few-rows kernel by mma.sync).\n"
                         : ", CUDA sm80 path (mma.sync; also runs on Hopper compiled for sm_90a).\n");
    os << "// Head dims compiled in:";
    for (const auto& [n, e] : launch_.head_dims) os << " " << n << "=" << e;
    os << "; every other extent is a run-time value in Params.\n";
    os << "#include \"fg_attn_sm80.cuh\"\n";
    os << T_.prelude << "\n";
    os << "struct Params {\n  const void* buf[" << NB << "];\n  int64_t st[" << NB << "][" << R
       << "];\n  int64_t ext[" << ND << "];\n  int64_t* err;\n  int64_t key_split;\n"
       << "  float* part;\n  int64_t m_tiles;\n";
    const int NTMA = static_cast<int>(launch_.tma.size());
    if (NTMA > 0)  // (the kernel parameter is __grid_constant__: TMA reads the maps in place)
      os << "  fg::TmaDesc tma[" << NTMA << "];  // K" << (V > 0 ? ", then V" : "")
         << " (5-dim maps)\n";
    os << "};\n";
    // the host's words (Sm80Launch::params_words): 8-byte fields without padding, then the maps
    // from the next 64-byte boundary
    os << "static_assert(sizeof(Params) == " << 8 * launch_.params_words()
       << (NTMA > 0 ? " && alignof(Params) == 64" : "")
       << ", \"Params as the host lays it out\");\n\n";
    os << "struct Spec {\n";
    os << "  using Elem = fg::" << (a_.elem == DType::f16 ? "F16" : "BF16") << ";\n";
    os << "  static constexpr int kNumScores = " << Sn << ", kNumGroups = " << G
       << ", kNumV = " << V << ", kNumAcc = " << A << ";\n";
    os << "  static constexpr int kHeadDim = " << Dt_ << ", kValueDim = " << DVc_
       << ", kWarps = " << launch_.warps << ", kWarpMBlocks = " << mw_
       << ", kBlockN = " << launch_.block_n
       << ", kMinBlocks = " << launch_.min_blocks
       << ";" << (A == 0 ? "  // (no P.V: a nominal kValueDim)" : "") << "\n";
    if (vsplit_ > 1)
      os << "  static constexpr int kValueSplit = " << vsplit_ << ";  // chunks of kValueDim\n";
    if (Dt_ != D_ || DVt_ != DV_)  // (a split value dim is never padded: its chunks are whole)
      os << "  static constexpr int kHeadDimData = " << D_ << ", kValueDimData = "
         << (vsplit_ > 1 ? DVc_ : DV_) << ";  // padded to " << Dt_ << " and " << DVt_ << "\n";
    // scores over head dims of their own: each one's columns (the tile is the widest's)
    bool own_dims = false;
    for (const auto& sc : scores_) own_dims = own_dims || sc.D != D_;
    if (own_dims) {
      os << "  static constexpr __host__ __device__ int score_dim_data(int s) { return ";
      for (int s = 0; s < Sn - 1; ++s) os << "s == " << s << " ? " << scores_[s].D << " : ";
      os << scores_[Sn - 1].D << "; }  // the columns of each score's Q and K\n";
    }
    os << "  static constexpr bool kKeySplit = true;\n";
    int plain_groups = 0;
    for (int g = 0; g < G; ++g) plain_groups |= (groups_[g].max_node < 0) << g;
    if (plain_groups)
      os << "  static constexpr int kPlainGroups = " << plain_groups
         << ";  // groups of plain sums (no running max)\n";
    int bare_groups = 0;
    for (int g = 0; g < G; ++g) bare_groups |= groups_[g].bare << g;
    if (bare_groups)
      os << "  static constexpr int kBareGroups = " << bare_groups
         << ";  // groups of a running max alone (no row sums, no P.V)\n";
    int weighted_groups = 0, weighed_sums = 0, read_scores = 0;
    for (int g = 0; g < G; ++g) {
      weighted_groups |= !groups_[g].pv_weight.empty() << g;
      weighed_sums |= groups_[g].weigh_sums << g;
      read_scores |= groups_[g].weight_reads_scores << g;
    }
    if (weighted_groups)
      os << "  static constexpr int kWeightedGroups = " << weighted_groups
         << ";  // groups whose P.V weighs the probabilities\n";
    if (weighed_sums)
      os << "  static constexpr int kWeighedSums = " << weighed_sums
         << ";  // ... and whose row sums take them weighted\n";
    if (read_scores)
      os << "  static constexpr int kWeightsReadScores = " << read_scores
         << ";  // ... whose weights read the scores\n";
    if (!launch_.split.empty())
      os << "  // Q, K and V as " << launch_.pieces << " bf16 pieces each (written by "
         << launch_.split_entry << ")\n  static constexpr int kPieces = " << launch_.pieces
         << ", kPiecePitchQK = " << D_ << ", kPiecePitchV = " << DV_ << ";\n";
    if (launch_.wgmma) os << "  static constexpr bool kWgmma = true;\n";
    if (launch_.wgmma && launch_.wgmma_n != 64)
      os << "  static constexpr int kWgmmaN = " << launch_.wgmma_n << ";\n";
    if (launch_.warp_specialized)
      os << "  static constexpr bool kWarpSpecialized = true;\n  static constexpr int kStages = "
         << launch_.stages << ";\n";
    if (launch_.warp_specialized && launch_.q_buffers != 1)
      os << "  static constexpr int kQBuffers = " << launch_.q_buffers
         << ";  // Q of item k in buffer k % kQBuffers\n";
    if (launch_.warp_specialized && launch_.diag_copies != 2)
      os << "  static constexpr int kDiagCopies = " << launch_.diag_copies
         << ";  // copies of the values per tile line\n";
    if (launch_.persistent && launch_.walk_entry.empty())
      os << "  static constexpr bool kPersistent = true;\n";
    if (launch_.scan_by_warps)
      os << "  static constexpr bool kScanByWarps = true;  // the producer's warps classify spans at once\n";
    if (launch_.warp_specialized && launch_.producer_regs != Sm80Launch::kProducerRegsDefault)
      os << "  static constexpr int kProducerRegs = " << launch_.producer_regs
         << ";  // the producer's registers (the compute warps take the rest)\n";
    if (launch_.checks_read_scores)
      os << "  static constexpr bool kChecksReadScores = true;  // score code only at real keys\n";
    if (launch_.clamp_keys)
      os << "  static constexpr bool kClampKeys = true;  // a padded key's score code at key N - 1\n";
    if (launch_.pipelined)
      os << "  static constexpr bool kPipelined = true, kPingPong = "
         << (launch_.ping_pong ? "true" : "false") << ";\n";
    // K/V by TMA; the build for calls whose tensors no map describes (FG_KV_CP_ASYNC) by cp.async
    if (NTMA > 0)
      os << "#ifdef FG_KV_CP_ASYNC\n  static constexpr bool kTma = false;\n#else\n"
         << "  static constexpr bool kTma = true;\n#endif\n";
    os << "  static constexpr bool kReverseM = " << (k_.tiles.mask >= 0 ? "true" : "false")
       << ", kSkipRescale = " << (skip_ ? "true" : "false") << ";\n";
    if (!staged_.empty()) {
      const int T = static_cast<int>(staged_.size());
      os << "  // staged reads (fg::load_staged):";
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
    // (no accumulator: functions the template names but never calls)
    os << "  static constexpr __device__ int acc_group(int a) { return ";
    for (int a = 0; a < A - 1; ++a) os << "a == " << a << " ? " << pv_[a].group << " : ";
    os << (A > 0 ? pv_[A - 1].group : 0) << "; }\n";
    os << "  static constexpr __device__ int acc_v(int a) { return ";
    for (int a = 0; a < A - 1; ++a) os << "a == " << a << " ? " << pv_[a].vidx << " : ";
    os << (A > 0 ? pv_[A - 1].vidx : 0) << "; }\n";
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
      const std::vector<bool> positions = gather_checked_positions(p_, n.param);
      for (size_t i = 0; i < P.dims.size(); ++i) {
        if (checked && positions[i]) {  // one unsigned comparison (extents are never negative)
          const bool proved = a_.proved.count({n.param, static_cast<int>(i)}) > 0;
          if (proved) bd << "#ifdef FG_CHECK_GATHERS  // else proved in range (the host checked its conditions)\n";
          bd << "    if ((uint64_t)i" << i << " >= (uint64_t)ctx.n" << P.dims[i]
             << ") { fg_report(ctx.err, 1, " << n.param << ", " << i << ", i" << i
             << "); return 0; }\n";
          if (proved) bd << "#endif\n";
        }
        off += " + i" + S(i) + " * ctx.s" + S(b) + "_" + S(i);
      }
      if (!checked) bd << "    // indices are dim indices: the host checked their extents\n";
      bd << "    return " << load_element(P.type, "ctx.B" + S(b) + "[" + off + "]") << ";\n  }\n";
    }
    // Spec::diagonals and Spec::key_values: the values per tile line, each function writing value
    // t of one line (a delta = n - m, or a key n) to d[t * pitch]
    auto line_values = [&](const std::vector<int>& values, const char* what, const char* of,
                           const char* count, const char* fn, const char* arg,
                           const ElementContext& ec) {
      if (values.empty()) return;
      bd << "  // values per " << what << " of a tile (fg::" << of << "):";
      for (size_t t = 0; t < values.size(); ++t)
        bd << (t ? "; " : " ") << node_text(p_, values[t]);
      bd << "\n  static constexpr int " << count << " = " << values.size() << ";\n"
         << "  static __device__ void " << fn << "(const Ctx& ctx, int " << arg
         << ", float* d, int pitch) {\n    (void)ctx; (void)pitch;\n";
      for (size_t t = 0; t < values.size(); ++t)
        bd << "    d[" << t << " * pitch] = (float)(" << em_.value(values[t], ec) << ");\n";
      bd << "  }\n";
    };
    auto none = [](int) { return std::string(); };
    ElementContext cd;  // (the deltas_ nodes read the diagonal's delta)
    cd = context(none, none, -1, &cd);
    const std::function<std::string(int)> hoisted = cd.hoisted;
    cd.hoisted = [this, hoisted](int node) -> std::string {
      auto it = a_.deltas.find(node);
      if (it != a_.deltas.end()) return it->second > 0 ? "delta" : "(-delta)";
      return hoisted(node);
    };
    line_values(diagonal_, "diagonal", "DiagOf", "kNumDiag", "diagonals", "delta", cd);
    ElementContext ck;  // (the key dim's index is the key n; these follow the diagonal values)
    ck = context([this](int d) { return d == k_.red_dim ? std::string("n") : std::string(); },
                 none, -1, &ck);
    line_values(key_values_, "key", "KeyValsOf", "kNumKeyVals", "key_values", "n", ck);
    bd << classify_code();
    if (!row_ranged_.empty()) {  // the rows' data ranges, once per block
      bd << "  static constexpr bool kBlockRows = true;\n"
            "  static __device__ void block_rows(Ctx& ctx, int m0, int m1) {\n";
      for (int id : row_ranged_)
        bd << "    " << range_pass(id, k_.row_dim, "m0", "m1", "ctx.r" + S(id)) << "\n";
      bd << "  }\n";
    }
    // scores, and the weights of a group's P.V: element code at (m, n), any element (cm) or,
    // for the scores, one the tile mask keeps (cf; with keep_pass the kernel applies the mask,
    // Spec::keep, to a partial tile's elements afterwards)
    auto idx = [this](int d) -> std::string {
      if (d == k_.row_dim) return "m";
      if (d == k_.red_dim) return "n";
      return "";
    };
    auto noacc = [](int) { return std::string(); };
    ElementContext cm, cf;
    cm = context(idx, noacc, -1, &cm, true, /*staged=*/true);
    cf = context(idx, noacc, launch_.keep_pass ? k_.tiles.mask : -1, &cf, true,
                 /*staged=*/true);
    std::vector<std::string> scale(G), plain(G);
    for (int g = 0; g < G; ++g) {
      if (groups_[g].max_node < 0) {  // a plain group's weights, as they are (kPlainGroups)
        plain[g] = "((float)(" + em_.value(groups_[g].arg, cf) + "))";
        continue;
      }
      plain[g] = scaled(groups_[g], cf, &scale[g]);
    }
    bd << "  template <int g>\n  static __device__ float score_scale(const Ctx& ctx) {\n"
          "    (void)ctx;\n";
    for (int g = 0; g < G; ++g)
      bd << "    if (g == " << g << ") return "
         << (groups_[g].max_node < 0 ? std::string("1.f") : "fg::kLog2e" + scale[g]) << ";"
         << (groups_[g].max_node < 0 ? "  // (a plain group: unused)" : "") << "\n";
    bd << "    return fg::kLog2e;\n  }\n";
    bd << "  template <int g>\n  static __device__ float score(const float (&c)[" << Sn
       << "], int m, int n, const Ctx& ctx,\n                                 "
          "const fg::TileView& tv) {\n    (void)c; (void)m; (void)n; (void)ctx; (void)tv;\n";
    for (int g = 0; g < G; ++g) bd << "    if (g == " << g << ") return " << plain[g] << ";\n";
    bd << "    return 0.f;\n  }\n";
    if (launch_.keep_pass)  // (else the score code holds the mask)
      bd << "  static constexpr bool kKeep = true;  // partial tiles: the tile mask afterwards\n"
            "  static __device__ bool keep(int m, int n, const Ctx& ctx, const fg::TileView& tv) {\n"
            "    (void)m; (void)n; (void)ctx; (void)tv;\n    return (bool)("
         << em_.value(k_.tiles.mask, cm) << ");\n  }\n";
    // the weights of a group's P.V (kWeightedGroups), factor by factor with the strong zero
    std::ostringstream weigh;
    for (int g = 0; g < G; ++g) {
      if (groups_[g].pv_weight.empty()) continue;
      std::string w;
      for (int f : groups_[g].pv_weight) {
        const std::string x = "(float)(" + em_.value(f, cm) + ")";
        w = w.empty() ? x : "fg_mul0(" + w + ", " + x + ")";
      }
      weigh << "    if (g == " << g << ") return " << w << ";\n";
    }
    if (!weigh.str().empty())
      bd << "  template <int g>\n  static __device__ float weight(const float (&c)[" << Sn
         << "], int m, int n, const Ctx& ctx, const fg::TileView& tv) {\n"
            "    (void)c; (void)m; (void)n; (void)ctx; (void)tv;\n"
         << weigh.str() << "    return 1.f;\n  }\n";
    // stores
    auto acc_map = [this](int node) -> std::string {
      for (size_t a = 0; a < pv_.size(); ++a)
        if (pv_[a].node == node) return "oj[" + S(a) + "]";
      for (size_t g = 0; g < groups_.size(); ++g) {
        if (groups_[g].max_node == node)
          return std::string(groups_[g].negate ? "(-" : "(") + "st.mx[" + S(g) + "] * fg::kLn2)";
        // (a count, an integer sum summed in f32: the integer it holds exactly)
        for (int s : groups_[g].sums)
          if (s == node)
            return is_float(N(s).type) ? "st.l[" + S(g) + "]"
                                       : "((" + em_.ctype(N(s).type) + ")st.l[" + S(g) + "])";
      }
      return "";
    };
    std::ostringstream st, sr, pairs, after;
    const std::string ebase = chunked ? "ctx.e_begin + " : "";
    // Intermediates the per-column stores read (another kernel's values): loaded by preload
    // into a Pre of the column pair, ahead of the stores (fg::PreOf).
    std::set<int> pre_bufs;
    // indices of the row being stored (m) and, per column, its value column (e)
    auto stored_at = [this](bool per_e) {
      return [this, per_e](int d) -> std::string {
        if (d == k_.row_dim) return "((int64_t)m)";
        if (per_e && d == vdim_) return "((int64_t)e)";
        return "";
      };
    };
    // a group's row sum is a divisor of the stores (o / l): its reciprocal once a row (RowStats)
    auto row_reciprocal = [this](int node) -> std::string {
      for (size_t g = 0; g < groups_.size(); ++g)
        for (int s : groups_[g].sums)
          if (s == node) return "st.rcp_l[" + S(g) + "]";
      return "";
    };
    for (int b : k_.writes) {
      const PlanBuffer& B = plan_.buffers[b];
      bool per_e = std::find(B.dims.begin(), B.dims.end(), vdim_) != B.dims.end();
      ElementContext c;
      c = context(stored_at(per_e), acc_map, -1, &c);
      c.reciprocal = row_reciprocal;
      if (per_e)
        c.load = [&pre_bufs](int lb, int) {
          pre_bufs.insert(lb);
          return "pre.x" + S(lb) + "[j]";
        };
      std::string off = "0";
      for (size_t i = 0; i < B.dims.size(); ++i)
        off += " + " + c.index(B.dims[i]) + " * ctx.s" + S(b) + "_" + S(i);
      std::string val = "(float)(" + em_.value(B.node, c) + ")";
      if (B.kind == PlanBuffer::Intermediate) {
        // another kernel reads it: the value as it is (a bf16 value already rounded), in the
        // element the device holds it in (LoweredCuda::storage)
        const std::string store = "ctx.B" + S(b) + "[" + off + "] = (" +
                                  storage_ctype(storage_[b]) + ")(" + em_.value(B.node, c) +
                                  ");\n";
        if (!per_e) sr << "      " << store;
        else st << "      " << (DV_ % 2 != 0 ? "if (e < " + S(DV_) + ") " : "") << store;
        continue;
      }
      const bool half = B.type == DType::bf16 || B.type == DType::f16;
      const char* hname = B.type == DType::bf16 ? "bf16" : "f16";
      std::string conv = half ? "fg::f32_to_" + std::string(hname) + "(" + val + ")" : val;
      if (is_integer(B.type))
        conv = "(" + storage_ctype(B.type) + ")(" + em_.value(B.node, c) + ")";
      if (!per_e) {
        sr << "      ctx.B" << b << "[" << off << "] = " << conv << ";\n";
      } else if (half && B.dims.back() == vdim_ && DV_ % 2 == 0) {
        // The runtime allocates outputs packed, so columns e, e+1 are adjacent: one 4-byte store.
        st << "      vals" << b << "[j] = " << val << ";\n";
        pairs << "    float vals" << b << "[2];\n";
        after << "    {\n      const int e = " << ebase << "e0;\n      fg::store_" << hname << "x2(&ctx.B" << b << "[" << off
              << "], vals" << b << "[0], vals" << b << "[1]);\n    }\n";
      } else {
        // An odd value dim: column e0 + 1 may be past it (and rows are not 4-byte aligned).
        st << "      " << (DV_ % 2 != 0 ? "if (e < " + S(DV_) + ") " : "") << "ctx.B" << b << "["
           << off << "] = " << conv << ";\n";
      }
    }
    // (the accumulators' array: one unused slot without accumulators, fg::AttnSm80::AS)
    const int AS = std::max(A, 1);
    const std::string store_args = "const Ctx& ctx, int m, int e0, const float (&o)[" + S(AS) +
                                   "][2], const fg::RowStats<" + S(G) + ">& st";
    if (!pre_bufs.empty()) {
      // The loads of preload, at the row and the column pair being stored.
      ElementContext c;
      c = context(stored_at(true), acc_map, -1, &c);
      bd << "  struct Pre {\n";
      for (int b : pre_bufs)
        bd << "    " << em_.ctype(plan_.buffers[b].type) << " x" << b << "[2];  // "
           << plan_.buffers[b].name << "\n";
      bd << "  };\n  static __device__ void preload(const Ctx& ctx, int m, int e0, Pre& pre) {\n"
         << "    (void)ctx; (void)m;\n#pragma unroll\n    for (int j = 0; j < 2; ++j) {\n"
         << "      const int e = " << ebase << "e0 + j; (void)e;\n";
      for (int b : pre_bufs)
        bd << "      pre.x" << b << "[j] = "
           << (DV_ % 2 != 0 ? "e >= " + S(DV_) + " ? 0 : " : "") << c.load(b, -1) << ";\n";
      bd << "    }\n  }\n";
      bd << "  static __device__ void store(" << store_args << ") {\n    Pre pre;\n"
         << "    preload(ctx, m, e0, pre);\n    store(ctx, m, e0, o, st, pre);\n  }\n";
    }
    bd << "  static __device__ void store(" << store_args
       << (pre_bufs.empty() ? "" : ", const Pre& pre") << ") {\n"
       << "    (void)ctx; (void)m; (void)o; (void)st;\n" << pairs.str()
       << "#pragma unroll\n    for (int j = 0; j < 2; ++j) {\n      const int e = " << ebase
       << "e0 + j; (void)e;\n"
       << "      float oj[" << AS << "];\n#pragma unroll\n      for (int a = 0; a < " << A
       << "; ++a) oj[a] = o[a][j];\n      (void)oj;\n"
       << st.str() << "    }\n" << after.str() << "  }\n";
    bd << "  static __device__ void store_row(const Ctx& ctx, int m, const fg::RowStats<" << G
       << ">& st) {\n    (void)ctx; (void)m; (void)st;\n    float oj[1] = {0.f}; (void)oj;\n"
       << (chunked ? "    if (ctx.e_begin != 0) return;  // per-row values: chunk 0 writes them\n" : "")
       << sr.str() << "  }\n";
    // Ctx
    os << "  struct Ctx : fg::CtxBase<" << Sn << ", " << V << "> {\n";
    for (int d = 0; d < ND; ++d) os << "    int64_t n" << d << ";  // " << p_.dims[d] << "\n";
    for (int d : launch_.par_dims) os << "    int64_t g" << d << ";\n";
    if (chunked) os << "    int e_begin;  // the block's first value column (its chunk's)\n";
    for (int b = 0; b < NB; ++b) {
      const Slot sl = slot(b);
      os << "    " << sl.ctype << "* B" << b << ";  // " << sl.name << "\n";
      for (size_t i = 0; i < sl.rank; ++i) os << "    int64_t s" << b << "_" << i << ";\n";
    }
    for (int h : hoisted_) os << "    " << em_.ctype(N(h).type) << " h" << h << ";  // " << node_text(p_, h) << "\n";
    if (!staged_.empty()) os << "    fg::StagedSrc staged[" << staged_.size() << "];\n";
    for (int id : row_ranged_)
      os << "    double r" << id << "lo, r" << id << "hi;  // " << node_text(p_, id)
         << " over the block's rows (block_rows)\n";
    if (NTMA > 0)
      os << "    int tma_c[" << NTMA << "][4];  // TMA coordinates: column offset, parallel dims\n";
    os << "    int64_t* err;\n  };\n";
    // num_parallel, make_ctx
    os << "  static __device__ int num_parallel(const Params& p) {\n    return (int)(1";
    for (int d : launch_.par_dims) os << " * p.ext[" << d << "]";
    os << ");\n  }\n";
    os << "  static __device__ void make_ctx(const Params& p, int par, int e_begin, Ctx& ctx) {\n"
       << "    (void)e_begin;\n";
    if (chunked) os << "    ctx.e_begin = e_begin;\n";
    for (int d = 0; d < ND; ++d) os << "    ctx.n" << d << " = p.ext[" << d << "];\n";
    // 32-bit unsigned division: the host keeps P below 2^31 and parallel extents are at
    // most P (a 64-bit divide is a ~70-instruction routine, paid twice per block).
    os << "    unsigned rem = (unsigned)par; (void)rem;\n";
    for (auto it = launch_.par_dims.rbegin(); it != launch_.par_dims.rend(); ++it)
      os << "    ctx.g" << *it << " = rem % (unsigned)ctx.n" << *it << "; rem /= (unsigned)ctx.n"
         << *it << ";\n";
    for (int b = 0; b < NB; ++b) {
      const Slot sl = slot(b);
      os << "    ctx.B" << b << " = (" << sl.ctype << "*)p.buf[" << b << "];\n";
      for (size_t i = 0; i < sl.rank; ++i)
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
    auto operand = [&](const char* f, int i, int src, int lead) {
      const PlanBuffer& B = plan_.buffers[src];
      int b = src;  // the buffer the tensor cores read: the source, or its pieces' slot
      for (const Sm80Launch::SplitOperand& o : launch_.split)
        if (o.buffer == src) b = o.slot;
      std::string off = "0";
      std::string ld = "0";
      for (size_t j = 0; j < B.dims.size(); ++j) {
        if (is_par(B.dims[j])) off += " + ctx.g" + S(B.dims[j]) + " * ctx.s" + S(b) + "_" + S(j);
        if (B.dims[j] == lead) ld = "ctx.s" + S(b) + "_" + S(j);
        if (chunked && lead == k_.red_dim && B.dims[j] == vdim_ && f == std::string("v"))
          off += " + (int64_t)e_begin * ctx.s" + S(b) + "_" + S(j);
      }
      os << "    ctx." << f << "[" << i << "] = (const fg::bf16raw*)ctx.B" << b << " + (" << off
         << ");\n    ctx." << f << "_ld[" << i << "] = " << ld << ";\n";
    };
    for (int s = 0; s < Sn; ++s) {
      operand("q", s, scores_[s].qbuf, k_.row_dim);
      operand("k", s, scores_[s].kbuf, k_.red_dim);
    }
    for (int i = 0; i < V; ++i) operand("v", i, vbufs_[i], k_.red_dim);
    for (int i = 0; i < NTMA; ++i) {
      const Sm80Launch::TmaOperand& t = launch_.tma[i];
      os << "    ctx.tma_c[" << i << "][0] = " << (t.value_chunk ? "e_begin" : "0") << ";";
      for (size_t j = 2; j < 5; ++j)
        os << " ctx.tma_c[" << i << "][" << j - 1 << "] = "
           << (j < t.dims.size() ? "(int)ctx.g" + S(t.dims[j]) : "0") << ";";
      os << "\n";
    }
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
    // The entry points: all of them by default (an ahead-of-time cubin); the runtime compiles the
    // full kernel and the combine kernel with FG_ONLY_MAIN at load, a walking kernel of its own
    // (Sm80Launch::walk_entry) with FG_ONLY_WALK at the first call that walks, the few-rows
    // kernel with FG_ONLY_FEW at the first call of at most 16 rows (each is most of a
    // compile's time).
    // (TMA reads its maps from the kernel parameter in place)
    const std::string P = NTMA > 0 ? "(const __grid_constant__ Params p)" : "(const Params p)";
    os << "#if !defined(FG_ONLY_FEW) && !defined(FG_ONLY_WALK)\n"
       << "static_assert(fg::AttnSm80<Spec>::kSmemBytes == " << launch_.smem_bytes
       << ", \"the host launches with the emitter's shared-memory size\");\n";
    os << "extern \"C\" __global__ void __launch_bounds__(32 * Spec::kWarps, Spec::kMinBlocks)\n"
       << k_.name << P << " { fg::attn_fwd_sm80<Spec>(p); }\n\n";
    os << "// Merges the partial states of a key loop split across blocks.\n"
       << "extern \"C\" __global__ void __launch_bounds__(128)\n" << launch_.combine_entry
       << P << " { fg::attn_combine_sm80<Spec>(p); }\n";
    if (!launch_.split.empty())
      os << "\n// Q, K and V into bf16 pieces (Spec::kPieces), before the kernel.\n"
         << "extern \"C\" __global__ void __launch_bounds__(256)\n" << launch_.split_entry
         << "(const fg::SplitArgs a) { fg::split_pieces(a); }\n";
    os << "#endif\n\n";
    if (!launch_.walk_entry.empty())
      os << "#if !defined(FG_ONLY_MAIN) && !defined(FG_ONLY_FEW)\n"
         << "// Calls of short key loops: the blocks resident at once walk the work items.\n"
         << "struct SpecWalk : Spec {\n  static constexpr bool kPersistent = true;\n"
         << "  static constexpr bool kPipelined = " << (launch_.walk_pipelined ? "true" : "false")
         << ", kPingPong = " << (launch_.walk_pipelined ? "true" : "false") << ";\n};\n"
         << "static_assert(fg::AttnSm80<SpecWalk>::kSmemBytes == " << launch_.smem_bytes
         << ", \"the host launches with the emitter's shared-memory size\");\n"
         << "extern \"C\" __global__ void __launch_bounds__(32 * Spec::kWarps, Spec::kMinBlocks)\n"
         << launch_.walk_entry << P << " { fg::attn_fwd_sm80<SpecWalk>(p); }\n#endif\n\n";
    os << "#if !defined(FG_ONLY_MAIN) && !defined(FG_ONLY_WALK)\n"
       << "// Calls of at most 16 rows (a decode step): one warp of 16 rows per block.\n"
       << "struct SpecFew : Spec {\n  static constexpr int kWarps = 1, kWarpMBlocks = 1, kBlockN = "
       << launch_.few_block_n << ";\n"
       << few_value_chunks()
       << (launch_.wgmma ? "  static constexpr bool kWgmma = false;\n" : "")
       << (launch_.warp_specialized
               ? "  static constexpr bool kWarpSpecialized = false;\n  static constexpr int kStages = 2;\n"
               : "")
       << (NTMA > 0 ? "  static constexpr bool kTma = false;\n" : "")
       << (launch_.persistent && launch_.walk_entry.empty()
               ? "  static constexpr bool kPersistent = false;\n"
               : "")
       << "};\n"
       << "static_assert(fg::AttnSm80<SpecFew>::kSmemBytes == " << launch_.few_smem_bytes
       << ", \"the host launches with the emitter's shared-memory size\");\n"
       << "extern \"C\" __global__ void __launch_bounds__(32)\n" << launch_.few_entry
       << P << " { fg::attn_fwd_sm80<SpecFew>(p); }\n"
       << "// Merges the partial states of the few-rows kernel's split key loops.\n"
       << "extern \"C\" __global__ void __launch_bounds__(128)\n" << launch_.few_combine_entry
       << P << " { fg::attn_combine_sm80<SpecFew>(p); }\n#endif\n";
    return os.str();
  }

  // SpecFew's value chunks where they differ from Spec's (Sm80Launch::few_value_split).
  std::string few_value_chunks() const {
    const int fvs = launch_.few_value_split;
    if (fvs == vsplit_) return "";
    std::ostringstream os;
    os << "  static constexpr int kValueDim = " << launch_.few_value_cols
       << ", kValueSplit = " << fvs << ";  // its own value split (" 
       << (fvs > 1 ? launch_.few_value_split_why : std::string("one chunk: at most 128 columns an accumulator, 128 registers in all")) << ")\n";
    if (Dt_ != D_ || DVt_ != DV_)  // (a split value dim is never padded)
      os << "  static constexpr int kValueDimData = " << (fvs > 1 ? launch_.few_value_cols : DV_)
         << ";\n";
    return os.str();
  }
};

}  // namespace

std::string print_tensor_core(const Plan& plan, const TensorCoreKernel& tc,
                              const std::vector<DType>& storage) {
  return Printer(plan, tc, storage).print();
}

}  // namespace flashgen
