// The C-like element emitter (see element_code.h). Semantics follow ir/scalar_semantics.h
// (the reference evaluator's rules), except that floats compute in f32: integers are held in
// int64 and wrap (the host compiler runs with -fwrapv), i32-typed results wrap to 32 bits after
// every op (fg_w32), float->int casts truncate and saturate with NaN -> 0 (fg_f2i32/fg_f2i64),
// bools are bool, `%` is the floor modulo and `x % 0` is reported through the
// kernel's err slot (fg_mod_e: err = {2, 0, 0, node}; run_cpu turns it into a CallError).
// Integer nodes whose values provably fit 32 bits (int_range, from the target's max_extent)
// compute in `int`: exact, so no wrap is needed, and far cheaper on the GPU than int64.
// Test: tests/cpu/semantics_test.cpp, tests/codegen/int_range_test.cpp.
#include "codegen/element_code.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string_view>

#include "flashgen/error.h"
#include "ir/scalar_semantics.h"

namespace flashgen {

std::string storage_ctype(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::bf16: case DType::f16: return "uint16_t";
    case DType::f8e4m3: case DType::f8e5m2: case DType::boolean: return "uint8_t";
    case DType::i32: return "int";
    case DType::i64: return "int64_t";
  }
  return "float";
}

std::string wide_storage(DType t) { return is_integer(t) ? "int64_t" : "double"; }

std::vector<bool> gather_checked_positions(const Program& p, int param) {
  const std::vector<int>& dims = p.params[param].dims;
  std::vector<bool> checked(dims.size(), false);
  for (const Node& n : p.nodes) {
    if (n.op != Op::Gather || n.param != param) continue;
    for (size_t i = 0; i < n.args.size() && i < dims.size(); ++i) {
      const Node& a = p.nodes[n.args[i]];
      if (!(a.op == Op::Index && a.dim == dims[i])) checked[i] = true;
    }
  }
  return checked;
}

std::string load_element(DType t, const std::string& e) {
  switch (t) {
    case DType::bf16: return "fg_bf16(" + e + ")";
    case DType::f16: return "fg_f16(" + e + ")";
    case DType::f8e4m3: return "fg_f8e4m3(" + e + ")";
    case DType::f8e5m2: return "fg_f8e5m2(" + e + ")";
    case DType::boolean: return "((bool)" + e + ")";
    case DType::i32: return "((int64_t)" + e + ")";
    default: return e;
  }
}

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
  char num[48], buf[64];
  std::snprintf(num, sizeof num, "%.9g", v);
  std::snprintf(buf, sizeof buf, "(%s%sf)", num, std::strpbrk(num, ".eE") ? "" : ".");
  return buf;
}

namespace {
using Range = std::pair<int64_t, int64_t>;
using Wide = __int128;
std::optional<Range> narrow(Wide lo, Wide hi) {
  if (lo < INT64_MIN || hi > INT64_MAX) return std::nullopt;
  return Range{static_cast<int64_t>(lo), static_cast<int64_t>(hi)};
}
std::optional<Range> type_range(DType t) {
  if (t == DType::i32) return Range{INT32_MIN, INT32_MAX};
  if (t == DType::boolean) return Range{0, 1};
  return std::nullopt;
}
bool in32(const Range& r) { return r.first >= INT32_MIN && r.second <= INT32_MAX; }
}  // namespace

