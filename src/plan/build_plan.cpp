// build_plan: lays out each kernel group (passes/fuse.cpp) as a PlanKernel: buffers, phases,
// local dims, which values are inlined, contractions, reads and writes.
// Preconditions: a canonical, online-rewritten program. Test: tests/plan/plan_test.cpp.
#include <algorithm>
#include <set>

#include "flashgen/error.h"
#include "passes/passes.h"
#include "plan/fusion.h"
#include "plan/plan.h"

namespace flashgen {

namespace {

bool is_leaf(Op op) { return op == Op::Param || op == Op::Const || op == Op::Index || op == Op::Size; }

// A load of a parameter, possibly converted: an operand a tensor core can take.
bool is_operand(const Program& p, int id) {
  const Node& n = p.nodes[id];
  if (n.op == Op::Cast) return is_operand(p, n.args[0]);
  return n.op == Op::Param;
}

}  // namespace

Plan make_plan(const Program& prog, const CompileOptions& opt,
               const std::vector<Materialize>& materialize) {
  Plan plan;
  // passes/partial_reductions.cpp: a reduction over a batch-like dim of the grid of a kernel of
  // outputs, or of a kernel of values fusion materializes (the attention's o, for a norm over
  // heads), is cut at that grid, its partial stored by that kernel (the kernels of the program
  // fused as it is, without `materialize`, which names nodes of the cut program; not under
  // --strict, which asks for one kernel and nothing materialized). With one output and nothing
  // materialized there is no such kernel to cut at: the output's kernel needs every reduction.
  std::set<int> out_nodes;
  for (const Output& o : prog.outputs) out_nodes.insert(o.node);
  std::vector<OutputKernel> kernels;
  Fusion uncut;
  if (!opt.strict) uncut = fuse(prog);
  for (const KernelGroup& g : uncut.groups) {
    std::string what;
    bool values = true;  // every root a value fusion materialized
    DimSet stored;
    for (int r : g.roots) {
      if (what.empty() && out_nodes.count(r))
        for (const Output& o : prog.outputs)
          if (what.empty() && o.node == r) what = "output '" + o.name + "'";
      values = values && !out_nodes.count(r) && uncut.materialized.count(r);
      stored = dimset_union(stored, prog.nodes[r].dims);
    }
    if (values)
      what = std::string("the materialized ") + op_name(prog.nodes[g.roots[0]].op) + " " +
             prog.dim_list(prog.nodes[g.roots[0]].dims);
    if ((!what.empty() && out_nodes.size() > 1) || values)
      kernels.push_back(
          {g.roots, g.grid, dimset_intersect(g.elim, stored), g.red, g.row, what, values});
  }
  // (kernels of outputs first: a partial both could store goes with the outputs)
  std::stable_partition(kernels.begin(), kernels.end(),
                        [](const OutputKernel& k) { return !k.values; });
  PartialReductions cut = partial_reductions(prog, kernels);
  plan.program = std::move(cut.program);
  const Program& p = plan.program;
  std::vector<Materialize> all = materialize;
  // A partial goes with the outputs (fusion stores it in their kernel), or, a fresh accumulator
  // of a kernel that materializes values (the attention's o, itself an output or not), in one set
  // with them: fusion would otherwise compute it in a kernel of its own, and where it is the
  // softmax's running max, the attention would read it back.
  std::map<int, Materialize> beside;  // per kernel that materializes values: them and partials
  for (size_t i = 0; i < cut.partials.size(); ++i) {
    const OutputKernel& k = kernels[cut.kernel[i]];
    std::vector<int> values;
    if (cut.fresh[i])
      for (int r : k.roots)
        if (uncut.materialized.count(r)) values.push_back(r);
    if (values.empty()) {
      all.push_back({{cut.partials[i]}, cut.why[i], /*with_outputs=*/true});
      continue;
    }
    auto [it, first] = beside.try_emplace(cut.kernel[i]);
    std::vector<int>& set = it->second.nodes;
    if (first)
      for (int r : values) {
        set.push_back(cut.ids[r]);
        it->second.whys.push_back(uncut.materialized.at(r));
      }
    // (the partial may be one of those values: the running max the uncut fusion materialized)
    if (std::find(set.begin(), set.end(), cut.partials[i]) != set.end()) continue;
    set.push_back(cut.partials[i]);
    it->second.whys.push_back(cut.why[i]);
  }
  for (auto& [ki, m] : beside) all.push_back(m);
  Fusion f = fuse(p, all, opt.strict);

  std::vector<int> param_buf(p.params.size());
  for (size_t i = 0; i < p.params.size(); ++i) {
    PlanBuffer b;
    b.kind = PlanBuffer::Input;
    b.name = p.params[i].name;
    b.param = static_cast<int>(i);
    b.type = p.params[i].type;
    b.dims = p.params[i].dims;
    param_buf[i] = static_cast<int>(plan.buffers.size());
    plan.buffers.push_back(b);
  }
  std::map<int, std::vector<int>> out_bufs;  // node -> output buffers
  for (const Output& o : p.outputs) {
    PlanBuffer b;
    b.kind = PlanBuffer::Output;
    b.name = o.name;
    b.node = o.node;
    b.type = o.type;
    b.dims = o.dims;
    out_bufs[o.node].push_back(static_cast<int>(plan.buffers.size()));
    plan.buffers.push_back(b);
  }
  // An intermediate for each materialized node a kernel loads (one that only an output is
  // needs none: the kernel that materializes it stores the output).
  std::set<int> loaded;
  for (const KernelGroup& g : f.groups) loaded.insert(g.loads.begin(), g.loads.end());
  std::map<int, int> mat_buf;
  int tmp = 0;
  for (auto& [id, why] : f.materialized) {
    if (!loaded.count(id) && out_bufs.count(id)) {
      for (int b : out_bufs.at(id)) {
        plan.buffers[b].reason = "stored by the kernel that materializes it: " + why;
        plan.notes.push_back(plan.buffers[b].name + " (" + node_text(p, id) + ") is " +
                             plan.buffers[b].reason);
      }
      continue;
    }
    PlanBuffer b;
    b.kind = PlanBuffer::Intermediate;
    b.name = "tmp" + std::to_string(tmp++);
    b.node = id;
    b.type = p.nodes[id].type;
    b.dims = p.nodes[id].dims;
    b.reason = why;
    mat_buf[id] = static_cast<int>(plan.buffers.size());
    plan.buffers.push_back(b);
    plan.notes.push_back(b.name + " (" + node_text(p, id) + ") is materialized: " + why);
  }

  for (size_t gi = 0; gi < f.groups.size(); ++gi) {
    const KernelGroup& g = f.groups[gi];
    PlanKernel k;
    k.name = p.name + "_k" + std::to_string(gi);
    k.red_dim = g.red;
    k.row_dim = g.row;
    k.red_tile = g.red >= 0 ? 64 : 1;
    k.row_tile = g.row >= 0 ? 16 : 1;
    k.elim = g.elim;
    k.accs = g.accs;
    k.notes = g.notes;
    // Grid order: the first root's memory order when it is an output, else dim order.
    std::vector<int> order;
    for (const Output& o : p.outputs)
      if (o.node == g.roots[0]) order = o.dims;
    for (int d : g.grid)
      if (std::find(order.begin(), order.end(), d) == order.end()) order.push_back(d);
    for (int d : order)
      if (dimset_contains(g.grid, d)) k.grid.push_back(d);

    std::set<int> accs, online(g.online.begin(), g.online.end()), loads(g.loads.begin(),
                                                                         g.loads.end());
    for (const Accumulator& a : g.accs) accs.insert(a.node);
    std::set<int> members(g.members.begin(), g.members.end());
    std::vector<int> all = g.members;
    all.insert(all.end(), g.loads.begin(), g.loads.end());
    std::sort(all.begin(), all.end());
    // Late: depends on an accumulator.
    std::map<int, bool> late;
    for (int id : all) {
      bool l = accs.count(id) > 0;
      if (members.count(id))
        for (int a : p.nodes[id].args) l = l || late[a];
      if (loads.count(id)) l = false;
      late[id] = l;
    }
    // Consumers inside the kernel.
    std::map<int, std::vector<int>> users;
    for (int id : g.members)
      if (!loads.count(id))
        for (int a : p.nodes[id].args) users[a].push_back(id);
    std::set<int> roots(g.roots.begin(), g.roots.end());
    std::map<int, bool> inl;
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      int id = *it;
      const Node& n = p.nodes[id];
      bool in = false;
      if (n.op == Op::Param && g.red >= 0 && dimset_minus(n.dims, g.grid) != DimSet{} &&
          !dimset_minus(dimset_minus(n.dims, g.grid), {g.red}).empty()) {
        // Tile load: a parameter with a whole (eliminated) dim is copied into a contiguous
        // f32 tile once (q rows per grid point, k/v per tile of R), so contractions read
        // unit-stride memory whatever the input's strides.
        in = false;
      } else if (loads.count(id) || is_leaf(n.op)) {
        in = true;
      } else if (match_safe_max(p, id) >= 0 ||
                 (n.op == Op::Eq && users[id].size() == 1 &&
                  match_safe_max(p, users[id][0]) >= 0)) {
        in = true;
      } else if (!is_reduction(n.op) && !roots.count(id) && users[id].size() == 1) {
        const Node& u = p.nodes[users[id][0]];
        in = is_reduction(u.op) || inl[users[id][0]];
      }
      inl[id] = in;
    }
    for (int id : all) {
      const Node& n = p.nodes[id];
      PlanValue v;
      v.node = id;
      bool body = g.red >= 0 && dimset_contains(n.dims, g.red);
      v.phase = body ? Phase::Body : (late[id] ? Phase::Epilogue : Phase::Prologue);
      if (g.row >= 0 && dimset_contains(n.dims, g.row)) v.local_dims.push_back(g.row);
      if (body) v.local_dims.push_back(g.red);
      for (int d : n.dims)
        if (dimset_contains(g.elim, d)) v.local_dims.push_back(d);
      v.inlined = inl[id];
      if (loads.count(id)) v.load_buffer = mat_buf.at(id);
      v.online = online.count(id) > 0;
      if (n.op == Op::Sum && dimset_subset(n.reduce, g.elim) && p.nodes[n.args[0]].op == Op::Mul) {
        const Node& m = p.nodes[n.args[0]];
        int a = m.args[0], b = m.args[1];
        if (is_operand(p, a) && is_operand(p, b)) {
          const DimSet& da = p.nodes[a].dims;
          const DimSet& db = p.nodes[b].dims;
          bool lines_up = dimset_subset(n.reduce, da) && dimset_subset(n.reduce, db) &&
                          dimset_minus(da, db) != DimSet{} && dimset_minus(db, da) != DimSet{};
          v.contraction = lines_up;
        }
      }
      k.values.push_back(v);
      if (n.op == Op::Param) k.reads.push_back(param_buf[n.param]);
      if (n.op == Op::Gather) k.reads.push_back(param_buf[n.param]);
      if (loads.count(id)) k.reads.push_back(mat_buf.at(id));
    }
    std::sort(k.reads.begin(), k.reads.end());
    k.reads.erase(std::unique(k.reads.begin(), k.reads.end()), k.reads.end());
    for (int r : g.roots) {  // (a group's roots are all materialized, or all outputs)
      if (mat_buf.count(r)) k.writes.push_back(mat_buf.at(r));
      if (out_bufs.count(r))
        for (int b : out_bufs.at(r)) k.writes.push_back(b);
    }
    if (k.red_dim >= 0) {
      std::string e;
      for (int d : k.elim) e += (e.empty() ? "" : ", ") + p.dims[d];
      k.notes.push_back("streams " + p.dims[k.red_dim] + " in tiles of " +
                        std::to_string(k.red_tile) + (e.empty() ? "" : "; holds " + e + " whole"));
    }
    plan.kernels.push_back(k);
  }
  return plan;
}

const PlanValue* PlanKernel::value(int node) const {
  for (const PlanValue& v : values)
    if (v.node == node) return &v;
  return nullptr;
}

}  // namespace flashgen
