// kernel_cost and mask_fraction (see cost.h). Test: tests/plan/cost_test.cpp.
#include "plan/cost.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "flashgen/error.h"
#include "ir/scalar_semantics.h"

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

// The mask node at one index point, with the evaluator's scalar semantics (ir/scalar_semantics.h):
// nullopt where the host cannot tell (an op other than element code over indices, sizes and
// gathers, a gather out of range or of a tensor not given, x % 0: the kernel reports those).
std::optional<scalar::Value> eval_at(const Program& p, int id, const std::vector<int64_t>& idx,
                                     const TensorMap& in, const std::vector<int64_t>& ext) {
  const Node& n = p.nodes[id];
  auto integer = [](int64_t v) { return scalar::Value{DType::i64, v, 0}; };
  switch (n.op) {
    case Op::Const: {
      scalar::Value v{n.type, 0, n.value};
      if (scalar::int_storage(n.type)) v.i = scalar::int_constant(n.value, n.type);
      return v;
    }
    case Op::Index: return integer(idx[n.dim]);
    case Op::Size: return integer(ext[n.dim]);
    case Op::Gather: {
      std::vector<int64_t> at;
      for (int a : n.args) {
        std::optional<scalar::Value> v = eval_at(p, a, idx, in, ext);
        if (!v || !scalar::int_storage(v->type)) return std::nullopt;
        at.push_back(v->i);
      }
      auto it = in.find(p.params[n.param].name);
      if (it == in.end()) return std::nullopt;
      const Tensor& t = it->second;
      for (size_t i = 0; i < at.size(); ++i)
        if (at[i] < 0 || at[i] >= t.shape()[i]) return std::nullopt;
      const double x = t.at(at);
      if (scalar::int_storage(n.type)) return scalar::Value{n.type, static_cast<int64_t>(x), 0};
      return scalar::Value{n.type, 0, x};
    }
    default: break;
  }
  if (n.op == Op::Param || is_reduction(n.op) || is_sugar(n.op)) return std::nullopt;
  std::vector<scalar::Value> args;
  for (int a : n.args) {
    std::optional<scalar::Value> v = eval_at(p, a, idx, in, ext);
    if (!v) return std::nullopt;
    args.push_back(*v);
  }
  try {
    return scalar::eval(n.op, n.type, args);
  } catch (const CallError&) {
    return std::nullopt;  // x % 0
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
      // (what the host cannot tell counts as kept)
      const std::optional<scalar::Value> v = eval_at(plan.program, k.tiles.mask, idx, inputs, ext);
      kept += !v || (scalar::int_storage(v->type) ? v->i != 0 : v->f != 0) ? 1 : 0;
      total += 1;
    }
  }
  return kept / total;
}

}  // namespace flashgen
