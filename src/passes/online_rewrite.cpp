// online_rewrite: the algebra that puts dependent reductions into one-pass form.
//
// For every sum over dims D whose argument depends on another reduction over a dim of D (the
// softmax's max and sum over n feeding sum(p * v, n)), the sum is
//   - distributed over + and - (and unary -):   sum(a - l*b, D) = sum(a, D) - sum(l*b, D)
//   - freed of factors invariant in D:          sum(c * f, D) = c * sum(f, D)
//   - freed of invariant divisors:              sum(div_or_zero(e, L) * v, D)
//                                                 = div_or_zero(sum(e * v, D), L)
// until each remaining sum is sum(f, D) with f a product of factors that vary with D. The
// planner then recognizes sum(g * exp(x - safe(max(x, n))), n) as an online accumulator that
// shares the running max of x (DESIGN.md idea 3). A sum over a dim its argument lacks becomes a
// multiplication by the extent. Sums that do not depend on a reduction over D are untouched.
// Preconditions: canonical program (lower_sugar ran). Test: tests/passes/passes_test.cpp.
#include <map>

#include "passes/passes.h"

namespace flashgen {

namespace {

struct OnlineRewriter {
  ProgramBuilder& b;
  std::map<int, DimSet> upstream;  // node -> dims reduced by reductions it depends on

  const DimSet& reduced_above(int id) {
    auto it = upstream.find(id);
    if (it != upstream.end()) return it->second;
    Node n = b.node(id);
    DimSet s;
    if (is_reduction(n.op)) s = n.reduce;
    for (int a : n.args) s = dimset_union(s, reduced_above(a));
    return upstream[id] = s;
  }
  bool depends(int id, const DimSet& d) {
    const DimSet& r = reduced_above(id);
    for (int x : d)
      if (dimset_contains(r, x)) return true;
    return false;
  }
  bool varies(int id, const DimSet& d) {
    for (int x : d)
      if (dimset_contains(b.node(id).dims, x)) return true;
    return false;
  }
  std::vector<std::string> names(const DimSet& d) {
    std::vector<std::string> out;
    for (int x : d) out.push_back(b.program().dims[x]);
    return out;
  }
  Value extent_product(int like, const DimSet& d) {
    bool integer = is_integer(b.node(like).type);
    Value c = b.constant(1.0, integer ? DType::i64 : DType::f32);
    for (int x : d) {
      Value s = b.size(b.program().dims[x]);
      c = c * (integer ? s : b.cast(s, DType::f32));
    }
    return c;
  }
  void factors(int id, std::vector<int>& out) {
    Node n = b.node(id);
    if (n.op == Op::Mul) {
      factors(n.args[0], out);
      factors(n.args[1], out);
    } else {
      out.push_back(id);
    }
  }
  Value product(const std::vector<int>& fs) {
    Value v{&b, fs[0]};
    for (size_t i = 1; i < fs.size(); ++i) v = v * Value{&b, fs[i]};
    return v;
  }
  Value plain(int x, const DimSet& d) { return b.sum(Value{&b, x}, names(d)); }

  Value sum_of(int x, const DimSet& d) {
    DimSet present, missing;
    for (int k : d) (dimset_contains(b.node(x).dims, k) ? present : missing).push_back(k);
    if (!missing.empty()) {
      Value s = present.empty() ? Value{&b, x} : sum_of(x, present);
      return s * extent_product(s.id, missing);
    }
    if (!depends(x, d)) return plain(x, d);
    Node n = b.node(x);
    switch (n.op) {
      case Op::Add: return sum_of(n.args[0], d) + sum_of(n.args[1], d);
      case Op::Sub: return sum_of(n.args[0], d) - sum_of(n.args[1], d);
      case Op::Neg: return -sum_of(n.args[0], d);
      case Op::Div:
      case Op::DivOrZero:
        if (!varies(n.args[1], d))
          return b.binary(n.op, sum_of(n.args[0], d), Value{&b, n.args[1]});
        return plain(x, d);
      case Op::Mul: {
        std::vector<int> fs, inv, var;
        factors(x, fs);
        for (int f : fs) (varies(f, d) ? var : inv).push_back(f);
        for (size_t i = 0; i < var.size(); ++i) {
          Node f = b.node(var[i]);
          std::vector<int> rest = inv;
          for (size_t j = 0; j < var.size(); ++j)
            if (j != i) rest.push_back(var[j]);
          auto with = [&](int first) {
            std::vector<int> all = {first};
            all.insert(all.end(), rest.begin(), rest.end());
            return product(all).id;
          };
          if (f.op == Op::Add || f.op == Op::Sub) {
            Value a = sum_of(with(f.args[0]), d), c = sum_of(with(f.args[1]), d);
            return f.op == Op::Add ? a + c : a - c;
          }
          if (f.op == Op::Neg) return -sum_of(with(f.args[0]), d);
          if ((f.op == Op::Div || f.op == Op::DivOrZero) && !varies(f.args[1], d))
            return b.binary(f.op, sum_of(with(f.args[0]), d), Value{&b, f.args[1]});
        }
        if (inv.empty()) return plain(x, d);
        return product(inv) * plain(product(var).id, d);
      }
      default: return plain(x, d);
    }
  }
};

}  // namespace

Program online_rewrite(const Program& p) {
  return rebuild(p, [&](ProgramBuilder& b, int id, const std::vector<int>& args) -> int {
    const Node& n = p.nodes[id];
    if (n.op != Op::Sum) return -1;
    OnlineRewriter rw{b, {}};
    if (!rw.depends(args[0], n.reduce)) return -1;
    Value v = rw.sum_of(args[0], n.reduce);
    // Keep the node's type (an integer sum stays integer, a float sum f32).
    if (b.node(v.id).type != n.type) v = b.cast(v, n.type);
    return v.id;
  });
}

}  // namespace flashgen
