// fuse: structural fusion with dimension demotion, the online check, dimension elimination
// and the logical grid (dimension demotion and elimination) -- the decision of what each kernel computes.
//
// For a set of roots (the outputs, or intermediates that must be materialized) it picks:
//   - the reduction dim R that is streamed (demoted from the producers' parallel dims): the
//     reduced dim outermost in the reduction nesting (n above d in attention) for which the
//     group is one-pass;
//   - eliminated dims E: every other reduced dim (d), and root dims that sit in a parameter
//     beside R and are missing from a reduction that depends on R (v's e): held whole in a tile;
//   - the grid G: the roots' common dims minus E, and its row dim: a grid dim that is in the
//     streamed values but in no parameter read with R and a dim of E (k, v: m is in neither;
//     a bias[h, m, n] may hold it), tiled like FlashAttention's q rows.
// One-pass check: every value with R that depends on an accumulator over R must be part of an
// online sum sum(g * exp(x - safe(max(x, R))), R); max/min accumulators must not depend on
// accumulators. That one form stands for the whole exp homomorphism: passes/online_rewrite.cpp
// brings every exp(a*(y - max(y, R)) + c) / exp2(...) (a > 0, c invariant along R, raw or safe
// max) into it, and splits sums only where that reaches it. If a group fails, the accumulators
// it needs early are materialized (computed by an earlier kernel, read back); `materialized`
// records why. So is a value reduced after the loop over a dim its accumulators are computed
// per (a norm over heads of the attention's o): its own kernel keeps that dim in the grid.
// Preconditions: canonical, online-rewritten program. Test: tests/plan/plan_test.cpp
// (Plan.AReductionOfTheAttentionOverItsGridMaterializesIt and the rest).
#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include "flashgen/error.h"
#include "passes/passes.h"
#include "plan/fusion.h"

