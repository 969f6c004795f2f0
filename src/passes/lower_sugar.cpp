// lower_sugar: softmax, logsumexp and mean become primitives.
//
//   softmax(x, n)   -> div_or_zero(e, sum(e, n)),  e = exp(x - safe(max(x, n)))
//   logsumexp(x, n) -> safe(max(x, n)) + log(sum(exp(x - safe(max(x, n))), n))
//   mean(x, D)      -> sum(x, D) / (size(d1) * ...)
// where safe(M) = where(M == -inf, 0, M): a row whose every element is -inf gives exp(-inf) = 0
// terms, so softmax is 0 there (div_or_zero) and logsumexp is 0 + log(0) = -inf, exactly as
// docs/language.md says. Preconditions: a checked program. Test: tests/passes/passes_test.cpp
// (reference results equal before and after on random inputs with fully masked rows).
#include "passes/passes.h"

namespace flashgen {

Program lower_sugar(const Program& p) {
  return rebuild(p, [&](ProgramBuilder& b, int id, const std::vector<int>& args) -> int {
    const Node& n = p.nodes[id];
    if (!is_sugar(n.op)) return -1;
    std::vector<std::string> red;
    for (int d : n.reduce) red.push_back(p.dims[d]);
    Value x{&b, args[0]};
    if (n.op == Op::Mean) {
      Value count = b.constant(1.0, DType::f32);
      for (int d : n.reduce) count = count * b.cast(b.size(p.dims[d]), DType::f32);
      return (b.sum(x, red) / count).id;
    }
    if (!is_float(b.node(x.id).type)) x = b.cast(x, DType::f32);
    Value m = b.max(x, red);
    Value ms{&b, make_safe_max(b, m.id)};
    Value e = b.exp(x - ms);
    Value l = b.sum(e, red);
    if (n.op == Op::Softmax) return b.binary(Op::DivOrZero, e, l).id;
    return (ms + b.log(l)).id;  // LogSumExp
  });
}

Program canonicalize(const Program& p) { return fold_constants(lower_sugar(p)); }

}  // namespace flashgen
