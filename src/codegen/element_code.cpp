// The C-like element emitter (see element_code.h). Semantics follow ir/scalar_semantics.h
// (the reference evaluator's rules), except that floats compute in f32: integers are held in
// int64 and wrap (the host compiler runs with -fwrapv), i32-typed results wrap to 32 bits after
// every op (fg_w32), float->int casts truncate and saturate with NaN -> 0 (fg_f2i32/fg_f2i64),
// bools are bool, `%` is the floor modulo and, on the CPU, `x % 0` is reported through the
// kernel's err slot (fg_mod_e: err = {2, 0, 0, node}; run_cpu turns it into a CallError).
// Test: tests/cpu/semantics_test.cpp.
#include "codegen/element_code.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <string_view>

#include "flashgen/error.h"
#include "ir/scalar_semantics.h"

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
    // The Const's value as the evaluator reads it (saturated to int64, wrapped to t).
    int64_t i = scalar::int_constant(v, t);
    if (i == INT64_MIN) return "((int64_t)(-9223372036854775807LL - 1))";
    char buf[64];
    std::snprintf(buf, sizeof buf, "((int64_t)%" PRId64 "LL)", i);
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
  if (!v->inlined) {
    // An i32 reduction accumulates in int64 (mod 2^64); its value is the 32-bit wrap.
    const Node& n = plan_.program.nodes[node];
    if (n.type == DType::i32 && is_reduction(n.op)) return "fg_w32(" + c.local(node) + ")";
    return c.local(node);
  }
  return compute(node, c);
}

std::string ElementEmitter::compute(int node, const ElementContext& c) const {
  const Program& p = plan_.program;
  const Node& n = p.nodes[node];
  std::string R = ctype(n.type);
  auto arg = [&](int i) { return value(n.args[i], c); };
  auto as = [&](const std::string& ty, int i) { return "((" + ty + ")(" + arg(i) + "))"; };
  // i32 arithmetic runs in int64; wrap every i32 result of a ring op back to 32 bits.
  auto w = [&](const std::string& e) { return n.type == DType::i32 ? "fg_w32(" + e + ")" : e; };
  // Pieces joined by appending (chains of `"(" + std::string&&` trip GCC 12's -Wrestrict).
  auto cat = [](std::initializer_list<std::string_view> parts) {
    std::string s;
    for (std::string_view q : parts) s += q;
    return s;
  };
  auto infix = [&](const char* o) { return cat({"(", as(R, 0), o, as(R, 1), ")"}); };
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
    case Op::Neg: return w("(-" + as(R, 0) + ")");
    case Op::Not: return "(!" + as("bool", 0) + ")";
    case Op::Relu: return "fg_relu(" + as(R, 0) + ")";
    case Op::Abs: return w("fg_abs(" + as(R, 0) + ")");
    case Op::Exp: case Op::Exp2: case Op::Log: case Op::Log2: case Op::Sqrt: case Op::Rsqrt:
    case Op::Tanh: case Op::Sigmoid: case Op::Floor: case Op::Ceil: case Op::Sin: case Op::Cos:
      return t_.float_fn.at(n.op) + "(" + as(t_.float_t, 0) + ")";
    case Op::Cast: {
      if (n.type == DType::bf16) return "fg_round_bf16(" + as(t_.float_t, 0) + ")";
      if (n.type == DType::f16) return "fg_round_f16(" + as(t_.float_t, 0) + ")";
      DType from = p.nodes[n.args[0]].type;
      if (is_integer(n.type) && (is_float(from) || from == DType::f64))
        return (n.type == DType::i32 ? "fg_f2i32(" : "fg_f2i64(") + as("double", 0) + ")";
      return w(as(R, 0));
    }
    case Op::Add: return w(infix(" + "));
    case Op::Sub: return w(infix(" - "));
    case Op::Mul: return w(infix(" * "));
    case Op::Div: return infix(" / ");
    case Op::DivOrZero: return "fg_div0(" + as(R, 0) + ", " + as(R, 1) + ")";
    case Op::Mod:
      // On the CPU the kernel's `err` slot reports x % 0 (CUDA: 0, not reported yet).
      if (t_.target == Target::cpu)
        return "fg_mod_e(err, " + std::to_string(node) + ", " + as("int64_t", 0) + ", " +
               as("int64_t", 1) + ")";
      return "fg_mod(" + as("int64_t", 0) + ", " + as("int64_t", 1) + ")";
    case Op::Pow: return t_.float_fn.at(Op::Pow) + "(" + as(t_.float_t, 0) + ", " + as(t_.float_t, 1) + ")";
    case Op::Maximum: return "fg_max(" + as(R, 0) + ", " + as(R, 1) + ")";
    case Op::Minimum: return "fg_min(" + as(R, 0) + ", " + as(R, 1) + ")";
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: {
      DType a = p.nodes[n.args[0]].type, b = p.nodes[n.args[1]].type;
      std::string C = (a == DType::boolean && b == DType::boolean) ? "bool" : ctype(promote(a, b));
      const char* o = n.op == Op::Eq ? " == " : n.op == Op::Ne ? " != " : n.op == Op::Lt ? " < "
                    : n.op == Op::Le ? " <= " : n.op == Op::Gt ? " > " : " >= ";
      return cat({"(", as(C, 0), o, as(C, 1), ")"});
    }
    case Op::And: return cat({"(", as("bool", 0), " && ", as("bool", 1), ")"});
    case Op::Or: return cat({"(", as("bool", 0), " || ", as("bool", 1), ")"});
    case Op::Where: return cat({"(", as("bool", 0), " ? ", as(R, 1), " : ", as(R, 2), ")"});
    case Op::Clamp: return "fg_clamp(" + as(R, 0) + ", " + as(R, 1) + ", " + as(R, 2) + ")";
    default:
      throw BackendError(std::string("internal error: cannot emit ") + op_name(n.op) +
                         " as element code");
  }
}

}  // namespace flashgen
