// fold_constants: element-wise operations on constants become constants, and multiplications
// by one / additions of zero of the same type disappear. Sizes are not constants (extents are
// bound at call time). Folding evaluates through ir/scalar_semantics.h, the reference
// evaluator's own per-element rules (i32 wraps, float->int saturates, casts round, integers are
// exact int64), so folding never changes a result. An integer result that a Const node (which
// holds a double) cannot represent exactly (|v| > 2^53), or an x % 0, is left unfolded: the
// backends compute it (or report it) at run time. Preconditions: none.
// Tests: tests/passes/fold_test.cpp, tests/passes/passes_test.cpp.
#include <cmath>

#include "flashgen/error.h"
#include "ir/scalar_semantics.h"
#include "passes/passes.h"

namespace flashgen {

namespace {

constexpr int64_t kMaxExactInt = int64_t{1} << 53;

// The typed scalar of a Const node.
scalar::Value const_value(const Node& n) {
  scalar::Value v;
  v.type = n.type;
  if (scalar::int_storage(n.type)) v.i = scalar::int_constant(n.value, n.type);
  else v.f = n.value;
  return v;
}

}  // namespace

Program fold_constants(const Program& p) {
  return rebuild(p, [&](ProgramBuilder& b, int id, const std::vector<int>& args) -> int {
    const Node& n = p.nodes[id];
    if (n.op == Op::Param || n.op == Op::Const || n.op == Op::Index || n.op == Op::Size ||
        n.op == Op::Gather || is_reduction(n.op) || is_sugar(n.op))
      return -1;
    bool all_const = !args.empty();
    std::vector<scalar::Value> vals;
    for (int a : args) {
      const Node& an = b.node(a);
      if (an.op != Op::Const) all_const = false;
      else vals.push_back(const_value(an));
    }
    if (all_const) {
      scalar::Value r;
      try {
        r = scalar::eval(n.op, n.type, vals, n.loc);
      } catch (const CallError&) {
        return -1;  // x % 0: the call reports it when it runs
      }
      if (!scalar::int_storage(n.type)) return b.constant(r.f, n.type).id;
      if (r.i > kMaxExactInt || r.i < -kMaxExactInt) return -1;
      return b.constant(static_cast<double>(r.i), n.type).id;
    }
    // x * 1, 1 * x, x + 0, 0 + x, x - 0, x / 1 of the same type are x.
    auto is_c = [&](int a, double v) { return b.node(a).op == Op::Const && b.node(a).value == v; };
    auto same = [&](int a) { return b.node(a).type == n.type && b.node(a).dims == n.dims; };
    if (n.op == Op::Mul) {
      if (is_c(args[0], 1) && same(args[1])) return args[1];
      if (is_c(args[1], 1) && same(args[0])) return args[0];
    }
    if (n.op == Op::Add && is_c(args[0], 0) && same(args[1])) return args[1];
    if ((n.op == Op::Add || n.op == Op::Sub) && is_c(args[1], 0) && same(args[0])) return args[0];
    if (n.op == Op::Div && is_c(args[1], 1) && same(args[0])) return args[0];
    return -1;
  });
}

}  // namespace flashgen
