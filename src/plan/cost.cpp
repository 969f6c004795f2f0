// kernel_cost and mask_fraction (see cost.h). Test: tests/plan/cost_test.cpp.
#include "plan/cost.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "flashgen/error.h"
#include "ir/scalar_semantics.h"
#include "passes/passes.h"

namespace flashgen {

namespace {

bool all_known(const Program& p, const Extents& s, const DimSet& d) {
  for (int x : d)
    if (!s.count(p.dims[x])) return false;
  return true;
}

double numel(const Program& p, const Extents& s, const DimSet& d) {
  double n = 1;
  for (int x : d) n *= static_cast<double>(s.at(p.dims[x]));
  return n;
}

// The mask at index points, with the evaluator's scalar semantics (ir/scalar_semantics.h): its
// nodes in topological order, their values reused from point to point (no allocation per point).
// A value is unknown where the host cannot tell (an op other than element code over indices,
// sizes and gathers; a gather out of range or of a tensor not given; x % 0): the kernel reports
// those, and an unknown mask counts as kept.
class MaskAt {
 public:
  MaskAt(const Program& p, int mask, const TensorMap& in, const std::vector<int64_t>& ext)
      : p_(p), in_(in), ext_(ext), val_(p.nodes.size()), known_(p.nodes.size(), 0) {
    const std::set<int> nodes = closure_of(p, mask);
    nodes_.assign(nodes.begin(), nodes.end());
  }

  // Whether the mask (the last node) keeps the point `idx`.
  bool keeps(const std::vector<int64_t>& idx) {
    for (int id : nodes_) known_[id] = eval(id, idx);
    const int m = nodes_.back();
    if (!known_[m]) return true;
    return scalar::int_storage(val_[m].type) ? val_[m].i != 0 : val_[m].f != 0;
  }

 private:
  bool eval(int id, const std::vector<int64_t>& idx) {
    const Node& n = p_.nodes[id];
    scalar::Value& v = val_[id];
    switch (n.op) {
      case Op::Const:
        v = {n.type, 0, n.value};
        if (scalar::int_storage(n.type)) v.i = scalar::int_constant(n.value, n.type);
        return true;
      case Op::Index: v = {DType::i64, idx[n.dim], 0}; return true;
      case Op::Size: v = {DType::i64, ext_[n.dim], 0}; return true;
      case Op::Gather: {
        auto it = in_.find(p_.params[n.param].name);
        if (it == in_.end()) return false;
        const Tensor& t = it->second;
        at_.clear();
        for (size_t i = 0; i < n.args.size(); ++i) {
          const int a = n.args[i];
          if (!known_[a] || !scalar::int_storage(val_[a].type)) return false;
          if (val_[a].i < 0 || val_[a].i >= t.shape()[i]) return false;
          at_.push_back(val_[a].i);
        }
        const double x = t.at(at_);
        v = scalar::int_storage(n.type) ? scalar::Value{n.type, static_cast<int64_t>(x), 0}
                                        : scalar::Value{n.type, 0, x};
        return true;
      }
      default: break;
    }
    if (n.op == Op::Param || is_reduction(n.op) || is_sugar(n.op)) return false;
    args_.clear();
    for (int a : n.args) {
      if (!known_[a]) return false;
      args_.push_back(val_[a]);
    }
    try {
      v = scalar::eval(n.op, n.type, args_);
    } catch (const CallError&) {
      return false;  // x % 0
    }
    return true;
  }

  const Program& p_;
  const TensorMap& in_;
  const std::vector<int64_t>& ext_;
  std::vector<int> nodes_;             // the mask and what it depends on, by id
  std::vector<scalar::Value> val_;     // by node id
  std::vector<char> known_;            // by node id
  std::vector<scalar::Value> args_;    // reused argument buffers
  std::vector<int64_t> at_;
};

}  // namespace

KernelCost kernel_cost(const Plan& plan, const PlanKernel& k, const Extents& s) {
  const Program& p = plan.program;
  KernelCost c;
  c.known = true;
  for (const PlanValue& v : k.values) {
    const Node& n = p.nodes[v.node];
    if (v.load_buffer >= 0 || n.op == Op::Param || n.op == Op::Const || n.op == Op::Index ||
        n.op == Op::Size)
      continue;
    DimSet d = dimset_union(n.dims, n.reduce);
    if (!all_known(p, s, d)) return KernelCost{};
    const double f = numel(p, s, d);
    c.flops += f;
    if (k.red_dim >= 0 && dimset_contains(d, k.red_dim)) c.body_flops += f;
  }
  for (int b : k.reads) {
    const PlanBuffer& B = plan.buffers[b];
    DimSet d(B.dims.begin(), B.dims.end());
    if (!all_known(p, s, d)) return KernelCost{};
    c.bytes += numel(p, s, d) * dtype_bytes(B.type);
  }
  for (int b : k.writes) {
    const PlanBuffer& B = plan.buffers[b];
    DimSet d(B.dims.begin(), B.dims.end());
    if (!all_known(p, s, d)) return KernelCost{};
    c.bytes += numel(p, s, d) * (B.kind == PlanBuffer::Intermediate ? 4 : dtype_bytes(B.type));
  }
  return c;
}

double mask_fraction(const Plan& plan, const PlanKernel& k, const TensorMap& inputs,
                     const std::vector<int64_t>& ext, int64_t max_rows) {
  if (k.tiles.mask < 0 || k.row_dim < 0 || k.red_dim < 0) return 1;
  const int64_t M = ext[k.row_dim], N = ext[k.red_dim];
  if (M <= 0 || N <= 0) return 1;
  std::vector<int64_t> idx(plan.program.dims.size(), 0);
  // At most max_rows rows and about 2^22 (row, key) pairs, so long sequences stay quick.
  const int64_t rows =
      std::max<int64_t>(1, std::min({M, max_rows, std::max<int64_t>(1, (int64_t(1) << 22) / N)}));
  MaskAt mask(plan.program, k.tiles.mask, inputs, ext);
  double kept = 0, total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    idx[k.row_dim] = rows == M ? r : rows == 1 ? 0 : (r * (M - 1)) / (rows - 1);
    for (int64_t n = 0; n < N; ++n) {
      idx[k.red_dim] = n;
      kept += mask.keeps(idx) ? 1 : 0;
      total += 1;
    }
  }
  return kept / total;
}

}  // namespace flashgen