namespace flashgen {

namespace {

struct Attempt {
  bool ok = false;
  bool split_roots = false;          // the roots cannot share a grid
  std::map<int, std::string> need;   // nodes to materialize
  bool after_loop = false;           // need: only values reduced after the loop (see try_group)
  KernelGroup group;
};

std::string dname(const Program& p, int d) { return p.dims[d]; }

std::string describe(const Program& p, int id) {
  const Node& n = p.nodes[id];
  std::ostringstream os;
  os << "%" << id << " = " << op_name(n.op);
  if (!n.reduce.empty()) os << " over " << p.dim_list(n.reduce);
  os << " " << p.dim_list(n.dims);
  return os.str();
}

void product_factors(const Program& p, int id, std::vector<int>& out, std::vector<int>* muls) {
  if (p.nodes[id].op == Op::Mul) {
    if (muls) muls->push_back(id);
    product_factors(p, p.nodes[id].args[0], out, muls);
    product_factors(p, p.nodes[id].args[1], out, muls);
  } else {
    out.push_back(id);
  }
}

Attempt try_group(const Program& p, const std::vector<int>& roots,
                  const std::set<int>& computed_here, const std::map<int, std::string>& mat,
                  bool one_kernel, bool prefer = true) {
  Attempt at;
  bool skipped = false;
  KernelGroup& g = at.group;
  g.roots = roots;
  // Members: everything the roots need, stopping at materialized nodes made elsewhere.
  std::set<int> mem, loads;
  std::function<void(int)> visit = [&](int id) {
    if (mem.count(id) || loads.count(id)) return;
    if (mat.count(id) && !computed_here.count(id)) {
      loads.insert(id);
      return;
    }
    mem.insert(id);
    for (int a : p.nodes[id].args) visit(a);
  };
  for (int r : roots) visit(r);
  g.members.assign(mem.begin(), mem.end());
  g.loads.assign(loads.begin(), loads.end());
  auto in_kernel = [&](int id) { return mem.count(id) > 0; };

  DimSet g0 = p.nodes[roots[0]].dims;
  for (int r : roots) {
    DimSet keep;
    for (int d : g0)
      if (dimset_contains(p.nodes[r].dims, d)) keep.push_back(d);
    g0 = keep;
  }
  // Candidate streamed dims, outermost reduction first.
  // (depth within the kernel: a loaded value is a leaf)
  std::vector<int> depth(p.nodes.size(), 0);
  for (int id : g.members) {  // (ids ascend: arguments first)
    int d = 0;
    for (int a : p.nodes[id].args)
      if (mem.count(a)) d = std::max(d, depth[a]);
    depth[id] = d + (is_reduction(p.nodes[id].op) ? 1 : 0);
  }
  std::map<int, int> cand;  // dim -> max depth
  DimSet reduced;
  for (int id : g.members) {
    const Node& n = p.nodes[id];
    if (!is_reduction(n.op)) continue;
    for (int d : n.reduce) {
      reduced = dimset_union(reduced, {d});
      cand[d] = std::max(cand[d], depth[id]);
    }
  }
  // (of one depth -- max(s, [h, n]) -- a dim some parameter lacks first: the keys, which k and
  // v have and q lacks, before a batch dim of every parameter)
  std::set<int> in_every;
  for (const auto& [d, dep] : cand) {
    bool every = true;
    for (int id : g.members)
      if (p.nodes[id].op == Op::Param && !dimset_contains(p.nodes[id].dims, d)) every = false;
    if (every) in_every.insert(d);
  }
  std::vector<int> order;
  for (auto& [d, dep] : cand) order.push_back(d);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return cand[a] > cand[b]; });
  const std::vector<int> plain = order;
  if (prefer)
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      if (cand[a] != cand[b]) return cand[a] > cand[b];
      return in_every.count(a) < in_every.count(b);
    });
  const bool reordered = order != plain;
  order.push_back(-1);

  std::map<int, std::string> first_need;
  for (int R : order) {
    KernelGroup k = g;
    k.red = R;
    k.accs.clear();
    k.online.clear();
    k.notes.clear();
    // Eliminated dims.
    DimSet elim = dimset_minus(reduced, R >= 0 ? DimSet{R} : DimSet{});
    DimSet root_dims;
    for (int r : roots) root_dims = dimset_union(root_dims, p.nodes[r].dims);
    if (R >= 0 && dimset_contains(root_dims, R)) continue;
    if (R < 0 && !first_need.empty()) break;  // materialize rather than hold R whole
    if (R >= 0) {
      for (int x : root_dims) {
        if (x == R) continue;
        bool beside = false, missing = false;
        for (int id : k.members) {
          const Node& n = p.nodes[id];
          bool has_r = dimset_contains(n.dims, R) ||
                       (is_reduction(n.op) && dimset_contains(n.reduce, R));
          if (n.op == Op::Param && has_r && dimset_contains(n.dims, x)) beside = true;
          if (is_reduction(n.op) && has_r && !dimset_contains(n.dims, x)) missing = true;
        }
        if (beside && missing) elim = dimset_union(elim, {x});
      }
    }
    // A softmax over a dim held whole (exp(x - max(x, R2)) with R2 eliminated, no root's dim)
    // while a later candidate streams R2: stream R2 instead (a mixture of heads sum(w * o, h)
    // of the attention's o streams the keys, not the heads with every key held whole; one
    // kernel, --strict, holds them whole).
    bool softmax_whole = false;
    for (int id : k.members) {
      const Node& n = p.nodes[id];
      if (n.op != Op::Exp || p.nodes[n.args[0]].op != Op::Sub) continue;
      const int M = match_safe_max(p, p.nodes[n.args[0]].args[1]);
      if (M < 0 || p.nodes[M].op != Op::Max || p.nodes[M].reduce.size() != 1) continue;
      const int r2 = p.nodes[M].reduce[0];
      softmax_whole = softmax_whole || (r2 != R && dimset_contains(elim, r2) &&
                                        !dimset_contains(root_dims, r2) &&
                                        std::find(order.begin(), order.end(), r2) >
                                            std::find(order.begin(), order.end(), R));
    }
    if (softmax_whole && !one_kernel && prefer) {
      skipped = true;
      continue;
    }
    k.elim = elim;
    k.grid = dimset_minus(g0, elim);
    bool roots_fit = true;
    for (int r : roots)
      if (dimset_minus(p.nodes[r].dims, elim) != k.grid) roots_fit = false;
    if (!roots_fit) {
      if (roots.size() > 1) {
        at.split_roots = true;
        return at;
      }
      continue;
    }
    // No member reduces over a grid dim: every reduced dim but R is eliminated, and R is not a
    // root dim (checked above), so a grid point always holds whole reductions.
    if (R < 0) {
      at.ok = true;
      at.group = k;
      if (!order.empty() && order[0] >= 0)
        at.group.notes.push_back("no reduction dim is streamed: reduced dims are held whole");
      return at;
    }
    // Accumulators and the one-pass check.
    std::set<int> accs;
    for (int id : k.members) {
      const Node& n = p.nodes[id];
      if (is_reduction(n.op) && dimset_contains(n.reduce, R)) accs.insert(id);
    }
    std::vector<bool> late(p.nodes.size(), false);
    std::vector<std::set<int>> late_src(p.nodes.size());
    for (int id : k.members) {
      for (int a : p.nodes[id].args)
        if (in_kernel(a) && late[a]) {
          late[id] = true;
          late_src[id].insert(late_src[a].begin(), late_src[a].end());
        }
      if (accs.count(id)) {
        late[id] = true;
        late_src[id] = {id};
      }
    }
    std::map<int, std::string> need;
    auto fail = [&](int id, const std::string& why) {
      for (int s : late_src[id])
        if (!need.count(s))
          need[s] = describe(p, s) + " is needed whole before the loop over " + dname(p, R) +
                    " ends: " + why;
    };
    std::set<int> allowed;  // late body nodes that belong to an online sum
    for (int id : accs) {
      const Node& n = p.nodes[id];
      int arg = n.args[0];
      Accumulator acc;
      acc.node = id;
      acc.op = n.op;
      if (n.op != Op::Sum) {
        if (late[arg]) fail(arg, describe(p, arg) + " feeds a " + op_name(n.op) + " over " +
                                     dname(p, R) + " after depending on a reduction over it");
        k.accs.push_back(acc);
        continue;
      }
      if (!late[arg]) {
        k.accs.push_back(acc);
        continue;
      }
      std::vector<int> fs, muls;
      product_factors(p, arg, fs, &muls);
      bool ok = true;
      std::vector<int> chain = muls;
      for (int f : fs) {
        if (!late[f]) continue;
        const Node& e = p.nodes[f];
        int m = -1;
        if (e.op == Op::Exp && p.nodes[e.args[0]].op == Op::Sub) {
          const Node& sub = p.nodes[e.args[0]];
          int M = match_safe_max(p, sub.args[1]);
          if (M >= 0 && accs.count(M) && p.nodes[M].op == Op::Max && p.nodes[M].reduce ==
              DimSet{R} && p.nodes[M].args[0] == sub.args[0] && !late[sub.args[0]] &&
              dimset_subset(p.nodes[M].dims, n.dims)) {
            m = M;
            acc.exp_factors.push_back(f);
            chain.push_back(f);
            chain.push_back(e.args[0]);
            chain.push_back(sub.args[1]);
            chain.push_back(p.nodes[sub.args[1]].args[0]);  // the eq(M, -inf)
          }
        }
        if (m < 0) {
          ok = false;
          fail(f, describe(p, f) + " is not of the one-pass form exp(x - max(x, " +
                      dname(p, R) + "))");
        } else {
          // One rescale per factor: exp(x - M) * exp(x - M) moves by the square of one.
          acc.rescale_by.push_back(m);
        }
      }
      if (ok) {
        allowed.insert(chain.begin(), chain.end());
        k.accs.push_back(acc);
      }
    }
    for (int id : k.members) {
      if (!late[id] || accs.count(id) || allowed.count(id)) continue;
      bool body = dimset_contains(p.nodes[id].dims, R);
      if (body) fail(id, describe(p, id) + " varies with " + dname(p, R) +
                             " and uses the result of a reduction over it");
    }
    // A reduction after the loop over a dim x that the accumulators it reads are computed
    // per (o / sqrt(sum(o * o, [h, e])), or mean(o, m), of the attention's o): holding x whole
    // would hold every accumulator of each point of x in one grid point, where the
    // accumulators' own kernel keeps x in its grid. Unless something else holds x whole in the
    // loop (a contraction's dim; v's e: beside the streamed dim in a parameter and missing from
    // a reduction over it, or from every parameter without it), the values it reads from the
    // loop are materialized (see `take` below). (Not for one kernel, --strict: that holds x
    // whole.)
    const bool before = !need.empty();
    if (need.empty() && !one_kernel) {
      DimSet whole;  // held whole in the loop by more than the reductions after it
      for (int id : k.members) {
        const Node& n = p.nodes[id];
        if (is_reduction(n.op) && !accs.count(id) && !late[n.args[0]] &&
            dimset_contains(p.nodes[n.args[0]].dims, R))
          whole = dimset_union(whole, n.reduce);
      }
      for (int x : root_dims) {  // beside R in a parameter, never in a reduction over R
        bool beside = false, missing = false;
        for (int id : k.members) {
          const Node& n = p.nodes[id];
          const bool has_r = dimset_contains(n.dims, R) ||
                             (is_reduction(n.op) && dimset_contains(n.reduce, R));
          if (n.op == Op::Param && has_r && dimset_contains(n.dims, x)) beside = true;
          if (is_reduction(n.op) && has_r && !dimset_contains(n.dims, x) &&
              !dimset_contains(n.reduce, x))
            missing = true;
        }
        if (x != R && beside && missing) whole = dimset_union(whole, {x});
      }
      // a dim only beside R: in a parameter with R and in none without it (a head dim of v, as
      // e of linear attention's sum(k * v, n) normalized over e), unlike a batch dim that the
      // rows' parameters have too (h of q)
      DimSet beside_r, rows;
      for (int id : k.members) {
        const Node& n = p.nodes[id];
        if (n.op != Op::Param) continue;
        if (dimset_contains(n.dims, R)) beside_r = dimset_union(beside_r, n.dims);
        else rows = dimset_union(rows, n.dims);
      }
      whole = dimset_union(whole, dimset_minus(dimset_minus(beside_r, rows), {R}));
      for (int id : k.members) {
        const Node& n = p.nodes[id];
        if (!is_reduction(n.op) || accs.count(id) || !late[n.args[0]]) continue;
        DimSet per;  // the dims the accumulators it reads are computed per
        for (int a : late_src[n.args[0]]) per = dimset_union(per, p.nodes[a].dims);
        const DimSet x = dimset_minus(dimset_intersect(n.reduce, per), whole);
        if (x.empty()) continue;
        // (not where the reduction's result flows back into the loop: into a value over R or
        // an accumulator, as sum(p * sum(o1, h), n))
        std::set<int> down = {id};
        bool back = false;
        for (int j : k.members) {
          if (j <= id) continue;
          bool reads = false;
          for (int a : p.nodes[j].args) reads = reads || down.count(a) > 0;
          if (!reads) continue;
          down.insert(j);
          back = back || accs.count(j) || dimset_contains(p.nodes[j].dims, R);
        }
        if (back) continue;
        // the values to materialize: down element-wise nodes of one late argument; a node of
        // several is materialized where no reduction after the loop is in it (o1 = num / den,
        // an lse), else each late argument is followed (exp(lse - max(lse, h)) * o1: lse, o1)
        std::map<int, bool> after_of;  // (memo: a DAG, not a tree)
        std::function<bool(int)> after = [&](int v) {  // a reduction after the loop in v
          auto it = after_of.find(v);
          if (it != after_of.end()) return it->second;
          const Node& vn = p.nodes[v];
          bool a = is_reduction(vn.op) && !accs.count(v);
          for (int u : vn.args) a = a || (in_kernel(u) && late[u] && after(u));
          return after_of[v] = a;
        };
        std::map<int, std::string> targets;
        std::set<int> taken;
        std::function<void(int)> take = [&](int v) {
          if (!taken.insert(v).second) return;
          const Node& vn = p.nodes[v];
          std::set<int> late_args;
          for (int a : vn.args)
            if (in_kernel(a) && late[a]) late_args.insert(a);
          const bool acc = is_reduction(vn.op) && accs.count(v);
          if (!acc && (is_reduction(vn.op) || late_args.size() == 1 || after(v))) {
            for (int a : late_args) take(a);
            return;
          }
          targets[v] = describe(p, v) + " is reduced over " + p.dim_list(x) + " by " +
                       describe(p, id) + ", after the loop over " + dname(p, R) +
                       ": its own kernel keeps " + p.dim_list(x) + " in the grid";
        };
        take(n.args[0]);
        // Not an accumulator itself (a running max over keys, reduced over heads): the online
        // sums of this kernel rescale by it, and reading it back would make them two passes.
        bool acc_target = false;
        for (const auto& [v, why] : targets) acc_target = acc_target || accs.count(v) > 0;
        if (acc_target) continue;
        // Nor where a root still needs, besides those values, an accumulator computed per x
        // (o = sum(o1, h) * sum(p, n) / sum(p, n) would loop over the keys again with x whole).
        std::set<int> seen;
        bool again = false;
        std::function<void(int)> reach = [&](int v) {
          if (again || !in_kernel(v) || targets.count(v) || !seen.insert(v).second) return;
          if (accs.count(v) && !dimset_intersect(p.nodes[v].dims, x).empty()) again = true;
          for (int a : p.nodes[v].args) reach(a);
        };
        for (int r : roots) reach(r);
        if (again) continue;
        // (a value already materialized is a root here: the roots' split keeps x on its grid)
        for (const auto& [v, why] : targets)
          if (!need.count(v) && !mat.count(v)) need[v] = why;
      }
    }
    if (!need.empty()) {
      // Materialize what the outermost reduction needs rather than stream an inner dim and
      // hold the outer one whole.
      if (first_need.empty()) {
        first_need = need;
        at.after_loop = !before;
      }
      break;
    }
    for (int id : k.members)
      if (allowed.count(id) && dimset_contains(p.nodes[id].dims, R)) k.online.push_back(id);
    std::stable_sort(k.accs.begin(), k.accs.end(), [&](const Accumulator& a,
                                                       const Accumulator& b) {
      return (a.op == Op::Sum) < (b.op == Op::Sum);
    });
    // Row dim: a grid dim in the streamed values and in no parameter read beside R (the last
    // such in the output's order: m). Failing that, in no parameter read beside R together with
    // a whole (eliminated) dim: the operands streamed per key tile (k[h, n, d], v[h, n, e])
    // carry the batch and head dims, while an element tile such as bias[h, m, n] may hold the
    // rows (then m is the only grid dim that k and v lack).
    std::vector<int> pref;  // the output's dim order, else the grid's
    for (int r : roots) {
      bool is_out = false;
      for (const Output& o : p.outputs)
        if (o.node == r) {
          pref = o.dims;
          is_out = true;
          break;
        }
      if (is_out) break;
    }
    if (pref.empty()) pref = k.grid;
    auto pick_row = [&](bool strict) {
      int found = -1;
      for (int x : pref) {
        if (!dimset_contains(k.grid, x)) continue;
        bool in_body = false, beside = false;
        for (int id : k.members) {
          const Node& n = p.nodes[id];
          if (!dimset_contains(n.dims, R) || !dimset_contains(n.dims, x)) continue;
          in_body = true;
          if (n.op == Op::Param && (strict || dimset_minus(n.dims, elim) != n.dims))
            beside = true;
        }
        if (in_body && !beside) found = x;
      }
      return found;
    };
    int row = pick_row(true);
    if (row < 0) row = pick_row(false);
    k.row = row;
    at.ok = true;
    at.group = k;
    return at;
  }
  at.need = first_need;
  // (the preferred candidate needs values whole before its loop ends, as a softmax over keys
  // inside a sum over keys and heads: the candidates by depth alone, none skipped)
  if ((skipped || reordered) && !first_need.empty() && !at.after_loop)
    return try_group(p, roots, computed_here, mat, one_kernel, false);
  return at;
}

