// kernel_cost and mask_fraction (see cost.h). Test: tests/plan/cost_test.cpp.
#include "plan/cost.h"

#include <algorithm>
#include <cmath>

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

// The mask node at one index point, in f64. NaN: the host does not evaluate this op.
double eval_at(const Program& p, int id, const std::vector<int64_t>& idx, const TensorMap& in,
               const std::vector<int64_t>& ext) {
  const Node& n = p.nodes[id];
  auto a = [&](int i) { return eval_at(p, n.args[i], idx, in, ext); };
  switch (n.op) {
    case Op::Const: return n.value;
    case Op::Index: return static_cast<double>(idx[n.dim]);
    case Op::Size: return static_cast<double>(ext[n.dim]);
    case Op::Gather: {
      std::vector<int64_t> at;
      for (size_t i = 0; i < n.args.size(); ++i) {
        double v = a(static_cast<int>(i));
        if (std::isnan(v)) return NAN;
        at.push_back(static_cast<int64_t>(v));
      }
      auto it = in.find(p.params[n.param].name);
      if (it == in.end()) return NAN;
      const Tensor& t = it->second;
      for (size_t i = 0; i < at.size(); ++i)
        if (at[i] < 0 || at[i] >= t.shape()[i]) return NAN;  // the kernel reports it
      return t.at(at);
    }
    case Op::Add: return a(0) + a(1);
    case Op::Sub: return a(0) - a(1);
    case Op::Mul: return a(0) * a(1);
    case Op::Neg: return -a(0);
    case Op::Eq: return a(0) == a(1);
    case Op::Ne: return a(0) != a(1);
    case Op::Lt: return a(0) < a(1);
    case Op::Le: return a(0) <= a(1);
    case Op::Gt: return a(0) > a(1);
    case Op::Ge: return a(0) >= a(1);
    case Op::And: return a(0) != 0 && a(1) != 0;
    case Op::Or: return a(0) != 0 || a(1) != 0;
    case Op::Not: return a(0) == 0;
    case Op::Cast: return a(0);
    default: return NAN;
  }
}

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
  double kept = 0, total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    idx[k.row_dim] = rows == M ? r : rows == 1 ? 0 : (r * (M - 1)) / (rows - 1);
    for (int64_t n = 0; n < N; ++n) {
      idx[k.red_dim] = n;
      double v = eval_at(plan.program, k.tiles.mask, idx, inputs, ext);
      kept += (std::isnan(v) || v != 0) ? 1 : 0;
      total += 1;
    }
  }
  return kept / total;
}

}  // namespace flashgen
