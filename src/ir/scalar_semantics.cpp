// Typed scalar semantics of the element-wise ops (see scalar_semantics.h).
#include "ir/scalar_semantics.h"

#include <limits>

#include "flashgen/error.h"
#include "flashgen/tensor.h"

namespace flashgen::scalar {

void throw_mod_by_zero(SourceLoc loc) {
  throw CallError("integer modulo by zero" +
                  (loc.line ? " at " + std::to_string(loc.line) + ":" + std::to_string(loc.col)
                            : std::string()));
}

void throw_not_integer(Op op) {
  throw CallError(std::string("reference evaluator: ") + op_name(op) + " on an integer type");
}

void throw_unsupported(Op op) {
  throw CallError(std::string("reference evaluator: unsupported operation ") + op_name(op));
}

int64_t float_to_int(double x, DType t) {
  if (std::isnan(x)) return 0;
  if (t == DType::boolean) return x != 0;
  const double lo = t == DType::i32 ? -2147483648.0 : -9223372036854775808.0;
  const double hi = t == DType::i32 ? 2147483647.0 : 9223372036854775807.0;  // i64: 2^63
  x = std::trunc(x);
  if (x <= lo) return static_cast<int64_t>(lo);
  if (x >= hi) return t == DType::i32 ? 2147483647 : std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(x);
}

double int_to_float(int64_t v, DType t) {
  if (t == DType::f32) return static_cast<double>(static_cast<float>(v));
  return round_to_dtype(static_cast<double>(v), t);
}

int64_t int_constant(double v, DType t) { return wrap(t, float_to_int(v, DType::i64)); }

namespace {
Value eval_exact(Op op, DType result, const std::vector<Value>& a, SourceLoc loc) {
  Value r;
  r.type = result;
  const bool ii = int_storage(result);
  auto is_int = [&](size_t k) { return int_storage(a[k].type); };
  auto d = [&](size_t k) { return is_int(k) ? static_cast<double>(a[k].i) : a[k].f; };
  auto n = [&](size_t k) { return is_int(k) ? a[k].i : float_to_int(a[k].f, DType::i64); };
  if (op == Op::Cast) {
    if (ii) r.i = is_int(0) ? wrap(result, a[0].i) : float_to_int(a[0].f, result);
    else r.f = is_int(0) ? int_to_float(a[0].i, result) : round_to_dtype(a[0].f, result);
    return r;
  }
  if (is_compare(op)) {
    r.i = is_int(0) && is_int(1) ? compare(op, a[0].i, a[1].i) : compare(op, d(0), d(1));
    return r;
  }
  if (op == Op::Where) {
    if (ii) r.i = wrap(result, n(0) ? n(1) : n(2));
    else r.f = n(0) ? d(1) : d(2);
    return r;
  }
  if (op == Op::Clamp) {
    if (ii) r.i = wrap(result, int_clamp(n(0), n(1), n(2)));
    else r.f = float_clamp(d(0), d(1), d(2));
    return r;
  }
  if (a.size() == 1) {
    if (ii) r.i = wrap(result, int_unary(op, n(0)));
    else r.f = float_unary(op, d(0));
    return r;
  }
  if (a.size() == 2) {
    if (ii) r.i = wrap(result, int_binary(op, n(0), n(1), loc));
    else r.f = float_binary(op, d(0), d(1));
    return r;
  }
  throw_unsupported(op);
}
}  // namespace

Value eval(Op op, DType result, const std::vector<Value>& a, SourceLoc loc) {
  Value r = eval_exact(op, result, a, loc);
  if (!int_storage(result)) r.f = round_to_dtype(r.f, result);  // a float value is of its type
  return r;
}

}  // namespace flashgen::scalar
