// cut_head_reductions: lowering's plan-level decision for reductions over a head dim that are
// not the score contraction. A kernel that computes, besides q.k, a reduction over an
// eliminated dim of a value per row or per key -- the norm of each query (sum(q * q, d), before
// the key loop) or of each key (sum(k * k, d), in it): cosine attention, q and k normalized in
// the program -- does not fit the tensor-core template, whose element code reads scores,
// accumulators and inline expressions only. Such a reduction does O(rows * d) or O(keys * d)
// work, against the kernel's O(rows * keys * d): it runs in a kernel of its own, with every
// value computed from it that is still per row or per key (the norm's sqrt: once a row or a
// key, not once a (row, key) pair), and the attention kernel reads back the values of that set
// it uses (the frontier) like any per-row or per-key data (a key's value is staged through
// shared memory with its K/V tile).
// head_reduction_cuts names those frontier values, one set per kernel and dim set, a value two
// kernels read once (make_plan's `materialize`); compile_program (compiler/pipeline.cpp) plans
// and lowers the program again with them, splits clusters there as without them, and keeps
// that plan where head_cuts_pay: more kernels on the tensor-core path (a row norm beside three
// softmaxes needs both the cut and the kernels per cluster). A reduction over a head dim of a
// value per (row, key) pair (a weighted contraction sum(q * w * k, d)) is never cut: it would
// write a score matrix.
// Preconditions: a lowered plan (lower_cuda). Test: tests/lower/lower_test.cpp
// (Lower.HeadDimReductionsPerRowOrKeyRunInKernelsOfTheirOwn); on the GPU
// tests/gpu/cuda_examples_test.cpp (Programs/CudaNorms.NormsOverTheHeadDimRunInKernelsOfTheirOwn/*).
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "lower/lower.h"
#include "passes/passes.h"

namespace flashgen {

namespace {
// (plan dim lists -- the grid outermost first, buffer dims in memory order -- are not sorted)
bool holds(const std::vector<int>& dims, int d) {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}
}  // namespace

std::vector<Materialize> head_reduction_cuts(const Plan& plan, const LoweredCuda& lowered) {
  std::vector<Materialize> cuts;
  const Program& p = plan.program;
  std::set<int> taken;  // values cut for an earlier kernel (a key norm two kernels share)
  for (const LoweredKernel& lk : lowered.kernels) {
    if (lk.path != LoweredKernel::Path::element) continue;
    const PlanKernel& k = plan.kernels[lk.plan_kernel];
    if (k.red_dim < 0 || k.row_dim < 0) continue;
    // The reductions to cut, then every value of the kernel computed from them that is still
    // per row or per key (the norm's sqrt, 1 + it, its reciprocal): the norms' kernels compute
    // those too, once a row or a key instead of once a (row, key) pair. The values of that set
    // that the rest of the kernel reads (its frontier) are materialized, a value that is not a
    // float at its float arguments in the set (the tensor-core path reads float intermediates).
    // (over the grid and the row or the key dim, as the tensor-core kernel reads them back)
    auto per_row_or_key = [&](const Node& n) {
      for (int d : n.dims)
        if (!holds(k.grid, d) && d != k.red_dim) return false;
      return !holds(n.dims, k.red_dim) || !holds(n.dims, k.row_dim);
    };
    std::set<int> set, reductions;
    for (const PlanValue& v : k.values) {
      const Node& n = p.nodes[v.node];
      if (v.phase == Phase::Epilogue || v.online || v.contraction || v.load_buffer >= 0 ||
          !per_row_or_key(n))
        continue;
      if (is_reduction(n.op)) {
        bool over_elim = !n.reduce.empty();
        for (int d : n.reduce) over_elim = over_elim && holds(k.elim, d);
        if (over_elim && !holds(n.reduce, k.red_dim) && is_float(n.type)) {
          set.insert(v.node);
          reductions.insert(v.node);
        }
        continue;
      }
      for (int a : n.args)
        if (set.count(a)) {
          set.insert(v.node);
          break;
        }
    }
    if (set.empty()) continue;
    std::set<int> frontier;
    std::function<void(int)> cut = [&](int id) {
      if (is_float(p.nodes[id].type)) {
        frontier.insert(id);
        return;
      }
      for (int a : p.nodes[id].args)
        if (set.count(a)) cut(a);
    };
    std::set<int> outputs;
    for (int b : k.writes) outputs.insert(plan.buffers[b].node);
    for (int id : set)
      if (outputs.count(id)) cut(id);
    for (const PlanValue& v : k.values) {
      if (set.count(v.node)) continue;
      for (int a : p.nodes[v.node].args)
        if (set.count(a)) cut(a);
    }
    std::map<std::vector<int>, Materialize> by_dims;
    for (int id : frontier)
      if (taken.insert(id).second) by_dims[p.nodes[id].dims].nodes.push_back(id);
    for (auto& [dims, m] : by_dims) {
      // the reductions each set comes from
      std::set<int> from;
      for (int id : m.nodes)
        for (int a : closure_of(p, id))
          if (reductions.count(a)) from.insert(a);
      const bool row = holds(dims, k.row_dim), key = holds(dims, k.red_dim);
      std::string sums, values;
      for (int id : from) sums += (sums.empty() ? "" : "; ") + node_text(p, id);
      for (int id : m.nodes) values += (values.empty() ? "" : "; ") + node_text(p, id);
      m.why = std::string(from.size() > 1 ? "reductions" : "a reduction") +
              " over a head dim, per " + (row ? "row" : key ? "key" : "parallel index") + " (" +
              sums + "), which the tensor-core template does not hold beside its score "
              "contraction: a kernel of its own computes " +
              (m.nodes.size() > 1 ? "the values" : "the value") +
              " the key loop's kernel reads back (" + values + ")";
      cuts.push_back(std::move(m));
    }
  }
  return cuts;
}

bool head_cuts_pay(const LoweredCuda& fused, const LoweredCuda& cut) {
  return kernels_on_path(cut, LoweredKernel::Path::tensor_core) >
         kernels_on_path(fused, LoweredKernel::Path::tensor_core);
}

}  // namespace flashgen