std::optional<Range> ElementEmitter::int_range(int node) const {
  auto memo = ranges_.find(node);
  if (memo != ranges_.end()) return memo->second;
  const Node& n = plan_.program.nodes[node];
  auto arg = [&](int i) { return int_range(n.args[i]); };
  std::optional<Range> r;
  auto both = [&](auto f) {
    auto a = arg(0), b = arg(1);
    if (a && b) r = f(*a, *b);
  };
  switch (n.op) {
    case Op::Const: {
      int64_t v = is_integer(n.type) ? scalar::int_constant(n.value, n.type) : n.value != 0;
      r = Range{v, v};
      break;
    }
    case Op::Index: r = Range{0, t_.max_extent - 1}; break;
    case Op::Size: r = Range{0, t_.max_extent}; break;
    case Op::Add: both([](Range a, Range b) { return narrow(Wide(a.first) + b.first, Wide(a.second) + b.second); }); break;
    case Op::Sub: both([](Range a, Range b) { return narrow(Wide(a.first) - b.second, Wide(a.second) - b.first); }); break;
    case Op::Mul:
      both([](Range a, Range b) {
        Wide c[4] = {Wide(a.first) * b.first, Wide(a.first) * b.second, Wide(a.second) * b.first,
                     Wide(a.second) * b.second};
        return narrow(std::min({c[0], c[1], c[2], c[3]}), std::max({c[0], c[1], c[2], c[3]}));
      });
      break;
    case Op::Neg: if (auto a = arg(0)) r = narrow(-Wide(a->second), -Wide(a->first)); break;
    case Op::Abs:
      if (auto a = arg(0)) {
        Wide hi = std::max(-Wide(a->first), Wide(a->second));
        r = narrow(a->first >= 0 ? a->first : (a->second <= 0 ? -Wide(a->second) : 0), hi);
      }
      break;
    case Op::Relu: if (auto a = arg(0)) r = Range{std::max<int64_t>(a->first, 0), std::max<int64_t>(a->second, 0)}; break;
    case Op::Maximum: both([](Range a, Range b) { return std::optional<Range>(Range{std::max(a.first, b.first), std::max(a.second, b.second)}); }); break;
    case Op::Minimum: both([](Range a, Range b) { return std::optional<Range>(Range{std::min(a.first, b.first), std::min(a.second, b.second)}); }); break;
    case Op::Where: {
      auto a = arg(1), b = arg(2);
      if (a && b) r = Range{std::min(a->first, b->first), std::max(a->second, b->second)};
      break;
    }
    case Op::Clamp: {  // one of x, lo, hi
      auto a = arg(0), b = arg(1), c = arg(2);
      if (a && b && c)
        r = Range{std::min({a->first, b->first, c->first}), std::max({a->second, b->second, c->second})};
      break;
    }
    case Op::Mod: {  // floor mod: |r| < |b|, and 0 for b in {0, -1}
      if (auto b = arg(1)) {
        Wide m = std::max(Wide(b->second), -Wide(b->first));
        if (m > 0) r = narrow(b->first > 0 ? Wide(0) : -(m - 1), b->second < 0 ? Wide(0) : m - 1);
        else r = Range{0, 0};
      }
      break;
    }
    case Op::Cast: {
      DType from = plan_.program.nodes[n.args[0]].type;
      if (is_integer(from) || from == DType::boolean) r = arg(0);
      break;
    }
    default: break;
  }
  if (is_float(n.type) || n.type == DType::f64) r = std::nullopt;
  if (n.type == DType::boolean) r = Range{0, 1};
  exact_[node] = r;
  // An i32 result outside 32 bits wraps: it then has the type's range.
  if (n.type == DType::i32 && (!r || !in32(*r))) r = type_range(DType::i32);
  ranges_[node] = r;
  return r;
}

bool ElementEmitter::fits32(int node) const {
  const Node& n = plan_.program.nodes[node];
  if (!is_integer(n.type)) return false;
  int_range(node);
  const auto& r = exact_.at(node);  // the exact result, before any wrap
  if (!r || !in32(*r)) return false;
  for (int a : n.args) {
    const Node& x = plan_.program.nodes[a];
    if (!is_integer(x.type) && x.type != DType::boolean) continue;
    auto ra = int_range(a);
    if (!ra || !in32(*ra)) return false;
  }
  return true;
}

