// lower_tensor_core: a plan kernel lowered for the sm80 tensor-core template (lower/tensor_core.h):
// recognizes its structure (scores, softmax groups, row sums, P.V accumulators) from the plan's
// contractions and accumulators (the online sums' exp factors are the plan's), checks what the
// template takes, picks the launch shape and the value split, fits staged tiles to the
// device's shared memory, and finds the values computed once per block and the mask data
// bounded per tile.
// Preconditions: a classified plan; head-dim extents in `sizes`.
// Tests: tests/lower/lower_test.cpp, tests/cuda/nvrtc_examples_test.cpp.
#include "lower/tensor_core.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "flashgen/error.h"
#include "ir/index_range.h"
#include "passes/passes.h"

namespace flashgen {

namespace {

std::string S(int64_t v) { return std::to_string(v); }
std::string ratio_text(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

class Lowering : public TensorCoreView {
 public:
  Lowering(const Plan& plan, int kernel, const Extents& sizes, const SmemBudget& budget,
           TensorCoreKernel& out)
      : TensorCoreView(plan, kernel), out_(out), sizes_(sizes), budget_(budget) {}

  void run() {
    analyse();
    launch_.rows_per_warp = 16 * mw_;
    for (int h : hoisted_) launch_.hoisted.push_back(node_text(p_, h));
    Sm80Structure& st = launch_.structure;
    for (const Score& sc : scores_) st.scores.push_back({sc.node, sc.qbuf, sc.kbuf, sc.dim});
    st.groups = groups_;
    for (const Acc& a : pv_) st.pv.push_back({a.node, a.group, vbufs_[a.vidx]});
    st.value_dim = vdim_;
  }

 private:
  using Score = TensorCoreKernel::Score;
  using Group = TensorCoreKernel::Group;
  using ScoreStep = TensorCoreKernel::ScoreStep;
  using Acc = TensorCoreKernel::Acc;
  using Staged = TensorCoreKernel::Staged;
  TensorCoreKernel& out_;
  const Extents& sizes_;
  const SmemBudget budget_;
  std::set<DType> operand_types_;  // of every Q, K and V operand
  // The lowered kernel's fields, under the names the rules below use.
  Sm80Launch& launch_ = out_.launch;
  std::vector<Score>& scores_ = out_.scores;
  std::vector<Group>& groups_ = out_.groups;
  std::vector<int>& vbufs_ = out_.vbufs;
  std::vector<Acc>& pv_ = out_.pv;
  int& cdim_ = out_.cdim;
  int& vdim_ = out_.vdim;
  int64_t& D_ = out_.D;
  int64_t& DV_ = out_.DV;
  int64_t& DVc_ = out_.DVc;
  int64_t& Dt_ = out_.Dt;
  int64_t& DVt_ = out_.DVt;
  int& mw_ = out_.mw;
  int& vsplit_ = out_.vsplit;
  bool& skip_ = out_.skip;
  std::set<int>& unchecked_ = out_.unchecked;
  std::vector<Staged>& candidates_ = out_.candidates;
  std::vector<Staged>& staged_ = out_.staged;
  std::vector<int>& diagonal_ = out_.diagonal;
  std::vector<int>& key_values_ = out_.key_values;
  std::set<int>& hoisted_ = out_.hoisted;
  std::vector<DataRange>& data_ranges_ = out_.data_ranges;
  std::set<int>& ranged_ = out_.ranged;
  std::set<int>& row_ranged_ = out_.row_ranged;

  // whether d is the head dim some score contracts
  bool score_dim(int d) const {
    for (const Score& sc : scores_)
      if (sc.dim == d) return true;
    return false;
  }
  int64_t head_extent(int d) const {
    auto it = sizes_.find(p_.dims[d]);
    if (it == sizes_.end())
      throw BackendError("the CUDA target specializes head dims: give the extent of '" +
                         p_.dims[d] + "' (e.g. --sizes " + p_.dims[d] + "=64)");
    return it->second;
  }
  // A float parameter load over (grid dims..., `lead`, `inner`) with `inner` innermost
  // (choose_pieces decides how its type reaches the tensor cores).
  int operand_buffer(int node, int lead, int inner, const char* role) {
    const Node& n = N(node);
    if (n.op != Op::Param) fail(std::string(role) + " operand " + nt(node) + " is not a parameter");
    const Parameter& P = p_.params[n.param];
    if (pieces_of(P.type) == 0)
      fail(std::string(role) + " '" + P.name + "' is " + dtype_name(P.type) +
           "; the tensor-core path takes float operands");
    operand_types_.insert(P.type);
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

  // The index in vbufs_ of value operand v (value dim vd) of P.V accumulator acc, added on first
  // use; every P.V accumulator has the same value dim.
  int value_tensor(int acc, int v, int vd) {
    if (vd < 0) fail("value of " + nt(acc) + " has no head dim");
    if (vdim_ >= 0 && vd != vdim_) fail("P.V accumulators over different value dims");
    vdim_ = vd;
    const int vb = operand_buffer(v, k_.red_dim, vdim_, "value");
    for (size_t i = 0; i < vbufs_.size(); ++i)
      if (vbufs_[i] == vb) return static_cast<int>(i);
    vbufs_.push_back(vb);
    return static_cast<int>(vbufs_.size()) - 1;
  }

  void analyse() {
    if (k_.red_dim < 0) fail("it has no streamed reduction dim");
    if (k_.row_dim < 0) fail("it has no row dim");
    // Data the classifier bounds per tile (the plan's data ranges that decide tiles; the
    // producer's registers and scan below depend on them).
    data_ranges_ = deciding_data_ranges(p_, k_.tiles);
    for (const DataRange& dr : data_ranges_) {
      ranged_.insert(dr.node);
      if (dr.over == k_.row_dim) row_ranged_.insert(dr.node);
    }
    // Scores: contractions over one eliminated dim.
    for (const PlanValue& v : k_.values) {
      if (!v.contraction) continue;
      const Node& n = N(v.node);
      if (n.reduce.size() != 1 || !dimset_contains(k_.elim, n.reduce[0]))
        fail("contraction " + nt(v.node) + " is not over one eliminated dim");
      // (each score contracts a head dim of its own or a shared one: the widest is cdim_, set
      // with the extents below)
      const int dim = n.reduce[0];
      const Node& mul = N(n.args[0]);
      if (mul.op != Op::Mul) fail("contraction " + nt(v.node) + " is not a sum of a product");
      int a = mul.args[0], b = mul.args[1];
      if (!dimset_contains(N(a).dims, k_.row_dim)) std::swap(a, b);
      Score s{v.node, operand_buffer(a, k_.row_dim, dim, "query"),
              operand_buffer(b, k_.red_dim, dim, "key"), dim};
      scores_.push_back(s);
    }
    if (scores_.empty()) {
      // (a sum of a product over a head dim whose operand is read through a gather, as K from a
      // paged cache: say which read keeps it off the tensor cores)
      for (const PlanValue& v : k_.values) {
        const Node& n = N(v.node);
        if (n.op != Op::Sum || !dimset_subset(n.reduce, k_.elim) || N(n.args[0]).op != Op::Mul)
          continue;
        for (int a : N(n.args[0]).args)
          if (N(a).op == Op::Gather && dimset_subset(n.reduce, N(a).dims))
            fail("the contraction " + nt(v.node) + " reads '" + p_.params[N(a).param].name +
                 "' through a gather (" + nt(a) +
                 "): the tensor-core path takes its query and key operands as tensors read "
                 "at their own dims");
      }
      fail("no tensor-core contraction (q.k over a head dim) feeds the loop");
    }
    // Groups: online Max over the key dim.
    for (const Accumulator& a : k_.accs) {
      const Node& n = N(a.node);
      if (n.reduce != DimSet{k_.red_dim})
        fail("accumulator " + nt(a.node) + " reduces more than the key dim");
      // (a group keeps its running max in log2 units, scaled by log2(e) and back by ln(2): a
      // float within an ulp, an integer not exactly)
      if ((a.op == Op::Max || a.op == Op::Min) && !is_float(n.type))
        fail(std::string(a.op == Op::Max ? "Max" : "Min") + " accumulator " + nt(a.node) +
             " is of " + dtype_name(n.type) + " (a group's running max is a float)");
      if (a.op == Op::Max) groups_.push_back({a.node, n.args[0], {}});
      if (a.op == Op::Min) {  // min(x) = -max(-x): a running max of the negated scores
        groups_.push_back({a.node, n.args[0], {}});
        groups_.back().negate = true;
      }
    }
    // Sums: row sums and P.V, of a softmax group (rescaled by its running max) or of a plain
    // group (no max: the weights are score element code as they are, e.g. sigmoid(s)).
    std::set<int> explained;
    // online sums of exp(x - max) times weights (empty: none) and a value tensor (-1: a row sum)
    struct OnlineSum { int node, max_node; std::vector<int> weight; int v; };
    std::vector<OnlineSum> online;
    // the plain group of weight w (made on first use)
    auto plain_group = [&](int w) {
      for (size_t i = 0; i < groups_.size(); ++i)
        if (groups_[i].max_node < 0 && groups_[i].arg == w) return static_cast<int>(i);
      groups_.push_back({-1, w, {}});
      return static_cast<int>(groups_.size()) - 1;
    };
    auto head_dims_of = [&](int id) {
      int hd = -1;
      for (int d : N(id).dims)
        if (dimset_contains(k_.elim, d)) hd = d;
      return hd;
    };
    for (const Accumulator& a : k_.accs) {
      if (a.op != Op::Sum) continue;
      const Node& n = N(a.node);
      int x = n.args[0];
      if (a.rescale_by.empty()) {
        // (the template sums weights in f32: an integer sum, exact on the other paths, only
        // where f32 holds it exactly: a count, sum(i64(c), n) of a bool c or sum(where(c, 1,
        // 0), n), is an integer of magnitude at most the key extent, exact in f32 up to 2^24
        // keys (Sm80Launch::count_keys_limit, checked at call time))
        if (!is_float(n.type)) {
          // (a count: a cast of a bool, or where(c, a, b) of constants a, b in {-1, 0, 1})
          auto unit = [&](int id) {
            return N(id).op == Op::Const && std::abs(N(id).value) <= 1 &&
                   N(id).value == std::floor(N(id).value);
          };
          const bool count = (N(x).op == Op::Cast && N(N(x).args[0]).type == DType::boolean) ||
                             (N(x).op == Op::Where && unit(N(x).args[1]) && unit(N(x).args[2]));
          if (!count)
            fail("sum " + nt(a.node) + " is of " + dtype_name(n.type) +
                 " (an integer sum other than a count of a bool)");
          launch_.count_keys_limit = int64_t{1} << 24;
        }
        if (head_dims_of(x) < 0) {  // a row sum of weights
          groups_[plain_group(x)].sums.push_back(a.node);
          continue;
        }
        const Node& m = N(x);
        if (m.op != Op::Mul) fail("sum " + nt(a.node) + " is neither w nor w * v");
        int w = m.args[0], v = m.args[1];
        if (head_dims_of(w) >= 0) std::swap(w, v);
        if (head_dims_of(w) >= 0 || N(v).op != Op::Param)
          fail("sum " + nt(a.node) + " is not weights times a value tensor");
        pv_.push_back({a.node, plain_group(w), value_tensor(a.node, v, head_dims_of(v))});
        explained.insert({x, v});
        continue;
      }
      if (a.rescale_by.size() != 1)
        fail("online sum " + nt(a.node) + " is rescaled by more than one running max");
      // The group of the running max the sum is rescaled by, and its exp(x - safe(max)) factor
      // (the plan's Accumulator: fuse recognized the one-pass form).
      int g = -1;
      for (size_t i = 0; i < groups_.size() && g < 0; ++i)
        if (groups_[i].max_node == a.rescale_by[0]) g = static_cast<int>(i);
      if (g < 0) fail("online sum " + nt(a.node) + " is rescaled by a max that is no group's");
      auto online_exp = [&](int id) {
        return std::find(a.exp_factors.begin(), a.exp_factors.end(), id) != a.exp_factors.end() &&
               N(N(id).args[0]).args[0] == groups_[g].arg;
      };
      // The summand's factors: exp(x - max) once, at most one value tensor (over a head dim)
      // and weights of the probabilities (score element code: key gates, a dropout mask).
      std::vector<int> factors, stack = {x}, weight;
      while (!stack.empty()) {
        const int f = stack.back();
        stack.pop_back();
        if (N(f).op == Op::Mul) {
          explained.insert(f);
          stack.push_back(N(f).args[1]);
          stack.push_back(N(f).args[0]);
        } else {
          factors.push_back(f);
        }
      }
      int e = -1, v = -1;
      for (int f : factors) {
        if (e < 0 && online_exp(f)) e = f;
        else if (head_dims_of(f) >= 0) {
          if (v >= 0) fail("online sum " + nt(a.node) + " multiplies two tensors over a head dim");
          v = f;
        } else {
          weight.push_back(f);
        }
      }
      if (e < 0) fail("online sum " + nt(a.node) + " does not sum exp(x - max) (times v)");
      std::sort(weight.begin(), weight.end());
      online.push_back({a.node, groups_[g].max_node, weight, v});
      explained.insert({x, e, N(e).args[0]});
      if (v >= 0) explained.insert(v);
    }
    // Groups of the online sums: one P operand a group (its probabilities times the group's
    // P.V weights), row sums of the probabilities or, all of them (weigh_sums), of the weighted
    // ones. The P.V first: each joins a group of its running max with its weights (a group
    // with no sums and no P.V yet takes any), or a new group of that max; then each row sum a
    // group of its max whose sums are weighed as it is, else a new group.
    auto group_of = [&](const OnlineSum& o) {
      // (an unweighted row sum prefers a group whose P.V is unweighted too, so that a weighted
      // row sum finds the weighted P.V's group free of unweighted sums)
      int found = -1, fallback = -1, empty = -1;
      for (size_t i = 0; i < groups_.size() && found < 0; ++i) {
        const Group& gr = groups_[i];
        if (gr.max_node != o.max_node) continue;
        const bool has_pv = std::any_of(pv_.begin(), pv_.end(),
                                        [&](const Acc& q) { return q.group == static_cast<int>(i); });
        if (!has_pv && gr.sums.empty()) {
          if (empty < 0) empty = static_cast<int>(i);
          continue;
        }
        const bool fits = o.v >= 0            ? gr.pv_weight == o.weight
                          : o.weight.empty() ? !gr.weigh_sums
                                             : gr.pv_weight == o.weight &&
                                                   (gr.weigh_sums || gr.sums.empty());
        if (!fits) continue;
        if (o.v >= 0 || !o.weight.empty() || gr.pv_weight.empty()) found = static_cast<int>(i);
        else if (fallback < 0) fallback = static_cast<int>(i);
      }
      int g = found >= 0 ? found : fallback >= 0 ? fallback : empty;
      if (g < 0) {
        int first = 0;
        while (groups_[first].max_node != o.max_node) ++first;
        groups_.push_back({o.max_node, groups_[first].arg, {}});
        g = static_cast<int>(groups_.size()) - 1;
      }
      Group& gr = groups_[g];
      if (o.v >= 0 || !o.weight.empty()) gr.pv_weight = o.weight;
      if (o.v < 0 && !o.weight.empty()) gr.weigh_sums = true;
      return g;
    };
    for (const OnlineSum& o : online)
      if (o.v >= 0) pv_.push_back({o.node, group_of(o), value_tensor(o.node, o.v, head_dims_of(o.v))});
    for (const OnlineSum& o : online)
      if (o.v < 0) groups_[group_of(o)].sums.push_back(o.node);
    if (groups_.empty()) fail("no reduction over the key dim of score element code");
    for (size_t g = 0; g < groups_.size(); ++g) {
      bool read = !groups_[g].sums.empty();
      for (const Acc& pv : pv_) read = read || pv.group == static_cast<int>(g);
      groups_[g].bare = groups_[g].max_node >= 0 && !read;
    }
    for (Group& g : groups_)
      if (g.max_node >= 0) score_form(g);
    // (no P.V accumulator: a kernel of the scores' row reductions alone, such as a logsumexp
    // or a maximum over the keys; no value tensor, no value dim: kNominalValueCols below)
    choose_pieces();
    // Every body value must be score element code or a recognized accumulator part. A P.V
    // weight is score element code of its own: it reads no accumulator and nothing the key
    // loop computes after the exp (the running max's safe form, the row sums); one that reads a
    // score is computed with the scores.
    std::set<int> score_code;
    for (Group& g : groups_) {
      ancestors(g.arg, score_code);
      for (int w : g.pv_weight) {
        std::set<int> below;
        ancestors(w, below);
        for (int id : below) {
          for (const Score& sc : scores_)
            if (sc.node == id) g.weight_reads_scores = true;
          const PlanValue* pv = k_.value(id);
          if (is_acc(id) || (pv && pv->phase != Phase::Body && pv->phase != Phase::Prologue))
            fail("the P.V weight " + nt(w) + " reads " + nt(id) + ", which the key loop "
                 "computes from its running state");
        }
        score_code.insert(below.begin(), below.end());
      }
    }
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
    // The scores' head dims: the tile is the widest's (D_, cdim_); a narrower score's columns
    // past its own read as 0 and its products stop there (the Spec's score_dim_data), which the
    // loads allow at a multiple of 8 columns.
    for (Score& sc : scores_) {
      sc.D = head_extent(sc.dim);
      if (sc.D > 256 || sc.D <= 0)
        fail("head dim " + p_.dims[sc.dim] + " = " + S(sc.D) +
             " (the tensor-core path takes 1 to 256)");
      if (cdim_ < 0 || sc.D > D_) cdim_ = sc.dim, D_ = sc.D;
    }
    for (const Score& sc : scores_)
      if (sc.D != D_ && sc.D % 8 != 0)
        fail("score " + nt(sc.node) + " contracts " + p_.dims[sc.dim] + " = " + S(sc.D) +
             " columns beside a score of " + S(D_) + " (a narrower score's columns: a multiple "
             "of 8)");
    for (const Score& sc : scores_)
      if (sc.D != D_ && launch_.pieces > 1)
        fail("operands in bf16 pieces beside scores over head dims of their own (" +
             p_.dims[cdim_] + ", " + p_.dims[sc.dim] + "): a row's pieces are one head dim apart");
    DV_ = vdim_ >= 0 ? head_extent(vdim_) : kNominalValueCols;
    // Head dims of any extent up to 256: the tiles are D and DV rounded up to a multiple of 32,
    // the columns past them read as 0 and are not stored.
    if (vdim_ >= 0 && (DV_ > 256 || DV_ <= 0))
      fail("value dim " + p_.dims[vdim_] + " = " + S(DV_) + " (the tensor-core path takes 1 to 256)");
    Dt_ = (D_ + 31) / 32 * 32;
    DVt_ = (DV_ + 31) / 32 * 32;
    for (int d : k_.elim)
      if (!score_dim(d) && d != vdim_) fail("eliminated dim '" + p_.dims[d] + "' is neither the "
                                         "score contraction dim nor the value dim");
    // Outputs: over (par..., row[, value dim]).
    for (int b : k_.writes) {
      const PlanBuffer& B = plan_.buffers[b];
      if (B.kind != PlanBuffer::Output && B.kind != PlanBuffer::Intermediate)
        fail("it writes buffer " + B.name);
      if (B.type != DType::bf16 && B.type != DType::f16 && B.type != DType::f32 &&
          !is_integer(B.type))
        fail("output " + B.name + " is " + dtype_name(B.type) +
             " (bf16, f16, f32, i32 or i64 on the tensor-core path)");
      for (int d : B.dims)
        if (d != k_.row_dim && d != vdim_ && !is_par(d))
          fail("output " + B.name + " has dim '" + p_.dims[d] + "'");
    }
    // Intermediates (another kernel's values) are read either over the grid, the row and the
    // value dim, by the epilogue (a cluster split's values: where they are stored), or over the
    // grid and the row or the key dim (a query's or a key's norm:
    // lower/cut_head_reductions.cpp), by the score code too.
    std::map<int, int> from_load;  // node -> the intermediate over the value dim it depends on
    for (const PlanValue& v : k_.values) {
      if (v.load_buffer < 0) continue;
      const PlanBuffer& B = plan_.buffers[v.load_buffer];
      // (buffer dims are in memory order)
      auto over = [&](int d) {
        return std::find(B.dims.begin(), B.dims.end(), d) != B.dims.end();
      };
      const bool per_value = over(vdim_);
      for (int d : B.dims)
        if (d != k_.row_dim && !is_par(d) && d != vdim_ && d != k_.red_dim)
          fail("it reads the intermediate " + B.name + " over dim '" + p_.dims[d] + "'");
      if (over(k_.red_dim) && (per_value || over(k_.row_dim)))
        fail("it reads the intermediate " + B.name + " over the key dim and the " +
             (per_value ? "value" : "row") + " dim (a matrix of the key loop's size)");
      if (per_value) from_load[v.node] = v.load_buffer;
    }
    for (const PlanValue& v : k_.values)
      for (int a : N(v.node).args) {
        auto it = from_load.find(a);
        if (it == from_load.end()) continue;
        if (v.phase == Phase::Body)
          fail("it reads the intermediate " + plan_.buffers[it->second].name + " (" + nt(a) +
               ") before the epilogue");
        from_load.emplace(v.node, it->second);
      }
    // Gathers by plain dim indices: checked once on the host (extents), not per element.
    std::map<int, bool> direct;
    for (const PlanValue& v : k_.values) {
      const Node& n = N(v.node);
      if (n.op != Op::Gather) continue;
      direct[n.param] = (direct.count(n.param) ? direct[n.param] : true) &&
                        TensorCoreKernel::by_dim_indices(p_, v.node);
    }
    for (const auto& [param, d] : direct)
      if (d) unchecked_.insert(param);
    for (const PlanValue& v : k_.values) {
      const Node& n = N(v.node);
      if (n.op != Op::Gather || !unchecked_.count(n.param)) continue;
      for (size_t i = 0; i < n.args.size(); ++i)
        launch_.gather_checks.push_back({n.param, static_cast<int>(i), N(n.args[i]).dim});
    }
    prove_gather_ranges();
    find_checks_reading_scores(score_code);
    find_hoisted();
    find_tile_values(score_code);
    find_keep_pass();
    find_staged(per_element_code());
    // Launch shape (tuning from bench/NOTES.md).
    const int Sn = static_cast<int>(scores_.size()), A = static_cast<int>(pv_.size());
    // Small heads (D + DV <= 64, e.g. Evoformer's d = 32) do little tensor-core work per score
    // element, so the element code and its latencies dominate: 16 rows per warp and 5 blocks
    // per SM (<= 102 registers) hide them better than 32 rows and 2 blocks (the A/B
    // measurements: bench/NOTES.md).
    // (not with operands in pieces: their tiles and fragments take pieces times the room)
    // (a kernel of no accumulator does less tensor-core work a score than any: its nominal value
    // tile does not count; and only where a 64-key tile's weights and the accumulators fit
    // what the measured kernel holds, kSmallHeadsRegs: 5 blocks leave no room for more)
    const int G = static_cast<int>(groups_.size());
    const int64_t value_tile = A > 0 ? DVt_ : 0;
    const bool small_heads = Dt_ + value_tile <= 64 && Sn == 1 && A <= 1 &&
                             launch_.pieces == 1 &&
                             mma_live_regs(Sn, G, A, 1, 64, value_tile) <= kSmallHeadsRegs;
    // (pieces: the P operands of every piece live through P.V: 16 rows a warp; 32 rows a warp
    // where a tile's scores or groups' weights and the accumulators fit mma_live_regs at two
    // blocks an SM)
    mw_ = (Sn == 1 && A <= 1 && DVt_ <= 128 && Dt_ <= 128 && !small_heads &&
           launch_.pieces == 1 && mma_live_regs(Sn, G, A, 2, 64, DVt_) <= 2 * kAccRegs)
              ? 2 : 1;
    // Value-column split: when the accumulators of all value columns would not fit the
    // registers (more than 128 f32 per thread), blocks take column chunks of the value dim
    // (a grid factor) and recompute the scores per chunk, as FA2 does for wide heads.
    vsplit_ = value_split_while([&](int vs) { return A * mw_ * (DVt_ / vs) / 2 > kAccRegs; });
    DVc_ = DVt_ / vsplit_;
    if (A * mw_ * DVc_ / 2 > kMaxAccRegs)
      fail(S(A) + " P.V accumulators would take " + S(A * mw_ * DVc_ / 2) +
           " registers a thread at the narrowest value chunk of " + S(DVc_) + " columns (at most " +
           S(kMaxAccRegs) + ")");
    launch_.value_split = vsplit_;
    if (vsplit_ > 1)
      launch_.value_split_why = "the accumulators of all value columns would not fit the registers";
    launch_.min_blocks = mw_ == 2 ? 2 : (small_heads ? 5 : 1);
    skip_ = Dt_ >= 96 || Sn >= 2;
    launch_.entry = k_.name;
    launch_.warps = 4;
    launch_.block_m = 16 * mw_ * 4;
    // The groups' weights of a key tile live beside the accumulators: keys in tiles of 32
    // where those of 64 would take more than kAccRegs registers a thread (before the rules
    // below, which read the key tile).
    if (max_weight_regs(Sn, G, mw_, launch_.block_n) > kAccRegs) launch_.block_n = 32;
    if (max_weight_regs(Sn, G, mw_, launch_.block_n) > kAccRegs)
      fail(S(G) + " groups: their weights of a tile of " + S(launch_.block_n) +
           " keys would take " + S(max_weight_regs(Sn, G, mw_, launch_.block_n)) +
           " registers a thread (at most " + S(kAccRegs) + ")");
    // Operands in pieces take pieces times the shared memory: keys in tiles of 32 when tiles
    // of 64 leave no room for one block.
    if (launch_.pieces > 1 && smem_bytes({}) > budget_.per_block) launch_.block_n = 32;
    // Pieces leave one block of 4 warps per SM: 8 warps a block (128 rows) where shared memory
    // holds them and every K/V tile splits evenly over 256 threads (without staged gathers,
    // whose tiles' split over the threads is not checked here).
    if (launch_.pieces > 1 && Dt_ * launch_.block_n / 8 % 256 == 0 &&
        DVc_ * launch_.block_n / 8 % 256 == 0 && candidates_.empty()) {
      launch_.warps = 8;
      launch_.block_m = 16 * mw_ * 8;
      if (smem_bytes({}) > budget_.per_block) {
        launch_.warps = 4;
        launch_.block_m = 16 * mw_ * 4;
      }
    }
    staged_ = fit_staged(launch_.min_blocks);
    // Small heads: staged tiles are worth more than a fifth block (bench/NOTES.md).
    if (small_heads && fit_staged(4).size() > staged_.size()) {
      launch_.min_blocks = 4;
      staged_ = fit_staged(4);
    }
    find_key_clamp();
    choose_wgmma(Sn, A);
    launch_.smem_bytes = smem_bytes(staged_, 0, 0, launch_.stages, launch_.warp_specialized, 0,
                                    launch_.diag_copies, launch_.q_buffers);
    // Flash-decoding: the few-rows variant (one warp of 16 rows per block, the same staged
    // tiles, keys in tiles of 64) and the combine kernel of split key loops; the host picks
    // both per call (choose_key_split).
    launch_.few_entry = k_.name + "_few";
    launch_.few_block_n = launch_.pieces > 1                            ? launch_.block_n
                          : max_weight_regs(Sn, G, 1, 64) > kAccRegs ? 32
                                                                      : 64;
    choose_few_value_split(A);
    launch_.few_smem_bytes =
        smem_bytes(staged_, 16, launch_.few_block_n, 2, false, launch_.few_value_cols);
    // One warp a block: shared memory (1 KiB reserved each) and the register file bound how
    // many are resident; the few-rows entry has no minimum-blocks bound, so at up to 255
    // registers a thread 65536 registers hold 8 one-warp blocks.
    launch_.few_blocks_per_sm =
        std::max(1, std::min(8, budget_.per_sm / (launch_.few_smem_bytes + 1024)));
    launch_.combine_entry = k_.name + "_combine";
    launch_.few_combine_entry = k_.name + "_few_combine";
    launch_.part_row = 2 * static_cast<int>(groups_.size()) + A * static_cast<int>(DVc_);
    launch_.few_part_row = 2 * static_cast<int>(groups_.size()) + A * launch_.few_value_cols;
    launch_.value_cols = static_cast<int>(DVc_);
    for (const Staged& t : staged_) launch_.staged.push_back(node_text(p_, t.node));
    launch_.row_dim = k_.row_dim;
    launch_.key_dim = k_.red_dim;
    for (int d : k_.grid)
      if (d != k_.row_dim) launch_.par_dims.push_back(d);
    launch_.num_buffers = static_cast<int>(plan_.buffers.size() + launch_.split.size());
    for (const PlanBuffer& B : plan_.buffers)
      launch_.max_rank = std::max<int>(launch_.max_rank, static_cast<int>(B.dims.size()));
    launch_.num_dims = static_cast<int>(p_.dims.size());
    launch_.head_dims.clear();
    for (const Score& sc : scores_) {
      bool seen = false;
      for (const auto& hd : launch_.head_dims) seen = seen || hd.first == p_.dims[sc.dim];
      if (!seen) launch_.head_dims.push_back({p_.dims[sc.dim], sc.D});
      launch_.score_dims += sc.D;
    }
    if (vdim_ >= 0 && !score_dim(vdim_)) launch_.head_dims.push_back({p_.dims[vdim_], DV_});
    launch_.num_acc = A;
    launch_.value_dim = DV_;
    launch_.mask_node = k_.tiles.mask;
    for (int id : diagonal_) launch_.diagonal.push_back(node_text(p_, id));
    for (int id : key_values_) launch_.key_values.push_back(node_text(p_, id));
    launch_.scan_by_warps = launch_.warp_specialized && keys_classified_by_data();
    // Whether the work items' work differs: a tile mask the interval rules decide for some tile
    // (by index arithmetic or the data a tile reads), so that items skip or unmask different
    // tiles (a per-pair mask tensor keep[m, n] decides none: every item computes every tile).
    launch_.items_differ = k_.tiles.mask >= 0 && (k_.tiles.skip_empty || k_.tiles.unmasked_full) &&
                           interval_undecided(p_, k_.tiles.mask, ranged_).empty();
    // Dims the device indexes with 32-bit ints: rows, keys, the grid, and every dim whose index
    // or size the element code reads (the emitter's int_range assumes them below 2^31).
    std::set<int> narrow = {k_.row_dim, k_.red_dim};
    narrow.insert(launch_.par_dims.begin(), launch_.par_dims.end());
    for (const Node& n : p_.nodes)
      if (n.op == Op::Index || n.op == Op::Size) narrow.insert(n.dim);
    launch_.int32_dims.assign(narrow.begin(), narrow.end());
  }

  // A softmax group's score form (TensorCoreKernel::ScoreStep): its masks and the positive
  // uniform factors that fold into the exp2 scale, peeled from the outside in.
  void score_form(Group& g) const {
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
    int id = g.arg;
    for (;;) {
      const Node& n = N(id);
      const PlanValue* v = k_.value(id);
      if (v && v->load_buffer >= 0) break;  // read from an intermediate, not computed here
      if (n.op == Op::Where && is_const(p_, n.args[2], g.negate ? INFINITY : -INFINITY)) {
        g.score_steps.push_back({ScoreStep::mask, n.args[0]});
        id = n.args[1];
        continue;
      }
      if (n.op == Op::Div && pos_uniform(n.args[1]) && !is_integer(n.type)) {
        g.score_steps.push_back({ScoreStep::divide, n.args[1]});
        id = n.args[0];
        continue;
      }
      if (n.op == Op::Mul && !is_integer(n.type)) {
        int c = -1;
        for (int i = 0; i < 2 && c < 0; ++i)
          if (N(n.args[i]).op == Op::Const && pos_uniform(n.args[i])) c = i;
        if (c >= 0) {
          g.score_steps.push_back({ScoreStep::multiply, n.args[c]});
          id = n.args[1 - c];
          continue;
        }
      }
      break;
    }
    g.score_rest = id;
  }

  // Computed gather indices proved in range (ir/index_range.h): a position of a parameter that
  // every gather of the kernel reads by its own dim's index or by a proved expression is not
  // checked per element; the proofs' extent conditions go to the launch, which the host checks
  // per call (a call that fails one runs the same kernels built with FG_CHECK_GATHERS, which
  // check every gather per element).
  void prove_gather_ranges() {
    std::map<std::pair<int, int>, std::vector<ExtentCondition>> conds;
    std::set<std::pair<int, int>> unproved;
    for (const PlanValue& v : k_.values) {
      const Node& n = N(v.node);
      if (n.op != Op::Gather || unchecked_.count(n.param)) continue;
      const std::vector<int>& pd = p_.params[n.param].dims;
      for (size_t i = 0; i < n.args.size(); ++i) {
        const std::pair<int, int> key{n.param, static_cast<int>(i)};
        const Node& a = N(n.args[i]);
        if (a.op == Op::Index && a.dim == pd[i]) continue;
        std::optional<std::vector<ExtentCondition>> c = prove_index_in_range(p_, n.args[i], pd[i]);
        if (!c) { unproved.insert(key); continue; }
        std::vector<ExtentCondition>& all = conds[key];
        for (const ExtentCondition& e : *c)
          if (std::find(all.begin(), all.end(), e) == all.end()) all.push_back(e);
      }
    }
    for (const auto& [key, cs] : conds) {
      if (unproved.count(key)) continue;
      out_.proved.insert(key);
      for (const ExtentCondition& e : cs)
        if (std::find(launch_.range_conditions.begin(), launch_.range_conditions.end(), e) ==
            launch_.range_conditions.end())
          launch_.range_conditions.push_back(e);
    }
    for (const ExtentCondition& e : launch_.range_conditions)
      launch_.range_condition_text.push_back(e.str(p_));
  }

  // Values per tile line: score code that depends on the row and key dims only through their
  // difference (a node n - m or m - n: deltas_) and otherwise on per-block values (parallel
  // dims, hoisted values, sizes, constants) has BM + BN - 1 distinct values in a BM x BN tile
  // (a diagonal value); score code that depends on the key and per-block values alone (a key
  // gate's sigmoid(g[n])) has BN (a key value). The template computes those once per tile into
  // shared memory (Spec::diagonals, Spec::key_values; the producer warpgroup where the kernel
  // is warp-specialized) and the score code reads them. Only worth it for code dearer than the
  // read (OpDef::costly: a gather or a special-function op, but for a key not a gather by plain
  // dim indices, which is a load, nor a division by a per-block value; for a diagonal also an
  // integer per element converted to float: ALiBi's slope * (n - m) ran 1.06x faster per
  // diagonal on the H200, bench/NOTES.md session 20; a key's conversion is shared by the rows
  // a thread holds).
  static constexpr size_t kMaxTileValues = 4;  // diagonal and key values together
  int delta_sign(int id) const {  // +1 for n - m, -1 for m - n, else 0
    const Node& n = N(id);
    if (n.op != Op::Sub) return 0;
    const Node &a = N(n.args[0]), &b = N(n.args[1]);
    if (a.op != Op::Index || b.op != Op::Index) return 0;
    if (a.dim == k_.red_dim && b.dim == k_.row_dim) return 1;
    if (a.dim == k_.row_dim && b.dim == k_.red_dim) return -1;
    return 0;
  }
  bool plain_gather(int id) const {  // a gather whose every index is a plain dim index
    const Node& n = N(id);
    if (n.op != Op::Gather) return false;
    for (int a : n.args)
      if (N(a).op != Op::Index) return false;
    return true;
  }
  // The cost of computing value id per element where it is a value per diagonal (per_key
  // false) or per key (true): the dear ops it takes (see above), else 0.
  int tile_value_cost(int id, bool per_key) const {
    const Node& n = N(id);
    if (is_integer(n.type) || n.type == DType::boolean || hoisted_.count(id)) return 0;
    auto has = [&](int v, int d) { return dimset_contains(N(v).dims, d); };
    auto per_element = [&](int v) { return has(v, k_.row_dim) && has(v, k_.red_dim); };
    if (per_key ? !has(id, k_.red_dim) || has(id, k_.row_dim) : !per_element(id)) return 0;
    auto line_dim = [&](int d) { return is_par(d) || (per_key && d == k_.red_dim); };
    int cost = 0;
    std::set<int> seen;
    std::vector<int> stack = {id};
    while (!stack.empty()) {
      const int a = stack.back();
      stack.pop_back();
      if (!seen.insert(a).second || (!per_key && delta_sign(a)) || hoisted_.count(a)) continue;
      const Node& x = N(a);
      const PlanValue* v = k_.value(a);
      if (!v || v->load_buffer >= 0 || v->contraction || is_acc(a) || is_reduction(x.op))
        return 0;
      if (x.op == Op::Index && !line_dim(x.dim)) return 0;
      if (x.op == Op::Param)
        for (int d : x.dims)
          if (!line_dim(d)) return 0;
      // (for a key: not a gather by plain dim indices, keep[b, n], a load that a staged tile
      // serves as well, nor a division by a per-block divisor, f32(n) / 256.0, a multiply)
      const bool cheap_for_key =
          plain_gather(a) || (x.op == Op::Div && !has(x.args[1], k_.red_dim));
      // (an op over no dim is computed once: sqrt(size(d)))
      if (op_def(x.op).costly && !x.dims.empty() && !(per_key && cheap_for_key)) ++cost;
      // an integer operand per element converted to float (slope * (n - m)); not a where's
      // condition, a literal or a per-block integer
      if (!per_key && is_float(x.type) && x.op != Op::Gather)
        for (size_t i = x.op == Op::Where ? 1 : 0; i < x.args.size(); ++i)
          if (is_integer(N(x.args[i]).type) && per_element(x.args[i])) ++cost;
      for (int arg : x.args) stack.push_back(arg);
    }
    return cost;
  }
  // The largest values per tile line (users first: a value covers its operands), the dearest
  // kMaxTileValues of them.
  void find_tile_values(const std::set<int>& score_code) {
    std::set<int> covered;
    struct Found { int cost, id; bool per_key; };
    std::vector<Found> found;
    for (auto it = score_code.rbegin(); it != score_code.rend(); ++it) {
      if (covered.count(*it)) continue;
      for (bool per_key : {false, true})
        if (const int cost = tile_value_cost(*it, per_key)) {
          found.push_back({cost, *it, per_key});
          ancestors(*it, covered);
          break;
        }
    }
    std::stable_sort(found.begin(), found.end(),
                     [](const Found& x, const Found& y) { return x.cost > y.cost; });
    if (found.size() > kMaxTileValues) found.resize(kMaxTileValues);
    covered.clear();
    for (const Found& f : found) {
      (f.per_key ? key_values_ : diagonal_).push_back(f.id);
      if (!f.per_key) ancestors(f.id, covered);
    }
    for (int id : covered)
      if (int s = delta_sign(id)) out_.deltas[id] = s;
  }
  // The score code the kernel computes per element: score_code without what only the values per
  // tile line read (their operands are computed where those are), and with keep_pass the tile
  // mask, which keep() computes per element also where only a value per tile line reads it (a
  // weight `where(mask, f(n), 0)` computed once per key or per diagonal: the score code reads
  // that value, keep() the mask's own operands).
  std::set<int> per_element_code() const {
    std::set<int> line(diagonal_.begin(), diagonal_.end());
    line.insert(key_values_.begin(), key_values_.end());
    // (as ancestors(): a value the kernel loads is read, not computed; a score's operands are
    // the tensor cores')
    auto stop = [&](int n) {
      const PlanValue* v = k_.value(n);
      for (const Score& sc : scores_)
        if (sc.node == n) return true;
      return line.count(n) > 0 || (v && v->load_buffer >= 0);
    };
    std::vector<int> roots;
    for (const Group& g : groups_) {
      roots.insert(roots.end(), g.pv_weight.begin(), g.pv_weight.end());
      roots.push_back(g.arg);
    }
    if (launch_.keep_pass) roots.push_back(k_.tiles.mask);
    std::set<int> code;
    for (int root : roots) {
      const std::set<int> c = closure_of(p_, root, stop);
      code.insert(c.begin(), c.end());
    }
    for (int id : line) code.erase(id);
    return code;
  }

  // Candidates for staging: reads of the score code -- plain parameter reads, gathers whose
  // every index is a plain dim index (unchecked_: the host checked the extents, so every
  // element of a tile inside M x N is in range), or an intermediate another kernel wrote (a
  // key's norm: lower/cut_head_reductions.cpp, param -1) -- over the block's parallel dims, at
  // most once the row dim and exactly once the key dim. Each key tile needs a rows x keys (or
  // 1 x keys) tile of them, which can travel with K/V.
  void find_staged(const std::set<int>& score_code) {
    for (int id : score_code) {
      const Node& n = N(id);
      const PlanValue* v = k_.value(id);
      const bool load = v && v->load_buffer >= 0;
      // (param, buffer, index dims, element type)
      int param = -1, buffer = -1;
      std::vector<int> dims;
      DType type = DType::f32;
      if (load) {
        buffer = v->load_buffer;
        dims = plan_.buffers[buffer].dims;
        type = intermediate_storage(plan_.buffers[buffer].type, true);
      } else if ((n.op == Op::Gather && unchecked_.count(n.param)) || n.op == Op::Param) {
        param = n.param;
        buffer = buffer_of_param(param);
        dims = n.op == Op::Param ? p_.params[param].dims : arg_dims(id);
        type = p_.params[param].type;
      } else {
        continue;
      }
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
        seen = seen || (t.param == param && t.buffer == buffer && t.arg_dims == dims);
      if (seen) continue;
      candidates_.push_back({param, buffer, dtype_bytes(type), rows == 1, dims, id});
    }
    // (row, key) tiles first: they replace a load per score element, key tiles one per column
    std::stable_sort(candidates_.begin(), candidates_.end(),
                     [](const Staged& a, const Staged& b) { return a.rows > b.rows; });
  }
  static constexpr size_t kMaxStaged = 4;  // fg::kMaxStaged

  // Shared memory of the launch with staged tiles `st` (the layout of fg::AttnSm80: Q tiles,
  // then `stages` stages of K and V, as many staged areas (a stage's staged tiles rounded up to
  // 128 bytes), the values per diagonal and per key (one copy, or when warp-specialized
  // diag_copies: fg::AttnSm80::kDiagCopies), and the warp-specialized ring's 256
  // bytes of mbarriers, tile indices and range slots (32 more with a second Q buffer: Q's four
  // more mbarriers); Q's tiles `q_buffers` times; the generated source static_asserts that
  // both agree).
  int smem_bytes(const std::vector<Staged>& staged, int block_m = 0, int block_n = 0,
                 int stages = 2, bool ws = false, int64_t value_cols = 0,
                 int diag_copies = 2, int q_buffers = 1) const {
    const int BM = block_m ? block_m : launch_.block_m, BN = block_n ? block_n : launch_.block_n;
    const int64_t DVc = value_cols ? value_cols : DVc_;
    const int Sn = static_cast<int>(scores_.size());
    int st = 0;
    for (const Staged& t : staged) st += (t.rows ? BM : 1) * (BN * t.elem_bytes + 16);
    st = (st + 127) / 128 * 128;
    const int diag = static_cast<int>(diagonal_.size() + key_values_.size()) *
                     ((BM + BN - 1 + 3) / 4 * 4) * 4;
    const int np = launch_.pieces;
    return static_cast<int>(
        q_buffers * np * Sn * BM * Dt_ * 2 +
        stages * (np * (Sn * BN * Dt_ * 2 + vbufs_.size() * BN * DVc * 2) + st) +
        (ws && stages > 1 ? diag_copies : 1) * diag + (ws ? 256 + 32 * (q_buffers - 1) : 0));
  }
  // The bf16 pieces a value of type t needs to be held exactly (0: not a float operand): 8
  // significant bits each, so f8 and bf16 1, f16 (11 bits) 2, f32 (24) 3.
  static int pieces_of(DType t) {
    switch (t) {
      case DType::bf16: case DType::f8e4m3: case DType::f8e5m2: return 1;
      case DType::f16: return 2;
      case DType::f32: return 3;
      default: return 0;
    }
  }
  // How the operand types reach the tensor cores: operands of one 16-bit type as they are (the
  // mma's type); any other mix as bf16 pieces (Sm80Launch::pieces), as many as the widest type
  // needs (pieces_of): with f32, x = x0 + x1 + x2 holds its 24 significant bits and the 6 piece
  // products i + j < 3 drop only terms below 2^-24 of the product (f32 accuracy); f16 beside
  // bf16 2 pieces (3 products); f8 alone 1 (a conversion). Every Q, K and V buffer gets a split
  // operand: a Params slot after the plan's buffers that the host fills with its pieces.
  // A plain group's weights and a softmax's probabilities times P.V weights are unbounded
  // (softmax weights lie in [0, 1]): P rounded to f16 for P.V could overflow, so f16 operands
  // beside such a group whose weights some P.V multiplies go as 2 bf16 pieces (bf16 holds
  // f32's range). (A group no P.V reads, such as a count, sums its weights in f32.)
  void choose_pieces() {
    bool unbounded = false;
    for (size_t g = 0; g < groups_.size(); ++g) {
      bool read = false;
      for (const Acc& a : pv_) read = read || a.group == static_cast<int>(g);
      unbounded = unbounded || (read && (groups_[g].max_node < 0 || !groups_[g].pv_weight.empty()));
    }
    if (operand_types_.size() == 1 && (operand_types_.count(DType::bf16) ||
                                       (operand_types_.count(DType::f16) && !unbounded))) {
      out_.elem = *operand_types_.begin();
      return;
    }
    out_.elem = DType::bf16;
    launch_.pieces = 1;
    for (DType t : operand_types_) launch_.pieces = std::max(launch_.pieces, pieces_of(t));
    std::vector<int> bufs;
    for (const Score& sc : scores_) bufs.insert(bufs.end(), {sc.qbuf, sc.kbuf});
    bufs.insert(bufs.end(), vbufs_.begin(), vbufs_.end());
    for (int b : bufs) {
      bool seen = false;
      for (const Sm80Launch::SplitOperand& o : launch_.split) seen = seen || o.buffer == b;
      if (seen) continue;
      const PlanBuffer& B = plan_.buffers[b];
      if (B.dims.size() > 8) fail("operand " + B.name + " has more than 8 dims to split");
      launch_.split.push_back({b, static_cast<int>(plan_.buffers.size() + launch_.split.size()),
                               B.dims, B.type, B.name});
    }
    launch_.split_entry = k_.name + "_split";
  }

  // Hopper (cuda-sm90): the products by wgmma (fg_sm90.cuh) on warpgroups of 64 rows, two per
  // block (8 compute warps of 16 rows, 128 rows a block), when the tiles line up with its 64-column
  // swizzled panels (head dims and the value chunk multiples of 64, 16-bit operands) and the
  // fragments that live across the key loop fit the registers of 256 threads (scores
  // S * BN / 2, accumulators A * DV / 2, P as operands G * BN / 4 per thread; at most
  // kWgmmaLiveRegs of the compute warps' 224 (208 with a producer of 88) after setmaxnreg, the
  // rest for addresses and element code) and the stages (staged tiles included) fit a block's
  // shared memory: keys in tiles of 128, or of 64 when that does not fit. Otherwise the
  // mma.sync shape chosen above.
  // The careful build runs the same shape with mma.sync.
  // Registers a thread of a wgmma warpgroup holds across the key loop: `score_arrays` arrays of
  // scores (BN / 2 each), A accumulators (dvc / 2 each) and G groups' P operands (BN / 4 each).
  // (The weights of the groups go to P operands as they are computed, in the scores'
  // registers: kernels of two groups compiled without spills at these counts. Kernels of more
  // groups spilled 36 to 688 bytes (session 46's review, d = e = 64: three temperatures 36,
  // seven groups 688); counting their weights as floats too would send the three temperatures
  // to mma.sync at half the tensor rate, unmeasured: bench/NOTES.md.)
  static int wgmma_live_regs(int score_arrays, int A, int G, int bn, int64_t dvc) {
    return score_arrays * bn / 2 + A * static_cast<int>(dvc) / 2 + G * bn / 4;
  }
  // 176 (e = 256 in one chunk at 64-key tiles): those kernels ran 1.26-1.54x as fast as at a
  // value split of 2, which 160 had required (d = 64 to 256; ptxas spills nothing but 24 bytes
  // at d = 192: bench/NOTES.md, sessions 21 and 22). The same bound holds where the tiles are
  // classified by data and the compute warps have 208 registers (producer_regs 88): their
  // kernels compile without spills at d, e up to 256
  // (CudaEmit.DataClassifiedKernelsKeepTheirRegistersAtWideHeads).
  static constexpr int kWgmmaLiveRegs = 176;
  void choose_wgmma(int Sn, int A) {
    if (out_.target != Target::cuda_sm90) return;
    if (!launch_.split.empty()) {
      launch_.products_why = "mma.sync: operands in bf16 pieces";
      return;
    }
    if (Dt_ % 64 != 0) {
      launch_.products_why = "mma.sync: the head dim's tile of " + S(Dt_) +
                             " columns does not fill wgmma's 64-column panels";
      return;
    }
    // the value split at 16 rows per warp
    int vs = value_split_while([&](int s) { return A * (DVt_ / s) / 2 > kAccRegs; });
    if ((DVt_ / vs) % 64 != 0) {
      launch_.products_why = "mma.sync: a value chunk of " + S(DVt_ / vs) +
                             " columns does not fill wgmma's 64-column panels";
      return;
    }
    if (try_wgmma(Sn, A, vs)) return;
    // Where the arrays do not fit at that split, a wider one (narrower value chunks, each
    // block recomputing the scores and their element code) may. Taken while the multiply-adds
    // per (row, key) pair stay within kWgmmaWorkRatio times the mma.sync shape's and the
    // softmax exponentials a pair take the special-function pipe fewer clocks than its
    // products take the tensor pipe (tensor_bound).
    const int G = static_cast<int>(groups_.size());
    const int64_t mma_work = products_per_pair(A, vsplit_);
    int exps = 0;  // a softmax group's exponential per (row, key) pair and value chunk
    for (const Group& g : groups_) exps += g.max_node >= 0 && !g.bare;
    for (vs *= 2;; vs *= 2) {
      if (DVt_ != DV_) {
        launch_.products_why += "; a padded value dim is not split wider";
        return;
      }
      if ((DVt_ / vs) % 64 != 0 || DVt_ % vs != 0) {
        launch_.products_why += "; a value split of " + S(vs) + " would leave chunks that do " +
                                "not fill wgmma's 64-column panels";
        return;
      }
      const std::string failed = launch_.products_why.substr(launch_.products_why.find(": ") + 2);
      if (products_per_pair(A, vs) > kWgmmaWorkRatio * mma_work) {
        launch_.products_why += "; a value split of " + S(vs) + " would take " +
                                S(products_per_pair(A, vs)) + " multiply-adds a (row, key) " +
                                "pair, more than " + ratio_text(kWgmmaWorkRatio) + "x mma.sync's " +
                                S(mma_work);
        return;
      }
      // (where the arrays do not fit at 64-key tiles either, try_wgmma says so)
      if (wgmma_live_regs(Sn, A, G, 64, DVt_ / vs) <= kWgmmaLiveRegs &&
          !tensor_bound(A, vs, exps)) {
        launch_.products_why =
            "mma.sync: " + failed + "; at a value split of " + S(vs) + ", where wgmma's " +
            "arrays fit the registers, the " + S(vs * exps) + " softmax exponentials a (row, " +
            "key) pair would keep the special-function pipe busy at least as long as the " +
            S(products_per_pair(A, vs)) + " multiply-adds keep the tensor pipe";
        return;
      }
      if (try_wgmma(Sn, A, vs)) {
        launch_.value_split_why =
            "wgmma fits at this split, not at " + S(vs / 2) + " (" + failed +
            "), and the kernel stays tensor-bound (" +
            (exps ? S(vs * exps) + " softmax exponentials against " +
                        S(products_per_pair(A, vs)) + " multiply-adds a pair"
                  : std::string("no softmax exponentials")) +
            ")";
        return;
      }
    }
  }
  // The value split: 1, doubled while `too_wide(split)` holds and the value dim halves into
  // whole chunks of 32 columns (a padded value dim is not split: its chunks would hold
  // different column counts).
  template <class TooWide>
  int value_split_while(TooWide too_wide) const {
    int vs = 1;
    while (too_wide(vs) && (DVt_ / (2 * vs)) % 32 == 0 && DVt_ == DV_) vs *= 2;
    return vs;
  }
  // The value tile of a kernel of no P.V accumulator (no value dim): the template's arrays and
  // panels take a width (64: wgmma's panel), though nothing is loaded, multiplied or stored by
  // value column.
  static constexpr int64_t kNominalValueCols = 64;
  // Registers of a 64-key tile's weights and the accumulators (mma_live_regs at 16 rows a warp)
  // of the small-heads shape (5 blocks an SM: at most 102 registers a thread): the measured
  // kernel's, d = e = 32 with one group and one accumulator, 32 + 16. Two groups' weights
  // beside no accumulator (64) spilled 4 to 20 bytes at d = 64 (bench/NOTES.md, session 47).
  static constexpr int kSmallHeadsRegs = 48;
  // f32 accumulators a thread of the mma.sync shape holds at most (more spill)
  static constexpr int kAccRegs = 128;
  // ... and past which a kernel is not built: accumulators that spill more than twice a
  // thread's register file (where the value dim cannot split further: chunks of 32 columns, or
  // a padded value dim, which is not split; four accumulators of 256 padded columns take 512)
  static constexpr int kMaxAccRegs = 512;
  // mma.sync: registers a thread holds for a key tile's scores, or the groups' weights that
  // may take their registers (whichever is more), at mw m-blocks of 16 rows a warp and bn keys
  // a tile; with the A accumulators of dvc columns: mma_live_regs.
  static int max_weight_regs(int Sn, int G, int mw, int bn) { return std::max(Sn, G) * mw * bn / 2; }
  static int mma_live_regs(int Sn, int G, int A, int mw, int bn, int64_t dvc) {
    return max_weight_regs(Sn, G, mw, bn) + A * mw * static_cast<int>(dvc) / 2;
  }
  // The few-rows kernel's value split (Sm80Launch::few_value_split): its one warp holds at most
  // kFewValueCols value columns of each accumulator, and its accumulators take at most
  // kAccRegs registers a thread (the mma.sync rule at 16 rows a warp, for kernels of three or
  // four accumulators); a wider value dim takes chunks (value_split_while), also while its two
  // stages of tiles would not fit a block's shared memory (several value tensors in pieces).
  // The column bound is measured, not derived: 256 columns in one chunk ran 0.67-0.94x as fast
  // as two chunks of 128 (vanilla decode, d = 128 to 256), while diff_attn's two accumulators of
  // 128 columns ran 0.90x as fast in two chunks of 64 as in one; a count of live registers
  // (accumulators and scores) ranks those the other way (bench/NOTES.md, sessions 21 and 22).
  static constexpr int kFewValueCols = 128;
  void choose_few_value_split(int A) {
    auto smem = [&](int vs) {
      return smem_bytes(staged_, 16, launch_.few_block_n, 2, false, DVt_ / vs);
    };
    auto why = [&](int vs) -> std::string {
      const int64_t cols = DVt_ / vs;
      if (cols > kFewValueCols)
        return "one warp holds at most " + S(kFewValueCols) +
               " value columns an accumulator, not " + S(cols);
      if (A * cols / 2 > kAccRegs)
        return "one warp's " + S(A) + " accumulators would take " + S(A * cols / 2) +
               " registers a thread at " + S(cols) + " columns (at most " + S(kAccRegs) + ")";
      if (smem(vs) > budget_.per_block)
        return "its two stages of tiles would take " + S(smem(vs)) +
               " bytes of shared memory (at most " + S(budget_.per_block) + " a block)";
      return "";
    };
    // (a chunk that cannot halve stays, whatever holds; lower_cuda refuses tiles past the
    // shared memory)
    const int vs = value_split_while([&](int s) { return !why(s).empty(); });
    launch_.few_value_split = vs;
    launch_.few_value_cols = static_cast<int>(DVt_ / vs);
    if (A * launch_.few_value_cols / 2 > kMaxAccRegs)
      fail("the few-rows kernel's " + S(A) + " P.V accumulators would take " +
           S(A * launch_.few_value_cols / 2) + " registers a thread at the narrowest value chunk "
           "of " + S(launch_.few_value_cols) + " columns (at most " + S(kMaxAccRegs) + ")");
    if (vs > 1) launch_.few_value_split_why = why(vs / 2);
  }
  // Multiply-adds per (row, key) pair at value split vs: every chunk recomputes the scores.
  // (a score narrower than the tile: the k16 steps of its own columns)
  int64_t products_per_pair(int A, int vs) const {
    int64_t scores = 0;
    for (const Score& sc : scores_) scores += sc.D == D_ ? Dt_ : (sc.D + 15) / 16 * 16;
    return vs * scores + A * DVt_;
  }
  static constexpr double kWgmmaWorkRatio = 1.5;
  // sm_90 per SM and clock: 16 exponentials (the special-function pipe) against 2048 bf16
  // multiply-adds (the tensor pipe), so an exponential costs as long as 128 multiply-adds.
  // Only the softmax exponentials count: this bound separates the measured losses (diff_attn
  // d = 64: exactly as long) from the wins, and counting the score code's own ops too (tanh,
  // sigmoid) would have kept softcap and sigmoid attention at e = 256 on mma.sync, where the
  // wider split measured 1.16x and 1.24x faster (bench/NOTES.md, sessions 20 and 21).
  static constexpr int64_t kMultiplyAddsPerExp = 2048 / 16;
  bool tensor_bound(int A, int vs, int exps) const {
    return vs * exps * kMultiplyAddsPerExp < products_per_pair(A, vs);
  }
  // Sm80Launch::checks_read_scores: a gather checked on the device (any gather not by plain dim
  // indices: a proved one is checked in the FG_CHECK_GATHERS and careful builds) whose index, or
  // a `%` whose divisor, reads a score contraction.
  void find_checks_reading_scores(const std::set<int>& score_code) {
    auto reads_score = [&](int id) {
      const std::set<int> below = closure_of(p_, id);
      for (const Score& sc : scores_)
        if (below.count(sc.node)) return true;
      return false;
    };
    for (int id : score_code) {
      const Node& n = N(id);
      bool reads = false;
      if (n.op == Op::Gather && !unchecked_.count(n.param))
        for (int a : n.args) reads = reads || reads_score(a);
      if (n.op == Op::Mod) reads = reads_score(n.args[1]);
      if (reads) launch_.checks_read_scores = true;
    }
  }

  // Sm80Launch::clamp_keys (the Spec's kClampKeys), once the staged tiles are fitted: whether
  // the per-element code reads device memory by the key (a parameter, a gather or an
  // intermediate over the key dim that no staged tile holds: at a padded key its address is
  // past the tensor) or takes x % y with y over the key dim (at a padded key y may be read from
  // a staged tile's empty column).
  void find_key_clamp() {
    auto over_keys = [&](int id) {
      const std::vector<int>& d = N(id).dims;
      return std::find(d.begin(), d.end(), k_.red_dim) != d.end();
    };
    for (int id : per_element_code()) {
      const Node& n = N(id);
      const PlanValue* v = k_.value(id);
      bool device = false;
      if (v && v->load_buffer >= 0) {
        device = out_.staged_tile(-1, v->load_buffer, plan_.buffers[v->load_buffer].dims) < 0;
      } else if (n.op == Op::Param) {
        device = out_.staged_tile(n.param, -1, p_.params[n.param].dims) < 0;
      } else if (n.op == Op::Gather) {
        device = !TensorCoreKernel::by_dim_indices(p_, id) ||
                 out_.staged_tile(n.param, -1, arg_dims(id)) < 0;
      }
      if ((device && over_keys(id)) || (n.op == Op::Mod && over_keys(n.args[1]))) {
        launch_.clamp_keys = true;
        return;
      }
    }
  }

  // Sm80Launch::keep_pass (the Spec's kKeep and keep()): the tile mask as a pass of its own
  // where its removed elements contribute nothing and it reads no score (keep() sees the
  // indices and the tile, not the products).
  void find_keep_pass() {
    if (k_.tiles.mask < 0 || !k_.tiles.unmasked_full) return;
    const std::set<int> below = closure_of(p_, k_.tiles.mask);
    for (const Score& sc : scores_)
      if (below.count(sc.node)) return;
    launch_.keep_pass = true;
  }

  // Whether the key tiles are classified by data read over the keys (a data range over the
  // key dim, such as document's doc[n]), not by index arithmetic alone.
  bool keys_classified_by_data() const {
    for (const DataRange& dr : data_ranges_)
      if (dr.over == k_.red_dim) return true;
    return false;
  }

  // wgmma at value split vs, with keys in tiles of 128 or else 64: true when taken; otherwise
  // products_why says what did not fit at 64-key tiles.
  bool try_wgmma(int Sn, int A, int vs) {
    const int64_t dvc = DVt_ / vs;
    const int G = static_cast<int>(groups_.size());
    const int saved_bm = launch_.block_m, saved_bn = launch_.block_n;
    const int64_t saved_dvc = DVc_;
    for (int bn : {128, 64}) {
      const int live = wgmma_live_regs(Sn, A, G, bn, dvc);
      if (live > kWgmmaLiveRegs) {
        launch_.products_why = "mma.sync: wgmma's scores, accumulators and P operands would "
                               "take " + S(live) + " registers a thread at " + S(bn) +
                               "-key tiles and a value split of " + S(vs) + " (at most " +
                               S(kWgmmaLiveRegs) + ")";
        continue;
      }
      launch_.block_m = 128;
      launch_.block_n = bn;
      DVc_ = dvc;
      const int smem = smem_bytes(staged_, 0, 0, 2, true);
      if (smem <= budget_.per_block) {
        launch_.products_why.clear();
        launch_.wgmma = true;
        launch_.min_blocks = 1;
        mw_ = 1;
        vsplit_ = vs;
        launch_.value_split = vs;
        // Warp specialization: a producer warpgroup (the 9th to 12th warps) loads, classifies
        // and fills the values per diagonal into a ring of stages, as many as shared memory
        // holds (at most 4), so the compute warpgroups wait only for data, never for each
        // other (bench/NOTES.md).
        launch_.producer_warps = 4;
        launch_.warps = 8 + launch_.producer_warps;
        launch_.warp_specialized = true;
        // Persistent (walking the items), masked or not: the blocks take the items in order
        // from a counter (the longest row tile of a parallel index first where rows are
        // reversed: causal), so unequal items balance as under the hardware's block scheduler,
        // and the next item's K/V and Q load under this one's epilogue (causal on the H100
        // 1.01-1.09x over one item a block, bench/NOTES.md session 36).
        launch_.persistent = true;
        launch_.producer_regs = keys_classified_by_data() ? 88 : Sm80Launch::kProducerRegsDefault;
        launch_.stages = 2;
        while (launch_.stages < 4 &&
               smem_bytes(staged_, 0, 0, launch_.stages + 1, true) <= budget_.per_block)
          ++launch_.stages;
        // The values per tile line, a copy per stage where they fit: with two, the producer
        // fills tile i's only once the compute warps are done with tile i - 2, so a pipelined
        // loop (which wants tile i while it finishes i - 1) waits for their loads.
        launch_.diag_copies = 2;
        if (!diagonal_.empty() || !key_values_.empty())
          if (smem_bytes(staged_, 0, 0, launch_.stages, true, 0, launch_.stages) <=
              budget_.per_block)
            launch_.diag_copies = launch_.stages;
        // A second Q buffer where it fits beside them (after the stages: a stage holds a key
        // tile of every item, the second buffer only hides Q's load at an item's start).
        launch_.q_buffers = 1;
        if (smem_bytes(staged_, 0, 0, launch_.stages, true, 0, launch_.diag_copies, 2) <=
            budget_.per_block)
          launch_.q_buffers = 2;
        choose_tma();
        choose_wgmma_n();
        choose_pipelining(Sn, A);
        return true;
      }
      launch_.products_why = "mma.sync: wgmma's two stages would take " + S(smem) +
                             " bytes of shared memory at " + S(bn) + "-key tiles (at most " +
                             S(budget_.per_block) + " a block)";
    }
    launch_.block_m = saved_bm;
    launch_.block_n = saved_bn;
    DVc_ = saved_dvc;
    return false;
  }

  // The columns of one wgmma instruction (Sm80Launch::wgmma_n): 128 where the key tile holds
  // them (Q.K^T; P.V where the value columns do too), which reads each A operand from shared
  // memory half as often as m64n64k16 (measured: bench/NOTES.md, session 17).
  void choose_wgmma_n() { launch_.wgmma_n = launch_.block_n % 128 == 0 ? 128 : 64; }

  // The pipelined compute loop with ping-pong turns (Sm80Launch::pipelined, ping_pong): while
  // a warpgroup's P.V runs, its next scores are live beside the accumulators and the P
  // operands. So the main build takes it where those arrays leave the element code room: at
  // most 128 registers a thread (d = e = 64 at 128 keys a tile). At d = e = 128 (160) it was
  // slower on long key loops and spilled with gathers.
  // Walking calls (short key loops: a block's items of at most KeySplit::kWalkTiles tiles),
  // where it was faster, take it up to 160 registers (choose_wgmma's bound then; it allows
  // 176 since session 22, which the walking loop was not measured at). They get a build of
  // their own where the main loop is not pipelined. Where the two
  // loops agree, the main build walks too: one compile, and at d = e = 64 the main build was
  // faster with the walking code in than without it.
  // The measurements: bench/NOTES.md, sessions 17 and 18.
  void choose_pipelining(int Sn, int A) {
    // (the scores and the weights share their registers: max(Sn, G) arrays)
    const int G = static_cast<int>(groups_.size());
    const int live = wgmma_live_regs(std::max(Sn, G), A, G, launch_.block_n, DVc_);
    launch_.pipelined = live <= kPipelinedLiveRegs;
    launch_.ping_pong = launch_.pipelined;
    if (!launch_.persistent) return;
    // A masked kernel walks in its main build (one build): where its items' work differs it
    // walks at every key-loop length (choose_key_split), so its walking loop is its main loop
    // (document's pipelined walking build spilled 312 bytes at d = 128).
    launch_.walk_pipelined = k_.tiles.mask < 0 ? live <= kWalkPipelinedLiveRegs : launch_.pipelined;
    if (launch_.walk_pipelined != launch_.pipelined) launch_.walk_entry = k_.name + "_walk";
  }
  static constexpr int kPipelinedLiveRegs = 128, kWalkPipelinedLiveRegs = 160;

  // The producer warpgroup's K and V tiles by TMA (Sm80Launch::tma): every operand whose
  // buffer is indexed by its column dim, the key dim and at most three parallel dims, each
  // once; otherwise none (the producer copies all of them by cp.async).
  void choose_tma() {
    std::vector<Sm80Launch::TmaOperand> ops;
    auto add = [&](int buffer, int col_dim, bool value) {
      Sm80Launch::TmaOperand op;
      op.buffer = buffer;
      op.value_chunk = value && vsplit_ > 1;
      const std::vector<int>& dims = plan_.buffers[buffer].dims;
      int col = -1, key = -1;
      std::vector<int> par;
      for (size_t j = 0; j < dims.size(); ++j) {
        const int pos = static_cast<int>(j);
        if (dims[j] == col_dim && col < 0) col = pos;
        else if (dims[j] == k_.red_dim && key < 0) key = pos;
        else if (is_par(dims[j])) par.push_back(pos);
        else return false;
      }
      if (col < 0 || key < 0 || par.size() > 3) return false;
      op.pos = {col, key};
      op.pos.insert(op.pos.end(), par.begin(), par.end());
      for (int j : op.pos) op.dims.push_back(dims[j]);
      ops.push_back(op);
      return true;
    };
    for (const Score& sc : scores_)
      if (!add(sc.kbuf, sc.dim, false)) return;
    for (int vb : vbufs_)
      if (!add(vb, vdim_, true)) return;
    launch_.tma = std::move(ops);
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
};

}  // namespace

KeySplit choose_key_split(const Sm80Launch& la, int64_t rows, int64_t par, int64_t keys,
                          int sm_count) {
  KeySplit k;
  k.few = rows <= KeySplit::kFewRows;
  const int64_t block_rows = k.few ? 16 : la.block_m;
  const int64_t blocks = (rows + block_rows - 1) / block_rows * par * la.value_split_of(k.few);
  const int64_t block_n = k.few ? la.few_block_n : la.block_n;
  const int64_t tiles = (keys + block_n - 1) / block_n;
  if (k.few && blocks > 0) {
    // The few-rows kernel's blocks all run the same number of key tiles, so they run in
    // waves of the blocks resident at once (few_blocks_per_sm on every SM): the split with
    // the fewest waves x (tiles a chunk + 1, the block's start and its share of the combine),
    // the fewest blocks among equals; each chunk keeps at least 4 key tiles.
    const int64_t slots = std::max<int64_t>(1, static_cast<int64_t>(sm_count) * la.few_blocks_per_sm);
    int64_t best = 0;
    for (int64_t s = 1; s <= std::max<int64_t>(1, std::min<int64_t>(tiles / 4, 64)); ++s) {
      const int64_t cost = (s * blocks + slots - 1) / slots * ((tiles + s - 1) / s + 1);
      if (best == 0 || cost < best) {
        best = cost;
        k.split = static_cast<int>(s);
      }
    }
  } else {
    // The full kernel: a grid that would leave half of the SMs' blocks (at least 2 each) idle
    // is split to fill them, each chunk keeping at least 4 key tiles.
    const int64_t want = static_cast<int64_t>(sm_count) * std::max(la.min_blocks, 2);
    if (blocks > 0 && 2 * blocks <= want && tiles >= 8)
      k.split = static_cast<int>(std::min<int64_t>({(want + blocks - 1) / blocks, tiles / 4, 64}));
  }
  if (k.split < 1) k.split = 1;
  // (a persistent kernel whose items' work differs walks at every length: Sm80Launch::
  // items_differ; their lengths are unknown here)
  k.walk = la.persistent && !k.few &&
           (la.items_differ || (tiles + k.split - 1) / k.split <= KeySplit::kWalkTiles);
  return k;
}

void TensorCoreView::fail(const std::string& why) const {
  throw BackendError("kernel " + k_.name + " does not fit the CUDA sm80 attention template: " +
                     why);
}

std::string TensorCoreView::nt(int id) const {
  std::string out = "%";  // (appending: GCC 12's -Wrestrict misfires on "%" + S(id))
  out += S(id) + " (" + node_text(p_, id) + ")";
  return out;
}

// k_.grid is in memory order (not a sorted DimSet): search it linearly.
bool TensorCoreView::is_par(int d) const {
  return d != k_.row_dim && std::find(k_.grid.begin(), k_.grid.end(), d) != k_.grid.end();
}

int TensorCoreView::buffer_of_param(int param) const {
  for (size_t b = 0; b < plan_.buffers.size(); ++b)
    if (plan_.buffers[b].kind == PlanBuffer::Input && plan_.buffers[b].param == param)
      return static_cast<int>(b);
  fail("parameter " + p_.params[param].name + " has no buffer");
}

bool TensorCoreView::is_acc(int node) const {
  for (const Accumulator& a : k_.accs)
    if (a.node == node) return true;
  return false;
}

void TensorCoreView::ancestors(int id, std::set<int>& out) const {
  // (a value the kernel loads is read, not computed: what it is computed from is not here)
  const std::set<int> nodes = closure_of(p_, id, [this](int n) {
    const PlanValue* v = k_.value(n);
    return v && v->load_buffer >= 0;
  });
  out.insert(nodes.begin(), nodes.end());
}

std::vector<int> TensorCoreView::arg_dims(int gather) const {
  std::vector<int> dims;
  for (int a : N(gather).args) dims.push_back(N(a).dim);
  return dims;
}

TensorCoreKernel lower_tensor_core(const Plan& plan, int kernel, Target target,
                                   const Extents& sizes, const SmemBudget& budget) {
  if (target == Target::cpu) throw BackendError("lower_tensor_core: target cpu is not CUDA");
  if (kernel < 0 || kernel >= plan.kernel_count())
    throw BackendError("lower_tensor_core: no kernel " + std::to_string(kernel));
  TensorCoreKernel out;
  out.kernel = kernel;
  out.target = target;
  Lowering(plan, kernel, sizes, budget, out).run();
  return out;
}

}  // namespace flashgen
