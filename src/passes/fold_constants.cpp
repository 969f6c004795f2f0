// fold_constants: element-wise operations on constants become constants, and multiplications
// by one / additions of zero of the same type disappear. Sizes are not constants (extents are
// bound at call time). Preconditions: none. Test: tests/passes/passes_test.cpp.
#include <cmath>

#include "passes/passes.h"
#include "plan/scalar.h"

namespace flashgen {

Program fold_constants(const Program& p) {
  return rebuild(p, [&](ProgramBuilder& b, int id, const std::vector<int>& args) -> int {
    const Node& n = p.nodes[id];
    if (n.op == Op::Param || n.op == Op::Const || n.op == Op::Index || n.op == Op::Size ||
        n.op == Op::Gather || is_reduction(n.op) || is_sugar(n.op))
      return -1;
    bool all_const = !args.empty();
    std::vector<double> vals;
    for (int a : args) {
      const Node& an = b.node(a);
      if (an.op != Op::Const) all_const = false;
      vals.push_back(an.value);
    }
    if (all_const) {
      std::vector<DType> types;
      for (int a : args) types.push_back(b.node(a).type);
      double v = eval_scalar(n.op, n.type, vals, types);
      return b.constant(v, n.type).id;
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
