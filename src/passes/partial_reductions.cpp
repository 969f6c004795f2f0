// partial_reductions: the cut of a reduction over dims of another kernel's grid.
//
// An output over fewer dims than the attention beside it -- `out o: [b, h, m, e]` and
// `out cnt: [b, m] = sum(x, [h, n])` -- is planned by fusion in a kernel of its own (roots whose
// joint kernel would reduce over a dim one of them keeps in its grid do not share one:
// passes/fuse.cpp), which still computes x for every head and key. A Sum, Max or Min X over
// dims H of the grid G of a kernel of outputs, or of a kernel of values fusion materializes (the
// attention's o1 for a norm over heads), is cut in two where the partial P = X's reduction over
// its other dims -- the kernel's streamed dim R, or nothing (P is then X's argument; only at a
// kernel of outputs and with H not covering the row dim) -- lies on G (X's dims and H are G, and
// maybe dims the kernel stores whole: sum(w[h] * o, h) of the attention's o over [b, h, m, e]),
// is an accumulator of that kernel over R or a value computed from one, needs no reduction over
// a dim of G, and no root of the kernel needs X whole: P, and X = the same reduction of P over
// H. make_plan materializes P with the outputs (fusion adds it to the roots of that kernel,
// which stores it beside them), or in one set with the kernel's materialized values, and the
// reduction over H reads it back in a kernel of its own: x is computed once, in the kernel that
// computes the attention, and the last step costs a pass over b * h * m values instead of
// b * h * m * n.
// The cut changes only the order of a reduction (exact for Max, Min and integer sums; float
// sums are reassociated, as any tiled kernel reassociates them).
// Preconditions: a canonical, online-rewritten program; `kernels` from fusing it (make_plan;
// not under --strict). Test: tests/plan/plan_test.cpp (Plan.AReductionOverAnotherOutputsGridIsCut,
// Plan.APartialIsCutOnlyWhereTheOutputsKernelComputesIt,
// Plan.APartialIsCutAtTheKernelThatMaterializesTheAttention); tests/programs/partials.attn on
// every backend.
#include <algorithm>
#include <set>

#include "passes/passes.h"

namespace flashgen {

PartialReductions partial_reductions(const Program& p, const std::vector<OutputKernel>& kernels) {
  struct Cut {
    DimSet inner, outer;  // P reduces over inner (maybe none); X then reduces P over outer
    std::string why;
    int kernel;           // the kernel that stores P
    bool fresh;           // P reduces over R values that need nothing reduced over R
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
      // H: the dims of the grid X reduces; P = X over the rest lies on the grid
      const DimSet h = dimset_intersect(x.reduce, grid);
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
      // A partial over nothing only where H are batch-like dims (heads: P is the lse per head)
      // and the kernel stores outputs: over the rows too, P would be a value per (row, key) the
      // size of the grid, cheaper recomputed than stored; at a kernel of materialized values it
      // is a value of them, which the kernel reading them computes.
      if (inner.empty() && (k.values || dimset_contains(h, k.row))) continue;
      // At a kernel of materialized values, only a fresh accumulator: a reduction over R of
      // values that need no reduction over R themselves (the scores' max over keys, not the
      // sum of softmax(s, n) nor a value of o1). Fused with the values it must run in their one
      // pass; one that needs the kernel's own accumulators whole would split the attention into
      // kernels of its own or, with lowering's cuts, close a dependency cycle.
      if (k.values && over_red) continue;
      // the kernel can compute P (nothing P needs reduces over its grid) and none of its
      // roots needs X whole
      if (over_grid || needs[ki].count(static_cast<int>(i))) continue;
      cuts[static_cast<int>(i)] = {
          inner, h,
          std::string("the partial ") + op_name(x.op) +
              (inner.empty() ? "" : " over " + p.dim_list(inner)) + " of a " + op_name(x.op) +
              " over " + p.dim_list(x.reduce) + ", stored by the kernel of " + k.what +
              " (whose grid has " + p.dim_list(h) + "): the rest, over " + p.dim_list(h) +
              ", runs in a kernel of its own",
          static_cast<int>(ki), !inner.empty() && !over_red};
      break;
    }
  }
  PartialReductions out;
  if (cuts.empty()) {
    out.program = p;
    for (size_t i = 0; i < p.nodes.size(); ++i) out.ids.push_back(static_cast<int>(i));
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
      &final_ids, &out.ids);
  for (auto& [old, part] : partial_of) {
    const int id = final_ids[part];
    // (one partial two cuts share is stored once)
    if (id < 0 || std::find(out.partials.begin(), out.partials.end(), id) != out.partials.end())
      continue;
    out.partials.push_back(id);
    out.kernel.push_back(cuts.at(old).kernel);
    out.fresh.push_back(cuts.at(old).fresh);
    out.why.push_back(cuts.at(old).why);
  }
  return out;
}

}  // namespace flashgen
