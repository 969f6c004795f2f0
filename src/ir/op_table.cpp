// The op table (include/flashgen/ir.h: OpDef): one row per op with its text-form name, source
// spelling, arity, kind, type rule, C function, f64 value and per-element cost class. Every
// consumer reads it: the IR's op_name / op_arity / is_unary (ir.cpp), the parser's built-in
// function names (frontend/parser.cpp; its operator tokens map to ops there), the builder's type
// rules and the spellings in its messages (ir/builder.cpp), the reference's and constant
// folding's scalar evaluation (ir/scalar_semantics.h), the element emitter's C functions per
// target (codegen/target.cpp) and lowering's values per diagonal and per key (the cost class,
// lower/lower_tensor_core.cpp). A new element-wise function is one row.
// Tests: tests/ir/op_table_test.cpp, and every consumer's own tests (error messages:
// tests/error/types_errors_test.cpp).
#include <cmath>

#include "flashgen/ir.h"

namespace flashgen {

namespace {

double neg(double v) { return -v; }
double lnot(double v) { return v == 0; }
double exp_(double v) { return std::exp(v); }
double exp2_(double v) { return std::exp2(v); }
double log_(double v) { return std::log(v); }
double log2_(double v) { return std::log2(v); }
double sqrt_(double v) { return std::sqrt(v); }
double rsqrt(double v) { return 1.0 / std::sqrt(v); }
double tanh_(double v) { return std::tanh(v); }
double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }
double relu(double v) { return v > 0 || v != v ? v : 0.0; }  // NaN stays NaN; relu(-0) = +0
double abs_(double v) { return std::fabs(v); }
double floor_(double v) { return std::floor(v); }
double ceil_(double v) { return std::ceil(v); }
double sin_(double v) { return std::sin(v); }
double cos_(double v) { return std::cos(v); }

using K = OpKind;
using T = TypeRule;
constexpr OpDef kOps[] = {
    // op             name         source      arity kind          type rule        C function   f64  costly
    {Op::Param,       "param",     "",         0,  K::leaf,       T::own,          nullptr,     nullptr},
    {Op::Const,       "const",     "",         0,  K::leaf,       T::own,          nullptr,     nullptr},
    {Op::Index,       "index",     "",         0,  K::leaf,       T::own,          nullptr,     nullptr},
    {Op::Size,        "size",      "",         0,  K::leaf,       T::own,          nullptr,     nullptr},
    {Op::Neg,         "neg",       "unary -",  1,  K::unary,      T::numeric,      nullptr,     neg},
    {Op::Not,         "not",       "not",      1,  K::unary,      T::logic,        nullptr,     lnot},
    {Op::Exp,         "exp",       "exp",      1,  K::function,   T::to_float,     "expf",      exp_, true},
    {Op::Exp2,        "exp2",      "exp2",     1,  K::function,   T::to_float,     "exp2f",     exp2_, true},
    {Op::Log,         "log",       "log",      1,  K::function,   T::to_float,     "logf",      log_, true},
    {Op::Log2,        "log2",      "log2",     1,  K::function,   T::to_float,     "log2f",     log2_, true},
    {Op::Sqrt,        "sqrt",      "sqrt",     1,  K::function,   T::to_float,     "sqrtf",     sqrt_, true},
    {Op::Rsqrt,       "rsqrt",     "rsqrt",    1,  K::function,   T::to_float,     "fg_rsqrt",  rsqrt, true},
    {Op::Tanh,        "tanh",      "tanh",     1,  K::function,   T::to_float,     "tanhf",     tanh_, true},
    {Op::Sigmoid,     "sigmoid",   "sigmoid",  1,  K::function,   T::to_float,     "fg_sigmoid", sigmoid, true},
    {Op::Relu,        "relu",      "relu",     1,  K::function,   T::numeric,      nullptr,     relu},
    {Op::Abs,         "abs",       "abs",      1,  K::function,   T::numeric,      nullptr,     abs_},
    {Op::Floor,       "floor",     "floor",    1,  K::function,   T::rounding,     "floorf",    floor_},
    {Op::Ceil,        "ceil",      "ceil",     1,  K::function,   T::rounding,     "ceilf",     ceil_},
    {Op::Sin,         "sin",       "sin",      1,  K::function,   T::to_float,     "sinf",      sin_, true},
    {Op::Cos,         "cos",       "cos",      1,  K::function,   T::to_float,     "cosf",      cos_, true},
    {Op::Cast,        "cast",      "",         1,  K::unary,      T::own,          nullptr,     nullptr},
    {Op::Add,         "add",       "+",        2,  K::binary,     T::numeric,      nullptr,     nullptr},
    {Op::Sub,         "sub",       "-",        2,  K::binary,     T::numeric,      nullptr,     nullptr},
    {Op::Mul,         "mul",       "*",        2,  K::binary,     T::numeric,      nullptr,     nullptr},
    {Op::Div,         "div",       "/",        2,  K::binary,     T::division,     nullptr,     nullptr, true},
    {Op::Mod,         "mod",       "%",        2,  K::binary,     T::integers,     nullptr,     nullptr},
    {Op::Pow,         "pow",       "pow",      2,  K::function,   T::to_float,     "powf",      nullptr, true},
    {Op::Maximum,     "maximum",   "maximum",  2,  K::function,   T::numeric,      nullptr,     nullptr},
    {Op::Minimum,     "minimum",   "minimum",  2,  K::function,   T::numeric,      nullptr,     nullptr},
    {Op::Eq,          "eq",        "==",       2,  K::binary,     T::equality,     nullptr,     nullptr},
    {Op::Ne,          "ne",        "!=",       2,  K::binary,     T::equality,     nullptr,     nullptr},
    {Op::Lt,          "lt",        "<",        2,  K::binary,     T::order,        nullptr,     nullptr},
    {Op::Le,          "le",        "<=",       2,  K::binary,     T::order,        nullptr,     nullptr},
    {Op::Gt,          "gt",        ">",        2,  K::binary,     T::order,        nullptr,     nullptr},
    {Op::Ge,          "ge",        ">=",       2,  K::binary,     T::order,        nullptr,     nullptr},
    {Op::And,         "and",       "and",      2,  K::binary,     T::logic,        nullptr,     nullptr},
    {Op::Or,          "or",        "or",       2,  K::binary,     T::logic,        nullptr,     nullptr},
    {Op::Where,       "where",     "where",    3,  K::ternary,    T::own,          nullptr,     nullptr},
    {Op::Clamp,       "clamp",     "clamp",    3,  K::ternary,    T::own,          nullptr,     nullptr},
    {Op::Sum,         "sum",       "sum",      1,  K::reduction,  T::own,          nullptr,     nullptr},
    {Op::Max,         "max",       "max",      1,  K::reduction,  T::own,          nullptr,     nullptr},
    {Op::Min,         "min",       "min",      1,  K::reduction,  T::own,          nullptr,     nullptr},
    {Op::Gather,      "gather",    "",         -1, K::gather,     T::own,          nullptr,     nullptr, true},
    {Op::Mean,        "mean",      "mean",     1,  K::sugar,      T::own,          nullptr,     nullptr},
    {Op::Softmax,     "softmax",   "softmax",  1,  K::sugar,      T::own,          nullptr,     nullptr},
    {Op::LogSumExp,   "logsumexp", "logsumexp", 1, K::sugar,      T::own,          nullptr,     nullptr},
    {Op::DivOrZero,   "div_or_zero", "",       2,  K::internal,   T::division,     nullptr,     nullptr},
};

}  // namespace

const OpDef& op_def(Op op) {
  for (const OpDef& d : kOps)
    if (d.op == op) return d;
  return kOps[0];
}

std::vector<const OpDef*> op_defs() {
  std::vector<const OpDef*> out;
  for (const OpDef& d : kOps) out.push_back(&d);
  return out;
}

}  // namespace flashgen
