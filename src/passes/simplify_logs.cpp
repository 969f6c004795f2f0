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
#include <functional>
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
    // The log (n's base) of program node `old`, whose rebuilt node is `v` (the same op over the
    // rebuilt args: rebuild copies every node but logs).
    std::function<Value(int, Value)> log_of = [&](int old, Value v) -> Value {
      const Node& o = p.nodes[old];
      const Node nv = b.node(v.id);  // (a copy: building moves b's nodes)
      if (o.op == Op::Exp || o.op == Op::Exp2) {
        // log(exp(y)) = y, log2(exp2(y)) = y, log2(exp(y)) = y * log2(e), log(exp2(y)) = y * ln(2)
        Value y{&b, nv.args[0]};
        if (b.node(y.id).type != n.type) y = b.cast(y, n.type);
        if ((n.op == Op::Log) == (o.op == Op::Exp)) return y;
        return y * b.constant(n.op == Op::Log ? std::log(2.0) : 1.0 / std::log(2.0), n.type);
      }
      if ((o.op == Op::Div || o.op == Op::DivOrZero) && nonneg(o.args[0]) && nonneg(o.args[1])) {
        Value a{&b, nv.args[0]}, d{&b, nv.args[1]};
        if (b.node(a.id).type == n.type && b.node(d.id).type == n.type) {
          Value r = log_of(o.args[0], a) - log_of(o.args[1], d);
          if (o.op == Op::DivOrZero)
            r = b.where(b.binary(Op::Eq, d, b.constant(0.0, n.type)),
                        b.constant(-INFINITY, n.type), r);
          return r;
        }
      }
      return b.unary(n.op, v);
    };
    const Op x = p.nodes[n.args[0]].op;
    if (x != Op::Exp && x != Op::Exp2 && x != Op::Div && x != Op::DivOrZero) return -1;
    return log_of(n.args[0], Value{&b, args[0]}).id;
  });
}

}  // namespace flashgen
