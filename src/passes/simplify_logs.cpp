// simplify_logs: the log of a quotient of non-negative values, and the log of an exp.
//
//   log(exp(y))            -> y                (log2(exp2(y)) -> y; across bases times the
//                                               constant: log2(exp(y)) -> y * log2(e))
//   log(a / b)             -> log(a) - log(b)
//   log(div_or_zero(a, b)) -> where(b == 0, -inf, log(a) - log(b))
//
// for a and b that are non-negative or NaN by construction (exp, exp2, sigmoid, relu, abs, sqrt,
// non-negative constants, and sums, products, quotients, elementwise maxima and minima, minima
// over dims and wheres of those), of
// one full-precision float type (f32 or f64). So the log of a softmax, log(div_or_zero(e,
// sum(e, n))) with e = exp(x - safe(max(x, n))), becomes where(l == 0, -inf, x - safe(max) -
// log(l)): the attention entropy written -sum(P * log(P), n) is then sums of the scores weighed
// by e (online_rewrite distributes them), not a sum over a log of the normalized probabilities,
// which needs the whole row first.
// Each rule keeps the value at zeros, infinities and NaN: for a, b >= 0 (or NaN), a / b and
// log(a) - log(b) agree at a = 0 (-inf), b = 0 (+inf, or NaN for 0 / 0), b = +inf and NaN;
// div_or_zero's 0 at b == 0 is kept by the where. log(exp(y)) = y everywhere except where exp(y)
// leaves the float range (y below about -745 in f64, -103 in f32, or above about 709 / 88), where
// the rewrite gives y and the program as written -inf or +inf.
// Preconditions: lower_sugar ran (softmax is div_or_zero(e, sum(e, n))). Runs in canonicalize.
// Tests: tests/passes/online_forms_test.cpp (PassesOnlineForms.LogOfProbabilitiesIsScores),
// tests/passes/passes_test.cpp (meaning kept on random inputs).
#include <cmath>
#include <map>

#include "passes/passes.h"

namespace flashgen {

namespace {

bool full_float(DType t) { return t == DType::f32 || t == DType::f64; }

struct NonNegative {
  const Program& p;
  std::map<int, bool> memo;

  // Whether node `id` is >= 0 or NaN for every input.
  bool operator()(int id) {
    auto it = memo.find(id);
    if (it != memo.end()) return it->second;
    const Node& n = p.nodes[id];
    bool r = false;
    switch (n.op) {
      case Op::Const: r = !(n.value < 0); break;
      case Op::Exp:
      case Op::Exp2:
      case Op::Sigmoid:
      case Op::Relu:
      case Op::Abs:
      case Op::Sqrt: r = true; break;
      case Op::Sum:  // (not a max: over no elements it is -inf)
      case Op::Min:
      case Op::Cast: r = is_float(n.type) && (*this)(n.args[0]); break;
      case Op::Add:
      case Op::Mul:
      case Op::Div:
      case Op::DivOrZero:
      case Op::Maximum:
      case Op::Minimum: r = (*this)(n.args[0]) && (*this)(n.args[1]); break;
      case Op::Where: r = (*this)(n.args[1]) && (*this)(n.args[2]); break;
      default: break;
    }
    return memo[id] = r;
  }
};

}  // namespace

Program simplify_logs(const Program& p) {
  NonNegative nonneg{p, {}};
  return rebuild(p, [&](ProgramBuilder& b, int id, const std::vector<int>& args) -> int {
    const Node& n = p.nodes[id];
    if ((n.op != Op::Log && n.op != Op::Log2) || !full_float(n.type)) return -1;
    const Node& x = p.nodes[n.args[0]];
    const Node nx = b.node(args[0]);  // (x's rebuilt node, a copy: building moves b's nodes)
    // log(exp(y)) = y, log2(exp2(y)) = y, log2(exp(y)) = y * log2(e), log(exp2(y)) = y * ln(2);
    // `v` is the rebuilt exp, `old` the program's
    auto log_of = [&](Value v, int old) {
      const Op e = p.nodes[old].op;
      if (e != Op::Exp && e != Op::Exp2) return b.unary(n.op, v);
      Value y{&b, b.node(v.id).args[0]};
      if (b.node(y.id).type != n.type) y = b.cast(y, n.type);
      if ((n.op == Op::Log) == (e == Op::Exp)) return y;
      return y * b.constant(n.op == Op::Log ? std::log(2.0) : 1.0 / std::log(2.0), n.type);
    };
    if (x.op == Op::Exp || x.op == Op::Exp2) return log_of(Value{&b, args[0]}, n.args[0]).id;
    if (x.op != Op::Div && x.op != Op::DivOrZero) return -1;
    if (!nonneg(x.args[0]) || !nonneg(x.args[1])) return -1;
    Value a{&b, nx.args[0]}, d{&b, nx.args[1]};
    if (b.node(a.id).type != n.type || b.node(d.id).type != n.type) return -1;
    Value r = log_of(a, x.args[0]) - log_of(d, x.args[1]);
    if (x.op == Op::DivOrZero)
      r = b.where(b.binary(Op::Eq, d, b.constant(0.0, n.type)), b.constant(-INFINITY, n.type), r);
    return r.id;
  });
}

}  // namespace flashgen