// The kernel of `roots` (each computed and stored there). Roots do not share a kernel that
// holds whole a dim one of them keeps in the grid of its own kernel, where that dim is reduced
// in the joint kernel (an output over [b, m] summed over heads beside the attention's
// [b, h, m, e]) or where no root's own kernel holds it whole either (a count over [m] beside
// it: b and h sit in k and v beside the keys and are missing from the count's sum, so the
// joint kernel would hold them whole); either would take the attention off its grid. A dim
// one root holds whole on its own (the value dim e of o, beside g * logsumexp(s) over
// [b, h, m, e]) keeps them together.
Attempt attempt(const Program& p, const std::vector<int>& roots,
                const std::map<int, std::string>& mat, bool one_kernel) {
  const std::set<int> here(roots.begin(), roots.end());
  Attempt a = try_group(p, roots, here, mat, one_kernel);
  // (roots that would materialize a value reduced after the loop are tried apart first: the
  // reduction may belong to a root whose own kernel has another grid)
  if (!a.ok && a.after_loop && roots.size() > 1) {
    Attempt split;
    split.split_roots = true;
    return split;
  }
  if (!a.ok || roots.size() < 2) return a;
  DimSet reduced, whole_alone;
  for (int id : a.group.members)
    if (is_reduction(p.nodes[id].op)) reduced = dimset_union(reduced, p.nodes[id].reduce);
  std::vector<DimSet> grids;
  for (int r : roots) {
    const Attempt alone = try_group(p, {r}, {r}, mat, one_kernel);
    if (!alone.ok) continue;
    grids.push_back(alone.group.grid);
    whole_alone = dimset_union(whole_alone, alone.group.elim);
  }
  for (const DimSet& grid : grids)
    for (int d : grid)
      if (dimset_contains(a.group.elim, d) &&
          (dimset_contains(reduced, d) || !dimset_contains(whole_alone, d))) {
        Attempt split;
        split.split_roots = true;
        return split;
      }
  return a;
}

}  // namespace

