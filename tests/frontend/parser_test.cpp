// The .attn parser (src/frontend/parser.cpp): precedence and associativity, rebinding, several
// programs and outputs, gathers, dimension indices, literals, every function, line handling,
// source locations, and agreement with programs built through the C++ ProgramBuilder.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "flashgen/builder.h"
#include "flashgen/frontend.h"

namespace flashgen {
namespace {

Program parse_one(const std::string& src) {
  auto ps = parse_source(src, "t.attn");
  EXPECT_EQ(ps.size(), 1u);
  return ps.at(0);
}

// A program over a few typed parameters whose one output is `expr` (of type `type`).
Program with_out(const std::string& type, const std::string& dims, const std::string& expr) {
  return parse_one(
      "program p(a: f32[m], b: f32[m], c: f32[m], x: bool[m], y: bool[m], i: i64[m], "
      "j: i64[m], s: f32[]) {\n  out o: " + type + dims + " = " + expr + "\n}\n");
}
Program f32m(const std::string& e) { return with_out("f32", "[m]", e); }
Program i64m(const std::string& e) { return with_out("i64", "[m]", e); }
Program boolm(const std::string& e) { return with_out("bool", "[m]", e); }

const Node& out_node(const Program& p, size_t k = 0) { return p.node(p.outputs.at(k).node); }

TEST(Parser, ArithmeticPrecedence) {
  EXPECT_EQ(f32m("a + b * c"), f32m("a + (b * c)"));
  EXPECT_NE(f32m("a + b * c"), f32m("(a + b) * c"));
  EXPECT_EQ(f32m("a * b + c"), f32m("(a * b) + c"));
  EXPECT_EQ(f32m("a - b / c"), f32m("a - (b / c)"));
  EXPECT_EQ(i64m("i + j % i"), i64m("i + (j % i)"));
  EXPECT_EQ(out_node(f32m("a + b * c")).op, Op::Add);
  EXPECT_EQ(out_node(f32m("a * b - c")).op, Op::Sub);
}

TEST(Parser, LeftAssociativity) {
  EXPECT_EQ(f32m("a - b - c"), f32m("(a - b) - c"));
  EXPECT_NE(f32m("a - b - c"), f32m("a - (b - c)"));
  EXPECT_EQ(f32m("a / b / c"), f32m("(a / b) / c"));
  EXPECT_NE(f32m("a / b / c"), f32m("a / (b / c)"));
  EXPECT_EQ(i64m("i % j * i"), i64m("(i % j) * i"));
  EXPECT_EQ(boolm("x or y or x"), boolm("(x or y) or x"));
  EXPECT_EQ(boolm("x and y and x"), boolm("(x and y) and x"));
}

TEST(Parser, UnaryMinusBindsTighterThanProducts) {
  EXPECT_EQ(f32m("-a * b"), f32m("(-a) * b"));
  EXPECT_NE(f32m("-a * b"), f32m("-(a * b)"));
  EXPECT_EQ(out_node(f32m("-a * b")).op, Op::Mul);
  EXPECT_EQ(f32m("a * -b"), f32m("a * (-b)"));
  EXPECT_EQ(f32m("- - a"), f32m("-(-a)"));
  EXPECT_EQ(out_node(f32m("--a")).op, Op::Neg);
  EXPECT_EQ(f32m("-exp(a)"), f32m("-(exp(a))"));
  // A negative literal is the negation of a literal (constants are not folded by the parser).
  EXPECT_EQ(out_node(i64m("-1 + i")).op, Op::Add);
  EXPECT_EQ(f32m("a + -inf"), f32m("a + (-(inf))"));
}

TEST(Parser, ComparisonAndLogicPrecedence) {
  EXPECT_EQ(boolm("a + b < c * a"), boolm("(a + b) < (c * a)"));
  EXPECT_EQ(boolm("a < b and b < c"), boolm("(a < b) and (b < c)"));
  EXPECT_EQ(boolm("not x and y"), boolm("(not x) and y"));
  EXPECT_NE(boolm("not x and y"), boolm("not (x and y)"));
  EXPECT_EQ(boolm("not a < b"), boolm("not (a < b)"));
  EXPECT_EQ(out_node(boolm("not a < b")).op, Op::Not);
  EXPECT_EQ(boolm("x or y and x"), boolm("x or (y and x)"));
  EXPECT_EQ(boolm("x and y or x"), boolm("(x and y) or x"));
  EXPECT_EQ(boolm("not not x"), boolm("not (not x)"));
  EXPECT_EQ(boolm("i == j and x"), boolm("(i == j) and x"));
  // Parenthesized comparisons may be compared again.
  EXPECT_EQ(out_node(boolm("(a < b) == (b < c)")).op, Op::Eq);
}

TEST(Parser, EveryComparisonAndOperator) {
  const std::pair<const char*, Op> cmp[] = {{"==", Op::Eq}, {"!=", Op::Ne}, {"<", Op::Lt},
                                            {"<=", Op::Le}, {">", Op::Gt},  {">=", Op::Ge}};
  for (const auto& [s, op] : cmp) {
    const Program prog = boolm(std::string("a ") + s + " i");  // n refers into it
    const Node& n = out_node(prog);
    EXPECT_EQ(n.op, op) << s;
    EXPECT_EQ(n.type, DType::boolean);
  }
  EXPECT_EQ(out_node(boolm("x and y")).op, Op::And);
  EXPECT_EQ(out_node(boolm("x or y")).op, Op::Or);
  EXPECT_EQ(out_node(i64m("i % j")).op, Op::Mod);
  EXPECT_EQ(out_node(f32m("a / i")).op, Op::Div);
}

TEST(Parser, RebindingSeesTheLatestBinding) {
  // `s = s + 1` reads the previous s.
  EXPECT_EQ(f32m("a + 1"), parse_one("program p(a: f32[m], b: f32[m], c: f32[m], x: bool[m], "
                                     "y: bool[m], i: i64[m], j: i64[m], s: f32[]) {\n"
                                     "  out o: f32[m] = a + 1\n}\n"));
  Program p = parse_one("program p(a: f32[m], b: f32[m]) {\n"
                        "  t = a\n  u = t\n  t = t * 2\n  t = t + u\n"
                        "  out o: f32[m] = t\n}\n");
  Program q = parse_one("program p(a: f32[m], b: f32[m]) {\n  out o: f32[m] = a * 2 + a\n}\n");
  EXPECT_EQ(p, q);
  // A rebinding may change the type and the dimensions.
  Program r = parse_one("program p(a: f32[m], b: f32[n]) {\n"
                        "  t = a\n  t = t < b\n  out o: bool[m, n] = t\n}\n");
  EXPECT_EQ(out_node(r).op, Op::Lt);
  EXPECT_EQ(out_node(r).dims.size(), 2u);
  // An output is computed from the bindings at its statement; later rebindings do not change it.
  Program s = parse_one("program p(a: f32[m]) {\n  t = a\n  out o: f32[m] = t\n"
                        "  t = exp(a)\n  out o2: f32[m] = t\n}\n");
  EXPECT_EQ(out_node(s, 0).op, Op::Param);
  EXPECT_EQ(out_node(s, 1).op, Op::Exp);
}

TEST(Parser, NameSpaces) {
  // A local may be named like a function; calls and values are told apart by '('.
  Program p = parse_one("program p(a: f32[m]) {\n  exp = a * 2\n  out o: f32[m] = exp(exp)\n}\n");
  EXPECT_EQ(out_node(p).op, Op::Exp);
  // An output may share its name with a local (outputs are not values).
  Program q = parse_one("program p(a: f32[m]) {\n  o = a * 2\n  out o: f32[m] = o\n}\n");
  EXPECT_EQ(q.outputs.at(0).name, "o");
  EXPECT_EQ(out_node(q).op, Op::Mul);
  // A local shadows nothing declared (parameters and dimensions cannot be rebound), so names
  // from another program do not leak.
  EXPECT_THROW(parse_source("program p(a: f32[m]) {\n  t = a\n  out o: f32[m] = t\n}\n"
                            "program r(a: f32[m]) {\n  out o: f32[m] = t\n}\n",
                            "t.attn"),
               SourceError);
}

TEST(Parser, SeveralProgramsInOrder) {
  auto ps = parse_source(
      "# first\nprogram one(q: f32[m, d]) {\n  out o: f32[m] = sum(q, d)\n}\n\n"
      "program two(q: bf16[n]) { out o: f32[n] = exp(q) }\n"
      "program three(x: i32[m], y: i32[k])\n{\n  out o: i64[k, m] = x % y\n}",
      "t.attn");
  ASSERT_EQ(ps.size(), 3u);
  EXPECT_EQ(ps[0].name, "one");
  EXPECT_EQ(ps[1].name, "two");
  EXPECT_EQ(ps[2].name, "three");
  // Dimensions belong to their program.
  EXPECT_EQ(ps[0].dims, (std::vector<std::string>{"m", "d"}));
  EXPECT_EQ(ps[1].dims, (std::vector<std::string>{"n"}));
  EXPECT_EQ(ps[2].dims, (std::vector<std::string>{"m", "k"}));
  EXPECT_EQ(&select_program(ps, "two"), &ps[1]);
}

TEST(Parser, SeveralOutputsInStatementOrder) {
  Program p = parse_one(
      "program p(q: f32[m, d], k: f32[n, d]) {\n"
      "  s = sum(q * k, d)\n"
      "  out z: f32[n, m] = s\n"
      "  out a: f32[m] = logsumexp(s, n)\n"
      "  out c: bf16[m, n] = softmax(s, n)\n"
      "}\n");
  ASSERT_EQ(p.outputs.size(), 3u);
  EXPECT_EQ(p.outputs[0].name, "z");
  EXPECT_EQ(p.outputs[1].name, "a");
  EXPECT_EQ(p.outputs[2].name, "c");
  // An output keeps its declared memory order (n before m), and its declared type.
  int m = p.find_dim("m"), n = p.find_dim("n");
  EXPECT_EQ(p.outputs[0].dims, (std::vector<int>{n, m}));
  EXPECT_EQ(p.outputs[2].dims, (std::vector<int>{m, n}));
  EXPECT_EQ(p.outputs[2].type, DType::bf16);
  EXPECT_EQ(out_node(p, 1).op, Op::LogSumExp);
  EXPECT_EQ(out_node(p, 2).op, Op::Softmax);
}

TEST(Parser, Gathers) {
  Program p = parse_one(
      "program p(doc: i32[t], table: f32[h, u], bias: f32[h, i, j], s: f32[h, m, n]) {\n"
      "  mask = doc[m] == doc[n]\n"
      "  rel = table[h, clamp(n - m + 64, 0, 127)]\n"
      "  out o: f32[h, m, n] = where(mask, s + rel + bias[h, m, n], -inf)\n"
      "  out first: i32[] = doc[0]\n"
      "}\n");
  int h = p.find_dim("h"), m = p.find_dim("m"), n = p.find_dim("n");
  // A parameter used only through indexing still declares its dimensions.
  EXPECT_GE(p.find_dim("t"), 0);
  EXPECT_GE(p.find_dim("u"), 0);
  int gathers = 0;
  for (const Node& node : p.nodes) {
    if (node.op != Op::Gather) continue;
    ++gathers;
    const std::string& name = p.params[node.param].name;
    if (name == "table") {
      EXPECT_EQ(node.dims, dimset_union({h}, dimset_union({m}, {n})));
      EXPECT_EQ(p.node(node.args[1]).op, Op::Clamp);
    }
    if (name == "bias") EXPECT_EQ(node.args.size(), 3u);
  }
  EXPECT_EQ(gathers, 5);  // doc[m], doc[n], table[...], bias[...], doc[0]
  EXPECT_TRUE(out_node(p, 1).dims.empty());
  EXPECT_EQ(out_node(p, 1).op, Op::Gather);
  // A multi-line gather (a line break inside [ ] continues the statement).
  Program q = parse_one("program p(bias: f32[i, j], q: f32[m], k: f32[n]) {\n"
                        "  out o: f32[m, n] = bias[\n"
                        "    m,\n    n]\n}\n");
  EXPECT_EQ(out_node(q).op, Op::Gather);
}

TEST(Parser, DimensionIndicesAndSizes) {
  Program p = parse_one("program p(q: f32[m, d], k: f32[n, d]) {\n"
                        "  out o: i64[m, n] = n - m\n"
                        "  out sz: f32[] = sqrt(size(d))\n}\n");
  const Node& sub = out_node(p, 0);
  EXPECT_EQ(sub.op, Op::Sub);
  EXPECT_EQ(sub.type, DType::i64);
  EXPECT_EQ(p.node(sub.args[0]).op, Op::Index);
  EXPECT_EQ(p.node(sub.args[0]).dim, p.find_dim("n"));
  const Node& sq = out_node(p, 1);
  EXPECT_EQ(sq.type, DType::f32);
  EXPECT_EQ(p.node(sq.args[0]).op, Op::Size);
  EXPECT_EQ(p.node(sq.args[0]).dim, p.find_dim("d"));
}

TEST(Parser, Literals) {
  Program p = parse_one("program p(a: f32[]) {\n"
                        "  out i: i64[] = 12\n  out h: f32[] = 0.5\n  out t: f32[] = 3.\n"
                        "  out e: f32[] = 1e-9\n  out f: f32[] = inf\n"
                        "  out y: bool[] = true\n  out n: bool[] = false\n}\n");
  auto c = [&](size_t k) { return out_node(p, k); };
  EXPECT_EQ(c(0).op, Op::Const);
  EXPECT_EQ(c(0).type, DType::i64);
  EXPECT_EQ(c(0).value, 12);
  EXPECT_EQ(c(1).type, DType::f32);
  EXPECT_EQ(c(1).value, 0.5);
  EXPECT_EQ(c(2).type, DType::f32);
  EXPECT_EQ(c(2).value, 3);
  EXPECT_EQ(c(3).value, 1e-9);
  EXPECT_TRUE(std::isinf(c(4).value) && c(4).value > 0);
  EXPECT_EQ(c(5).type, DType::boolean);
  EXPECT_EQ(c(5).value, 1);
  EXPECT_EQ(c(6).type, DType::boolean);
  EXPECT_EQ(c(6).value, 0);
}

TEST(Parser, EveryFunction) {
  const std::pair<const char*, Op> unary[] = {
      {"exp", Op::Exp},   {"exp2", Op::Exp2},       {"log", Op::Log},   {"log2", Op::Log2},
      {"sqrt", Op::Sqrt}, {"rsqrt", Op::Rsqrt},     {"tanh", Op::Tanh}, {"sigmoid", Op::Sigmoid},
      {"relu", Op::Relu}, {"abs", Op::Abs},         {"floor", Op::Floor}, {"ceil", Op::Ceil},
      {"sin", Op::Sin},   {"cos", Op::Cos}};
  for (const auto& [f, op] : unary) EXPECT_EQ(out_node(f32m(std::string(f) + "(a)")).op, op) << f;
  EXPECT_EQ(out_node(f32m("maximum(a, b)")).op, Op::Maximum);
  EXPECT_EQ(out_node(f32m("minimum(a, i)")).op, Op::Minimum);
  EXPECT_EQ(out_node(f32m("pow(a, 2)")).op, Op::Pow);
  EXPECT_EQ(out_node(f32m("clamp(a, 0, 1.5)")).op, Op::Clamp);
  EXPECT_EQ(out_node(f32m("where(x, a, b)")).op, Op::Where);
  const std::pair<const char*, DType> casts[] = {
      {"f32", DType::f32}, {"f16", DType::f16}, {"bf16", DType::bf16}, {"i32", DType::i32},
      {"i64", DType::i64}};
  for (const auto& [f, t] : casts) {
    const Program prog = with_out("f32", "[m]", std::string(f) + "(i * 2)");  // n refers into it
    const Node& n = out_node(prog);
    EXPECT_EQ(n.type, t) << f;  // i64(i * 2) is the value itself: already i64
  }
  Program r = parse_one("program p(q: f32[m, d, e]) {\n"
                        "  out s: f32[m] = sum(q, d, e)\n  out x: f32[m, d] = max(q, e)\n"
                        "  out n: f32[m, e] = min(q, d)\n  out a: f32[] = mean(q, m, d, e)\n"
                        "  out sm: f32[m, d, e] = softmax(q, d)\n"
                        "  out l: f32[d, e] = logsumexp(q, m)\n}\n");
  const Op reductions[] = {Op::Sum, Op::Max, Op::Min, Op::Mean, Op::Softmax, Op::LogSumExp};
  for (size_t k = 0; k < 6; ++k) EXPECT_EQ(out_node(r, k).op, reductions[k]) << k;
  EXPECT_EQ(out_node(r, 0).reduce.size(), 2u);
  EXPECT_EQ(out_node(r, 3).reduce.size(), 3u);
}

TEST(Parser, LayoutOfLines) {
  // Line breaks inside ( ) continue a statement; comments and blank lines anywhere; CRLF; a
  // body on one line; the closing brace right after a statement.
  Program a = parse_one(
      "# leading comment\r\n\r\nprogram p(q: f32[m, d],  # the queries\r\n"
      "          k: f32[n, d]) {  # open\r\n"
      "  s = sum(q *\r\n     k, d)  # scores\r\n\r\n"
      "  out o: f32[m, n] = exp(s) }\r\n");
  Program b = parse_one("program p(q: f32[m, d], k: f32[n, d]) { out o: f32[m, n] = "
                        "exp(sum(q * k, d)) }");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.hash(), b.hash());
}

TEST(Parser, ScalarParameters) {
  Program p = parse_one("program p(lam: f32[], q: f32[m]) {\n  out o: f32[m] = lam * q\n}\n");
  EXPECT_TRUE(p.params[0].dims.empty());
  EXPECT_EQ(p.dims, (std::vector<std::string>{"m"}));
  // `lam[]` is `lam` itself; `q[]` is a rank error.
  EXPECT_EQ(p, parse_one("program p(lam: f32[], q: f32[m]) {\n"
                         "  out o: f32[m] = lam[] * q\n}\n"));
  EXPECT_THROW(parse_one("program p(lam: f32[], q: f32[m]) {\n  out o: f32[m] = q[]\n}\n"),
               SourceError);
}

TEST(Parser, SourceLocations) {
  Program p = parse_one("program causal(q: f32[m, d],\n               k: f32[n, d]) {\n"
                        "  s = sum(q * k, d)\n  out o: f32[m, n] = s + 1\n}\n");
  EXPECT_EQ(p.loc.line, 1);
  EXPECT_EQ(p.loc.col, 9);
  EXPECT_EQ(p.params[1].loc.line, 2);
  EXPECT_EQ(p.params[1].loc.col, 16);
  EXPECT_EQ(p.outputs[0].loc.line, 4);
  EXPECT_EQ(p.outputs[0].loc.col, 7);
  const Node& add = out_node(p);
  EXPECT_EQ(add.loc.line, 4);
  EXPECT_EQ(add.loc.col, 24);  // the '+'
  const Node& sum = p.node(add.args[0]);
  EXPECT_EQ(sum.loc.line, 3);
  EXPECT_EQ(sum.loc.col, 7);  // the function name
}

// The parser builds through ProgramBuilder, so a program parsed from text equals the same
// program built in C++ (structurally, node for node).
TEST(Parser, AgreesWithTheCppBuilder) {
  ProgramBuilder b("causal");
  auto q = b.param("q", DType::bf16, {"b", "h", "m", "d"});
  auto k = b.param("k", DType::bf16, {"b", "h", "n", "d"});
  auto v = b.param("v", DType::bf16, {"b", "h", "n", "e"});
  // One builder call per statement: C++ leaves the order of argument evaluation open, and
  // node order is part of a program's structure.
  auto n = b.index("n");
  auto m = b.index("m");
  auto mask = n <= m;
  auto qk = b.sum(q * k, {"d"});
  auto scale = b.sqrt(b.size("d"));
  auto scores = qk / scale;
  auto minus_inf = -b.inf();
  auto s = b.where(mask, scores, minus_inf);
  auto p = b.softmax(s, "n") * v;
  b.output("o", DType::bf16, {"b", "h", "m", "e"}, b.sum(p, {"n"}));
  b.output("lse", DType::f32, {"b", "h", "m"}, b.logsumexp(s, "n"));
  Program built = b.build();
  Program parsed = parse_one(
      "program causal(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {\n"
      "  s = where(n <= m, sum(q * k, d) / sqrt(size(d)), -inf)\n"
      "  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)\n"
      "  out lse: f32[b, h, m] = logsumexp(s, n)\n"
      "}\n");
  EXPECT_EQ(parsed, built);
  EXPECT_EQ(parsed.str(), built.str());
  EXPECT_EQ(parsed.hash(), built.hash());
}

}  // namespace
}  // namespace flashgen
