// classify_tiles: finds, per kernel, the mask condition that kills every accumulator's
// contribution where it is false (block sparsity). A max over R of where(c, s, -inf) (a min of
// where(c, s, inf)) gains nothing where c is false, and an online sum of g * exp(x - safe(max(x))) with that x adds
// exp(-inf) = 0 there, and a plain sum of where(c, w, 0), or of it times anything (the strong
// zero: 0 * inf = 0), adds 0 there; if every accumulator is of these forms with the same c, a
// tile on which c is false everywhere can be skipped and a tile on which it is true everywhere
// can drop the where. The emitter decides each tile at run time by interval arithmetic on c over the tile's
// index ranges (codegen: emit_tile_class, emit_sm80 classify); a gather by plain dim indices
// over the row or the key dim (doc[m], doc[n]) is bounded by the min and max of the values the
// tile reads, other data is "unknown", so `doc[m] == doc[n]` skips tiles between documents and
// `... and n <= m` still skips the tiles above the diagonal for any ids. A parameter read by
// name at its own dims (`win` of win: i32[], `pad` of pad: bool[b, n]) is such a read too.
// A plain sum of a bool cast to a number (`sum(f32(keep), n)`: 0 where keep is false) counts
// as a sum of where(keep, 1, 0) (the summand itself only, not a factor of a product: a cautious
// reach, which the count of kept keys needs). A data read the rules cannot use (under sin, or
// in a mask that stays undecided) is listed here all the same: the targets take the ranges that
// decide tiles (codegen/interval_code.h, deciding_data_ranges). Accumulators whose conditions
// differ but share a conjunct (the attention's `keep` and a count's `keep and s > 0`) are all
// killed where that conjunct is false: the mask is the largest conjunct every condition has (a
// tile where it is true everywhere evaluates the rest of each condition with it assumed true).
// A comparison of a masked score with a constant that fails where the score is masked
// (`s > 0.0` of s = where(keep, q.k, -inf)) has keep as a conjunct too.
// Preconditions: a plan of a canonical, online-rewritten program (make_plan), whose
// accumulators carry their exp factors.
// Test: tests/plan/plan_test.cpp (mask found), tests/cpu (skipping keeps results exact).
#include <algorithm>
#include <cmath>

#include "passes/passes.h"

#include "plan/plan.h"