Fusion fuse(const Program& p, const std::vector<Materialize>& materialize, bool one_kernel) {
  Fusion f;
  std::set<int> seeded;
  for (const Materialize& m : materialize)
    for (size_t i = 0; i < m.nodes.size(); ++i) {
      f.materialized[m.nodes[i]] = i < m.whys.size() ? m.whys[i] : m.why;
      seeded.insert(m.nodes[i]);
    }
  bool group_by_grid = true;
  for (int iter = 0; iter < 1000; ++iter) {
    f.groups.clear();
    bool restart = false;
    // Materialized nodes first: the given sets as they are, the others grouped by dim set;
    // then the outputs.
    // (each set: the roots of one kernel, which computes and stores them)
    std::vector<std::vector<int>> sets;
    std::vector<int> outs;  // the outputs' roots: the partials to store with them first
    for (const Materialize& m : materialize) {
      if (m.with_outputs)
        outs.insert(outs.end(), m.nodes.begin(), m.nodes.end());
      else
        sets.push_back(m.nodes);
    }
    // (grouped by the grid of each one's own kernel, else by dims: the attention's o and its
    // log-sum-exp, materialized for reductions over heads, share the attention's kernel)
    std::map<std::pair<bool, DimSet>, std::vector<int>> by_grid;
    for (auto& [id, why] : f.materialized) {
      if (seeded.count(id)) continue;
      // (after a cycle, by dims only)
      const Attempt alone = group_by_grid ? attempt(p, {id}, f.materialized, one_kernel)
                                          : Attempt{};
      by_grid[alone.ok ? std::make_pair(true, alone.group.grid)
                       : std::make_pair(false, p.nodes[id].dims)]
          .push_back(id);
    }
    for (auto& [key, ids] : by_grid) sets.push_back(ids);
    // (an output whose node is materialized is stored by the kernel that materializes it)
    for (const Output& o : p.outputs)
      if (!f.materialized.count(o.node) && std::find(outs.begin(), outs.end(), o.node) == outs.end())
        outs.push_back(o.node);
    if (!outs.empty()) sets.push_back(outs);
    for (size_t si = 0; si < sets.size() && !restart; ++si) {
      const std::vector<int> roots = sets[si];
      Attempt a = attempt(p, roots, f.materialized, one_kernel);
      if (a.ok) {
        f.groups.push_back(a.group);
        continue;
      }
      if (a.split_roots && roots.size() > 1) {
        // Greedily, each root joins the first kernel of the roots before it that it shares a
        // grid with, else starts one.
        std::vector<std::vector<int>> parts;
        for (int r : roots) {
          bool placed = false;
          for (std::vector<int>& part : parts) {
            std::vector<int> with = part;
            with.push_back(r);
            if (!attempt(p, with, f.materialized, one_kernel).split_roots) {
              part = with;
              placed = true;
              break;
            }
          }
          if (!placed) parts.push_back({r});
        }
        for (const std::vector<int>& part : parts) sets.push_back(part);
        continue;
      }
      bool fresh = false;
      for (auto& [id, why] : a.need)
        if (!f.materialized.count(id)) {
          f.materialized[id] = why;
          fresh = true;
        }
      if (fresh) {
        restart = true;
      } else if (roots.size() > 1) {
        for (int r : roots) sets.push_back({r});
      } else {
        throw ProgramError(p.loc, "internal error: no kernel can compute " + describe(p, roots[0]));
      }
    }
    if (restart) continue;
    // Execution order: a kernel after the kernels whose nodes it loads.
    std::vector<KernelGroup> ordered;
    std::vector<bool> done(f.groups.size(), false);
    std::set<int> stored;
    for (size_t round = 0; round < f.groups.size(); ++round) {
      for (size_t i = 0; i < f.groups.size(); ++i) {
        if (done[i]) continue;
        bool ready = true;
        for (int l : f.groups[i].loads)
          if (!stored.count(l)) ready = false;
        if (!ready) continue;
        done[i] = true;
        ordered.push_back(f.groups[i]);
        for (int r : f.groups[i].roots) stored.insert(r);
      }
    }
    if (ordered.size() != f.groups.size()) {
      // Two materialized values one kernel computes, one needing a value that needs the other
      // (through a kernel of its own): group them by dims, as fusion did before, then give up.
      if (group_by_grid) {
        group_by_grid = false;
        continue;
      }
      throw ProgramError(p.loc, "internal error: kernels depend on each other in a cycle");
    }
    f.groups = ordered;
    return f;
  }
  throw ProgramError(p.loc, "internal error: fusion did not converge");
}

}  // namespace flashgen