std::string ElementEmitter::value(int node, const ElementContext& c) const {
  if (node == c.assume_true) return "true";
  const PlanValue* v = k_.value(node);
  if (!v) throw BackendError("internal error: node %" + std::to_string(node) + " not in kernel");
  if (v->load_buffer >= 0) return c.load(v->load_buffer, node);
  if (c.hoisted) {
    std::string h = c.hoisted(node);
    if (!h.empty()) return h;
  }
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
  const bool small = fits32(node);
  std::string R = small ? "int" : ctype(n.type);
  auto arg = [&](int i) { return value(n.args[i], c); };
  auto arg_in32 = [&](int i) {
    const Node& a = p.nodes[n.args[i]];
    auto r = is_integer(a.type) ? int_range(n.args[i]) : std::nullopt;
    return r && r->first >= INT32_MIN && r->second <= INT32_MAX;
  };
  auto as = [&](const std::string& ty, int i) {
    // int -> float through a 32-bit int when the value fits (one I2F instead of an i64 one)
    if ((ty == t_.float_t || ty == "double") && arg_in32(i))
      return "((" + ty + ")((int)(" + arg(i) + ")))";
    return "((" + ty + ")(" + arg(i) + "))";
  };
  // i32 arithmetic runs in int64; wrap every i32 result of a ring op back to 32 bits (not
  // needed when the exact result provably fits).
  auto w = [&](const std::string& e) {
    return n.type == DType::i32 && !small ? "fg_w32(" + e + ")" : e;
  };
  // Pieces joined by appending (chains of `"(" + std::string&&` trip GCC 12's -Wrestrict).
  auto cat = [](std::initializer_list<std::string_view> parts) {
    std::string s;
    for (std::string_view q : parts) s += q;
    return s;
  };
  auto infix = [&](const char* o) { return cat({"(", as(R, 0), o, as(R, 1), ")"}); };
  // the op table's float functions of one argument (exp, log, tanh, floor, ...): the target's C
  // function of it
  if (op_def(n.op).c_fn && op_arity(n.op) == 1)
    return t_.float_fn.at(n.op) + "(" + as(t_.float_t, 0) + ")";
  switch (n.op) {
    case Op::Param: {
      std::vector<std::string> idx;
      for (int d : p.params[n.param].dims) idx.push_back(c.index(d));
      return c.param(n.param, idx);
    }
    case Op::Const: return literal(n.value, n.type);
    case Op::Index: return "((" + R + ")" + c.index(n.dim) + ")";
    case Op::Size: return "((" + R + ")" + c.extent(n.dim) + ")";
    case Op::Gather: {
      std::vector<std::string> idx;
      for (size_t i = 0; i < n.args.size(); ++i) idx.push_back(as("int64_t", i));
      return c.gather(node, n.param, idx);
    }
    case Op::Neg: return w("(-" + as(R, 0) + ")");
    case Op::Not: return "(!" + as("bool", 0) + ")";
    case Op::Relu: return "fg_relu(" + as(R, 0) + ")";
    case Op::Abs: return w("fg_abs(" + as(R, 0) + ")");
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
    case Op::Mul:  // floats: the strong zero of ir/scalar_semantics.h (0 * NaN = 0)
      if (is_float(n.type)) return "fg_mul0(" + as(R, 0) + ", " + as(R, 1) + ")";
      return w(infix(" * "));
    case Op::Div:
    case Op::DivOrZero: {
      // by a value whose reciprocal is at hand in float code: a multiplication
      const std::string rb = R == "float" && c.reciprocal ? c.reciprocal(n.args[1]) : "";
      if (n.op == Op::Div)
        return rb.empty() ? infix(" / ") : "(" + as(R, 0) + " * " + rb + ")";
      if (!rb.empty()) return "fg_div0_r(" + as(R, 0) + ", " + rb + ")";
      return "fg_div0(" + as(R, 0) + ", " + as(R, 1) + ")";
    }
    case Op::Mod:  // x % 0 is reported through the kernel's err slot (fg_mod_e, every target)
      return "fg_mod_e(" + c.err + ", " + std::to_string(node) + ", " + as("int64_t", 0) + ", " +
             as("int64_t", 1) + ")";
    case Op::Pow: return t_.float_fn.at(Op::Pow) + "(" + as(t_.float_t, 0) + ", " + as(t_.float_t, 1) + ")";
    case Op::Maximum: return "fg_max(" + as(R, 0) + ", " + as(R, 1) + ")";
    case Op::Minimum: return "fg_min(" + as(R, 0) + ", " + as(R, 1) + ")";
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: {
      DType a = p.nodes[n.args[0]].type, b = p.nodes[n.args[1]].type;
      std::string C = (a == DType::boolean && b == DType::boolean) ? "bool" : ctype(promote(a, b));
      if (is_integer(a) && is_integer(b) && arg_in32(0) && arg_in32(1)) C = "int";
      // (the op table's spelling is C's)
      const std::string o = std::string(" ") + op_def(n.op).source + " ";
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
