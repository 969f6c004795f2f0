// partial_reductions: the cut of a reduction that spans a grid dim of another output's kernel.
//
// An output over fewer dims than the attention beside it -- `out o: [b, h, m, e]` and
// `out cnt: [b, m] = sum(x, [h, n])` -- is planned by fusion in a kernel of its own (roots whose
// joint kernel would hold a dim whole that one of them keeps in its grid do not share one:
// passes/fuse.cpp), which still computes x for every head and key. A Sum, Max or Min X over
// dims that meet the grid G of the kernel of an output O that does not depend on X, with X's
// dims and that meet H all in G, is cut in two: the partial P = X's reduction over its other
// dims (or, with none left, X's argument) -- a value on G -- and X = the same reduction of P
// over H (where P would be X's argument, only if that costs a reduction: a value computed from
// the inputs alone, a kernel of X's own computes as cheaply). make_plan materializes P with the outputs (fusion adds it to the roots of O's
// kernel, which stores it beside O) and the reduction over H reads it back in a kernel of its
// own: x is computed once, in the kernel that computes the attention, and the last step costs
// a pass over b * h * m values instead of b * h * m * n.
// The cut changes only the order of a reduction (exact for Max, Min and integer sums; float
// sums are reassociated, as any tiled kernel reassociates them).
// Preconditions: a canonical, online-rewritten program; `output_grids` from fusing it
// (make_plan). Test: tests/plan/plan_test.cpp (Plan.AReductionOverAnotherOutputsGridIsCut);
// tests/programs/partials.attn on every backend.
#include <algorithm>

#include "passes/passes.h"

namespace flashgen {

PartialReductions partial_reductions(const Program& p,
                                     const std::vector<std::pair<int, DimSet>>& output_grids) {
  struct Cut {
    DimSet inner, outer;  // P reduces over inner (maybe none); X then reduces P over outer
    std::string why;
  };
  std::map<int, Cut> cuts;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const Node& x = p.nodes[i];
    if (!is_reduction(x.op)) continue;
    for (const auto& [out_node, grid] : output_grids) {
      const DimSet h = dimset_minus(x.reduce, dimset_minus(x.reduce, grid));
      if (h.empty() || !dimset_subset(dimset_union(x.dims, h), grid)) continue;
      if (closure_of(p, out_node).count(static_cast<int>(i))) continue;  // O needs X whole
      std::string name;
      for (const Output& o : p.outputs)
        if (o.node == out_node && name.empty()) name = o.name;
      const DimSet inner = dimset_minus(x.reduce, h);
      if (inner.empty()) {  // P is X's argument: worth storing only if it costs a reduction
        bool reduces = false;
        for (int a : closure_of(p, x.args[0])) reduces = reduces || is_reduction(p.nodes[a].op);
        if (!reduces) continue;
      }
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
    if (id < 0) continue;
    out.partials.push_back(id);
    out.why.push_back(cuts.at(old).why);
  }
  return out;
}

}  // namespace flashgen