namespace flashgen {

namespace {

// The c of x = where(c, a, fill), or -1 (fill: -inf under a max, inf under a min).
int kill_condition(const Program& p, int x, double fill = -INFINITY) {
  const Node& n = p.nodes[x];
  if (n.op == Op::Where && is_const(p, n.args[2], fill)) return n.args[0];
  return -1;
}

// The c of x = where(c, a, 0), or of a product with such a factor (0 * y = 0 for every y), or -1.
int zero_condition(const Program& p, int x) {
  const Node& n = p.nodes[x];
  if (n.op == Op::Where && is_const(p, n.args[2], 0.0)) return n.args[0];
  if (n.op == Op::Mul) {
    const int a = zero_condition(p, n.args[0]);
    return a >= 0 ? a : zero_condition(p, n.args[1]);
  }
  return -1;
}

// The c of a summand: zero_condition's, or c of a number cast from the bool c (0 where c is
// false; as the summand itself, not as a factor of a product).
int summand_condition(const Program& p, int x) {
  const Node& n = p.nodes[x];
  if (n.op == Op::Cast && p.nodes[n.args[0]].type == DType::boolean) return n.args[0];
  return zero_condition(p, x);
}


// The mask's data reads (gathers by plain dim indices, parameters read by name at their own
// dims) bounded by the data a tile reads (DataRange).
std::vector<DataRange> data_ranges(const Program& p, const PlanKernel& k) {
  auto grid = [&k](int d) {
    return d != k.row_dim && std::find(k.grid.begin(), k.grid.end(), d) != k.grid.end();
  };
  std::vector<DataRange> out;
  for (int id : closure_of(p, k.tiles.mask)) {
    const Node& n = p.nodes[id];
    if (n.op != Op::Gather && n.op != Op::Param) continue;
    int over = -1, count = 0;
    for (int d : read_dims(p, id)) {
      if (d < 0) count = 2;  // (a gather by an index that is not a plain dim index)
      else if (d == k.row_dim || d == k.red_dim) over = d, ++count;
      else if (!grid(d)) count = 2;
    }
    if (count <= 1) out.push_back({id, over});  // count 0: over grid dims only (len[b], win)
  }
  return out;
}
// The M of a comparison of x = where(M, a, -inf) (or +inf) with a constant that is false
// wherever x is that fill -- x > c, x >= c with c > -inf, and their mirrors; x < c, x <= c with
// c < inf under +inf -- so that it holds only where M does (a count of positive scores
// `s > 0.0` of a masked s = where(keep, q.k, -inf)); else -1.
int implied_mask(const Program& p, int c) {
  const Node& n = p.nodes[c];
  if (n.op != Op::Gt && n.op != Op::Ge && n.op != Op::Lt && n.op != Op::Le) return -1;
  // as x OP k with x the where: a mirrored comparison flips
  for (int side = 0; side < 2; ++side) {
    const Node& k = p.nodes[n.args[1 - side]];
    if (k.op != Op::Const) continue;
    Op op = n.op;
    if (side == 1)
      op = op == Op::Gt ? Op::Lt : op == Op::Lt ? Op::Gt : op == Op::Ge ? Op::Le : Op::Ge;
    const bool above = op == Op::Gt || op == Op::Ge;  // x > k: false where x = -inf
    const double fill = above ? -INFINITY : INFINITY;
    const bool strict = op == Op::Gt || op == Op::Lt;
    if (!strict && k.value == fill) continue;  // (-inf >= -inf holds)
    const int m = kill_condition(p, n.args[side], fill);
    if (m >= 0) return m;
  }
  return -1;
}

// c and its conjuncts, recursively (c = a and b: c, a, b and theirs; a comparison that holds
// only where a mask M does: M and its conjuncts too).
void conjuncts(const Program& p, int c, std::vector<int>& out) {
  out.push_back(c);
  const Node& n = p.nodes[c];
  if (n.op == Op::And)
    for (int a : n.args) conjuncts(p, a, out);
  const int m = implied_mask(p, c);
  if (m >= 0) conjuncts(p, m, out);
}
}  // namespace

void classify_tiles(Plan& plan) {
  const Program& p = plan.program;
  for (PlanKernel& k : plan.kernels) {
    k.tiles = TileClasses{};
    if (k.red_dim < 0 || k.accs.empty()) continue;
    bool ok = true;
    std::vector<int> common;  // the conjuncts every accumulator's condition has
    bool first = true;
    for (const Accumulator& a : k.accs) {
      int c = -1;
      if (a.op == Op::Max || a.op == Op::Min) {
        c = kill_condition(p, p.nodes[a.node].args[0], a.op == Op::Max ? -INFINITY : INFINITY);
      } else if (a.op == Op::Sum && !a.rescale_by.empty() &&
                 std::all_of(a.rescale_by.begin(), a.rescale_by.end(),
                             [&](int m) { return m == a.rescale_by[0]; })) {
        c = kill_condition(p, p.nodes[a.rescale_by[0]].args[0]);  // one max, once or more
      } else if (a.op == Op::Sum && a.rescale_by.empty()) {
        c = summand_condition(p, p.nodes[a.node].args[0]);  // a plain sum
      }
      if (c < 0) {
        ok = false;
        break;
      }
      std::vector<int> cs;
      conjuncts(p, c, cs);
      if (first) {
        common = cs;
      } else {
        std::vector<int> both;
        for (int x : common)
          if (std::find(cs.begin(), cs.end(), x) != cs.end()) both.push_back(x);
        common = both;
      }
      first = false;
    }
    // the largest shared conjunct (one that holds the others: keep over its n <= m)
    int mask = -1;
    size_t most = 0;
    for (int x : common) {
      std::vector<int> xs;
      conjuncts(p, x, xs);
      if (xs.size() > most) {
        most = xs.size();
        mask = x;
      }
    }
    if (!ok || mask < 0) {
      k.tiles.note = "no mask kills every accumulator: every tile is computed";
      continue;
    }
    k.tiles.mask = mask;
    k.tiles.data_ranges = data_ranges(p, k);
    k.tiles.skip_empty = true;
    k.tiles.unmasked_full = true;
    k.tiles.note = "tiles where %" + std::to_string(mask) + " is false are skipped";
  }
}

}  // namespace flashgen
