// The C-like element emitter (see element_code.h). Semantics follow plan/scalar.cpp: floats
// compute in f32, integers in i64, bools as bool; `%` is the floor modulo.
#include "codegen/element_code.h"

#include <cmath>
#include <cstdio>

#include "flashgen/error.h"

namespace flashgen {

std::string ElementEmitter::ctype(DType t) const {
  if (t == DType::boolean) return t_.bool_t;
  if (is_integer(t)) return t_.index_t;
  if (t == DType::f64) return "double";
  return t_.float_t;
}

std::string ElementEmitter::literal(double v, DType t) const {
  if (t == DType::boolean) return v != 0 ? "true" : "false";
  if (is_integer(t)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "((int64_t)%lld)", static_cast<long long>(v));
    return buf;
  }
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9gf", v);
  std::string s = buf;
  if (s.find_first_of(".eE") == std::string::npos) s.insert(s.size() - 1, ".");
  return "(" + s + ")";
}

std::string ElementEmitter::value(int node, const ElementContext& c) const {
  if (node == c.assume_true) return "true";
  const PlanValue* v = k_.value(node);
  if (!v) throw BackendError("internal error: node %" + std::to_string(node) + " not in kernel");
  if (v->load_buffer >= 0) return c.load(v->load_buffer, node);
  if (!v->inlined) return c.local(node);
  return compute(node, c);
}

std::string ElementEmitter::compute(int node, const ElementContext& c) const {
  const Program& p = plan_.program;
  const Node& n = p.nodes[node];
  std::string R = ctype(n.type);
  auto arg = [&](int i) { return value(n.args[i], c); };
  auto as = [&](const std::string& ty, int i) { return "((" + ty + ")(" + arg(i) + "))"; };
  switch (n.op) {
    case Op::Param: {
      std::vector<std::string> idx;
      for (int d : p.params[n.param].dims) idx.push_back(c.index(d));
      return c.param(n.param, idx);
    }
    case Op::Const: return literal(n.value, n.type);
    case Op::Index: return "((int64_t)" + c.index(n.dim) + ")";
    case Op::Size: return "((int64_t)" + c.extent(n.dim) + ")";
    case Op::Gather: {
      std::vector<std::string> idx;
      for (size_t i = 0; i < n.args.size(); ++i) idx.push_back(as("int64_t", i));
      return c.gather(n.param, idx);
    }
    case Op::Neg: return "(-" + as(R, 0) + ")";
    case Op::Not: return "(!" + as("bool", 0) + ")";
    case Op::Relu: return "fg_relu(" + as(R, 0) + ")";
    case Op::Abs: return "fg_abs(" + as(R, 0) + ")";
    case Op::Exp: case Op::Exp2: case Op::Log: case Op::Log2: case Op::Sqrt: case Op::Rsqrt:
    case Op::Tanh: case Op::Sigmoid: case Op::Floor: case Op::Ceil: case Op::Sin: case Op::Cos:
      return t_.float_fn.at(n.op) + "(" + as(t_.float_t, 0) + ")";
    case Op::Cast:
      if (n.type == DType::bf16) return "fg_round_bf16(" + as(t_.float_t, 0) + ")";
      if (n.type == DType::f16) return "fg_round_f16(" + as(t_.float_t, 0) + ")";
      return as(R, 0);
    case Op::Add: return "(" + as(R, 0) + " + " + as(R, 1) + ")";
    case Op::Sub: return "(" + as(R, 0) + " - " + as(R, 1) + ")";
    case Op::Mul: return "(" + as(R, 0) + " * " + as(R, 1) + ")";
    case Op::Div: return "(" + as(R, 0) + " / " + as(R, 1) + ")";
    case Op::DivOrZero: return "fg_div0(" + as(R, 0) + ", " + as(R, 1) + ")";
    case Op::Mod: return "fg_mod(" + as("int64_t", 0) + ", " + as("int64_t", 1) + ")";
    case Op::Pow: return t_.float_fn.at(Op::Pow) + "(" + as(t_.float_t, 0) + ", " + as(t_.float_t, 1) + ")";
    case Op::Maximum: return "fg_max(" + as(R, 0) + ", " + as(R, 1) + ")";
    case Op::Minimum: return "fg_min(" + as(R, 0) + ", " + as(R, 1) + ")";
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: {
      DType a = p.nodes[n.args[0]].type, b = p.nodes[n.args[1]].type;
      std::string C = (a == DType::boolean && b == DType::boolean) ? "bool" : ctype(promote(a, b));
      const char* o = n.op == Op::Eq ? " == " : n.op == Op::Ne ? " != " : n.op == Op::Lt ? " < "
                    : n.op == Op::Le ? " <= " : n.op == Op::Gt ? " > " : " >= ";
      return "(" + as(C, 0) + o + as(C, 1) + ")";
    }
    case Op::And: return "(" + as("bool", 0) + " && " + as("bool", 1) + ")";
    case Op::Or: return "(" + as("bool", 0) + " || " + as("bool", 1) + ")";
    case Op::Where: return "(" + as("bool", 0) + " ? " + as(R, 1) + " : " + as(R, 2) + ")";
    case Op::Clamp: return "fg_clamp(" + as(R, 0) + ", " + as(R, 1) + ", " + as(R, 2) + ")";
    default:
      throw BackendError(std::string("internal error: cannot emit ") + op_name(n.op) +
                         " as element code");
  }
}

}  // namespace flashgen
