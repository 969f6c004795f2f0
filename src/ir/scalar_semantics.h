// Typed scalar semantics of the element-wise ops: the ONE definition that the reference
// evaluator (src/ref/evaluator.cpp, per element) and constant folding (passes/fold_constants.cpp)
// both use, so a folded constant is exactly what the evaluator would have computed.
//
// - Integers compute in int64 with two's-complement wrap-around; i32 results wrap modulo 2^32
//   after every op; bool is 0/1. `%` is the floor modulo; `x % 0` is a CallError.
// - A float op computes exactly (in f64) and its result is rounded to the op's type (f32 for
//   arithmetic on any float type): f32 values are f32, as in the generated code.
// - Multiplication has a strong zero: 0 * x is 0 for every x, NaN and +-inf included. So a
//   weight of exactly 0 (a key masked to -inf, or a rescale that underflowed) removes a term,
//   whatever the value it multiplies; skipping the term (a skipped tile) is the same.
// - Float to integer casts truncate toward zero, saturate at the type's range, NaN gives 0.
// The generated code follows the same rules (codegen/element_code.cpp, codegen/target.cpp).
// Tests: tests/ref/evaluator_test.cpp, tests/passes/fold_test.cpp, tests/cpu/semantics_test.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "flashgen/ir.h"

namespace flashgen::scalar {

// The "integer modulo by zero" CallError, with the op's location when it has one.
[[noreturn]] void throw_mod_by_zero(SourceLoc loc);
// CallErrors for an op the evaluator does not define on integers / at all.
[[noreturn]] void throw_not_integer(Op op);
[[noreturn]] void throw_unsupported(Op op);

// Whether values of `t` are held as int64 (i32, i64, bool).
inline bool int_storage(DType t) { return is_integer(t) || t == DType::boolean; }

// An exact int64 result wrapped to `t` (i32: modulo 2^32; bool: != 0; i64: as is).
inline int64_t wrap(DType t, int64_t r) {
  if (t == DType::i32) return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(r)));
  if (t == DType::boolean) return r != 0;
  return r;
}
inline int64_t add_w(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t sub_w(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t mul_w(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
// Floor modulo (sign of b); b must not be 0. x % -1 is 0 (also INT64_MIN % -1).
inline int64_t floor_mod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

// Integer-typed unary ops (Neg, Not, Abs, Relu, Floor, Ceil) on int64; the caller wraps.
inline int64_t int_unary(Op op, int64_t v) {
  switch (op) {
    case Op::Neg: return sub_w(0, v);
    case Op::Not: return v == 0;
    case Op::Abs: return v < 0 ? sub_w(0, v) : v;
    case Op::Relu: return v < 0 ? 0 : v;
    case Op::Floor: case Op::Ceil: return v;
    default: throw_not_integer(op);
  }
}
// Integer-typed binary arithmetic (Add, Sub, Mul, Maximum, Minimum, Mod); the caller wraps.
inline int64_t int_binary(Op op, int64_t a, int64_t b, SourceLoc loc = {}) {
  switch (op) {
    case Op::Add: return add_w(a, b);
    case Op::Sub: return sub_w(a, b);
    case Op::Mul: return mul_w(a, b);
    case Op::Maximum: return a > b ? a : b;
    case Op::Minimum: return a < b ? a : b;
    case Op::Mod:
      if (b == 0) throw_mod_by_zero(loc);
      return floor_mod(a, b);
    default: throw_not_integer(op);
  }
}
// Float-typed unary ops in f64 (the op table's values).
inline double float_unary(Op op, double v) {
  if (double (*f)(double) = op_def(op).eval) return f(v);
  throw_unsupported(op);
}
// Multiplication with a strong zero (see above): +0 when either factor is 0.
inline double mul0(double a, double b) { return a == 0 || b == 0 ? 0.0 : a * b; }
// Float-typed binary arithmetic in f64 (max/min propagate NaN).
inline double float_binary(Op op, double a, double b) {
  switch (op) {
    case Op::Add: return a + b;
    case Op::Sub: return a - b;
    case Op::Mul: return mul0(a, b);
    case Op::Div: return a / b;
    case Op::DivOrZero: return b == 0 ? 0.0 : a / b;
    case Op::Mod: return a - b * std::floor(a / b);
    case Op::Pow: return std::pow(a, b);
    case Op::Maximum: return std::isnan(a) || std::isnan(b) ? NAN : (a > b ? a : b);
    case Op::Minimum: return std::isnan(a) || std::isnan(b) ? NAN : (a < b ? a : b);
    default: throw_unsupported(op);
  }
}
// Comparisons and logic (Eq..Ge, And, Or) on two values of one kind (int64 or double).
template <class T>
inline int64_t compare(Op op, T a, T b) {
  switch (op) {
    case Op::Eq: return a == b;
    case Op::Ne: return a != b;
    case Op::Lt: return a < b;
    case Op::Le: return a <= b;
    case Op::Gt: return a > b;
    case Op::Ge: return a >= b;
    case Op::And: return a != 0 && b != 0;
    case Op::Or: return a != 0 || b != 0;
    default: throw_unsupported(op);
  }
}
inline bool is_compare(Op op) {
  return op == Op::Eq || op == Op::Ne || op == Op::Lt || op == Op::Le || op == Op::Gt ||
         op == Op::Ge || op == Op::And || op == Op::Or;
}
// Float clamp: NaN in any operand gives NaN; x < lo gives lo, else x > hi gives hi.
inline double float_clamp(double x, double lo, double hi) {
  if (std::isnan(lo) || std::isnan(hi)) return NAN;
  return x < lo ? lo : (x > hi ? hi : x);
}
inline int64_t int_clamp(int64_t x, int64_t lo, int64_t hi) {
  return x < lo ? lo : (x > hi ? hi : x);
}

// Float to integer type `t`: truncate toward zero, saturate at t's range, NaN -> 0.
int64_t float_to_int(double x, DType t);
// An integer to float type `t`: f32 rounds once from the int64; others through double.
double int_to_float(int64_t v, DType t);
// The int64 value of an integer- or bool-typed Const node's `value` (a double): saturated to
// int64 like float_to_int, then wrapped to `t`.
int64_t int_constant(double v, DType t);


// One typed scalar: `i` for int storage types, `f` otherwise.
struct Value {
  DType type = DType::f32;
  int64_t i = 0;
  double f = 0;
};

// An element-wise op (unary, binary, Where, Clamp, Cast, DivOrZero) on typed scalars, with the
// evaluator's semantics; `result` is the node's type. Throws CallError for x % 0 (at `loc`).
Value eval(Op op, DType result, const std::vector<Value>& args, SourceLoc loc = {});

}  // namespace flashgen::scalar
