// The op table (src/ir/op_table.cpp): one row per op, and what its consumers read from it agrees
// with the row: the text-form name, the parser's spelling of each function, the builder's type
// rule, the f64 value the reference and constant folding use, and the C function of float
// element code on every target.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "codegen/target.h"
#include "flashgen/frontend.h"
#include "flashgen/ir.h"
#include "ir/scalar_semantics.h"

namespace flashgen {
namespace {

TEST(OpTable, EveryOpHasOneRowWithAUniqueName) {
  std::set<std::string> names;
  std::set<int> ops;
  for (const OpDef* d : op_defs()) {
    EXPECT_TRUE(names.insert(d->name).second) << d->name;
    EXPECT_TRUE(ops.insert(static_cast<int>(d->op)).second) << d->name;
    EXPECT_EQ(&op_def(d->op), d);
    EXPECT_STREQ(op_name(d->op), d->name);
  }
  // Op is a dense enum from Param to DivOrZero: every value has its row.
  EXPECT_EQ(ops.size(), static_cast<size_t>(Op::DivOrZero) + 1);
}

// Each built-in function parses to its op, with the type its rule gives f32 and i32 arguments.
TEST(OpTable, FunctionsParseToTheirOpWithTheirTypeRule) {
  for (const OpDef* d : op_defs()) {
    if (d->kind != OpKind::function) continue;
    const std::string args = d->arity == 1 ? "x" : "x, x";
    for (const char* t : {"f32", "i32"}) {
      const std::string src = std::string("program p(x: ") + t + "[m]) {\n  out o: f32[m] = f32(" +
                              d->source + "(" + args + "))\n}\n";
      Program p = parse_source(src, "p.attn").at(0);
      bool found = false;
      for (const Node& n : p.nodes) {
        if (n.op != d->op) continue;
        found = true;
        const bool integer = std::string(t) == "i32";
        switch (d->type) {
          case TypeRule::to_float: EXPECT_EQ(n.type, DType::f32) << d->name; break;
          case TypeRule::numeric: EXPECT_EQ(n.type, integer ? DType::i32 : DType::f32) << d->name; break;
          case TypeRule::rounding: EXPECT_EQ(n.type, DType::f32) << d->name; break;
          default: ADD_FAILURE() << d->name << ": a function with rule " << int(d->type);
        }
      }
      // floor/ceil of an integer is the integer itself (no node)
      EXPECT_TRUE(found || (d->type == TypeRule::rounding && std::string(t) == "i32")) << src;
    }
  }
}

// The per-element cost class: every float function (the special-function pipe on a GPU),
// division and gathers are costly; arithmetic, comparisons, logic and the leaves are not.
TEST(OpTable, CostlyOpsAreTheSpecialFunctionsDivisionAndGathers) {
  for (const OpDef* d : op_defs()) {
    const bool want = (d->type == TypeRule::to_float && d->kind == OpKind::function) ||
                      d->op == Op::Div || d->op == Op::Gather;
    EXPECT_EQ(d->costly, want) << d->name;
  }
}

// Float unary functions have an f64 value and a C function on every target; the reference's
// scalar evaluation is the row's.
TEST(OpTable, FloatFunctionsHaveAValueAndACFunction) {
  for (const OpDef* d : op_defs()) {
    if (d->type != TypeRule::to_float) continue;
    for (Target t : {Target::cpu, Target::cuda_sm80, Target::cuda_sm90})
      EXPECT_TRUE(target_table(t).float_fn.count(d->op)) << d->name;
    if (d->arity == 1) EXPECT_NE(d->eval, nullptr) << d->name;
  }
  // Every unary row's value against the C++ function it must be.
  const std::vector<std::pair<Op, double (*)(double)>> want = {
      {Op::Neg, [](double v) { return -v; }},
      {Op::Not, [](double v) { return v == 0 ? 1.0 : 0.0; }},
      {Op::Exp, [](double v) { return std::exp(v); }},
      {Op::Exp2, [](double v) { return std::exp2(v); }},
      {Op::Log, [](double v) { return std::log(v); }},
      {Op::Log2, [](double v) { return std::log2(v); }},
      {Op::Sqrt, [](double v) { return std::sqrt(v); }},
      {Op::Rsqrt, [](double v) { return 1.0 / std::sqrt(v); }},
      {Op::Tanh, [](double v) { return std::tanh(v); }},
      {Op::Sigmoid, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }},
      {Op::Relu, [](double v) { return v < 0 ? 0.0 : v; }},
      {Op::Abs, [](double v) { return std::fabs(v); }},
      {Op::Floor, [](double v) { return std::floor(v); }},
      {Op::Ceil, [](double v) { return std::ceil(v); }},
      {Op::Sin, [](double v) { return std::sin(v); }},
      {Op::Cos, [](double v) { return std::cos(v); }},
  };
  for (const auto& [op, f] : want)
    for (double v : {-2.5, -0.25, 0.0, 0.25, 1.5, 3.0}) {
      const double got = scalar::float_unary(op, v), w = f(v);
      EXPECT_TRUE(got == w || (std::isnan(got) && std::isnan(w))) << op_name(op) << "(" << v << ")";
    }
  EXPECT_TRUE(std::isnan(scalar::float_unary(Op::Relu, std::nan(""))));  // NaN stays NaN
}

}  // namespace
}  // namespace flashgen
