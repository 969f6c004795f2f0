// partial_reductions: the cut of a reduction over a batch-like dim of another output's grid.
//
// An output over fewer dims than the attention beside it -- `out o: [b, h, m, e]` and
// `out cnt: [b, m] = sum(x, [h, n])` -- is planned by fusion in a kernel of its own (roots whose
// joint kernel would reduce over a dim one of them keeps in its grid do not share one:
// passes/fuse.cpp), which still computes x for every head and key. A Sum, Max or Min X over
// dims H of the grid G of a kernel of outputs (grid dims other than its row dim) is cut in two
// where the partial P = X's reduction over its other dims -- the kernel's streamed dim R, or
// nothing (P is then X's argument) -- lies on G (X's dims and H are G, and maybe dims the kernel
// stores whole: sum(w[h] * o, h) of the attention's o over [b, h, m, e]), is an accumulator of
// that kernel over R or a value computed from one, needs no reduction over a dim of G, and no
// root of the kernel needs X whole: P, and X = the same reduction of P over H. make_plan
// materializes P with the outputs (fusion adds it to the roots of that kernel, which stores it
// beside them) and the reduction over H reads it back in a kernel of its own: x is computed
// once, in the kernel that computes the attention, and the last step costs a pass over
// b * h * m values instead of b * h * m * n.
// The cut changes only the order of a reduction (exact for Max, Min and integer sums; float
// sums are reassociated, as any tiled kernel reassociates them).
// Preconditions: a canonical, online-rewritten program; `kernels` from fusing it (make_plan;
// not under --strict). Test: tests/plan/plan_test.cpp (Plan.AReductionOverAnotherOutputsGridIsCut,
// Plan.APartialIsCutOnlyWhereTheOutputsKernelComputesIt); tests/programs/partials.attn on every
// backend.
#include <algorithm>
#include <set>

#include "passes/passes.h"

namespace flashgen {

PartialReductions partial_reductions(const Program& p, const std::vector<OutputKernel>& kernels) {
  struct Cut {
    DimSet inner, outer;  // P reduces over inner (maybe none); X then reduces P over outer
    std::string why;
  };
  std::map<int, Cut> cuts;
  std::vector<std::set<int>> needs;  // per kernel: every node its roots need
  for (const OutputKernel& k : kernels) {
    std::set<int>& n = needs.emplace_back();
    for (int r : k.roots) {
      const std::set<int> c = closure_of(p, r);
      n.insert(c.begin(), c.end());
    }
  }
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const Node& x = p.nodes[i];
    if (!is_reduction(x.op)) continue;
    const std::set<int> arg = closure_of(p, x.args[0]);
    for (size_t ki = 0; ki < kernels.size(); ++ki) {
      const OutputKernel& k = kernels[ki];
      if (k.red < 0) continue;
      const DimSet grid = k.grid;
      // H: the batch-like dims of the grid X reduces (not the row dim: a reduction over rows
      // is the kernel's own business); P = X over the rest lies on the grid
      const DimSet h = dimset_minus(dimset_intersect(x.reduce, grid), DimSet{k.row});
      const DimSet on = dimset_union(x.dims, h);  // P's dims: the grid, and dims stored whole
      if (h.empty() || !dimset_subset(grid, on) ||
          !dimset_subset(on, dimset_union(grid, k.stored_whole)))
        continue;
      // P is one of the kernel's accumulators over its streamed dim, or (nothing left to
      // reduce) a value computed from them
      const DimSet inner = dimset_minus(x.reduce, h);
      bool over_red = false, over_grid = false;
      for (int a : arg)
        if (is_reduction(p.nodes[a].op)) {
          over_red = over_red || dimset_contains(p.nodes[a].reduce, k.red);
          for (int d : p.nodes[a].reduce) over_grid = over_grid || dimset_contains(grid, d);
        }
      if (inner.empty() ? !over_red : inner != DimSet{k.red}) continue;
      // the kernel can compute P (nothing P needs reduces over its grid) and none of its
      // roots needs X whole
      if (over_grid || needs[ki].count(static_cast<int>(i))) continue;
      std::string name;
      for (const Output& o : p.outputs)
        if (name.empty() && std::find(k.roots.begin(), k.roots.end(), o.node) != k.roots.end())
          name = o.name;
      cuts[static_cast<int>(i)] = {
          inner, h,
          std::string("the partial ") + op_name(x.op) +
              (inner.empty() ? "" : " over " + p.dim_list(inner)) + " of a " + op_name(x.op) +
              " over " + p.dim_list(x.reduce) + ", stored by the kernel of output '" + name +
              "' (whose grid has " + p.dim_list(h) + "): the rest, over " + p.dim_list(h) +
              ", runs in a kernel of its own"};
      break;
    }
  }
  PartialReductions out;
  if (cuts.empty()) {
    out.program = p;
    return out;
  }
  std::map<int, int> partial_of;  // old node -> builder id of its partial
  std::vector<int> final_ids;
  out.program = rebuild(
      p,
      [&](ProgramBuilder& b, int id, const std::vector<int>& args) {
        auto it = cuts.find(id);
        if (it == cuts.end()) return -1;
        const Node& x = p.nodes[id];
        int part = args[0];
        if (!it->second.inner.empty()) {
          Node n = x;
          n.args = {args[0]};
          n.dims = dimset_union(x.dims, it->second.outer);
          n.reduce = it->second.inner;
          part = b.add_node(n);
        }
        partial_of[id] = part;
        Node n = x;
        n.args = {part};
        n.reduce = it->second.outer;
        return b.add_node(n);
      },
      &final_ids);
  for (auto& [old, part] : partial_of) {
    const int id = final_ids[part];
    // (one partial two cuts share is stored once)
    if (id < 0 || std::find(out.partials.begin(), out.partials.end(), id) != out.partials.end())
      continue;
    out.partials.push_back(id);
    out.why.push_back(cuts.at(old).why);
  }
  return out;
}

}  // namespace flashgen
