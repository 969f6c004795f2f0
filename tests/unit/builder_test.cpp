// The public C++ builder (include/flashgen/builder.h): builds the variant programs of examples/ without
// text, checks their dimension sets and types, and shows structural equality and hashing.
#include <gtest/gtest.h>

#include "flashgen/builder.h"

using namespace flashgen;

namespace {

Program build_causal(const std::string& name = "causal") {
  ProgramBuilder b(name);
  auto q = b.param("q", DType::bf16, {"b", "h", "m", "d"});
  auto k = b.param("k", DType::bf16, {"b", "h", "n", "d"});
  auto v = b.param("v", DType::bf16, {"b", "h", "n", "e"});
  auto s = b.where(b.index("n") <= b.index("m"), b.sum(q * k, {"d"}) / b.sqrt(b.size("d")),
                   -b.inf());
  b.output("o", DType::bf16, {"b", "h", "m", "e"}, b.sum(b.softmax(s, "n") * v, {"n"}));
  b.output("lse", DType::f32, {"b", "h", "m"}, b.logsumexp(s, "n"));
  return b.build();
}

Program build_alibi_gqa() {
  ProgramBuilder b("alibi_gqa");
  auto q = b.param("q", DType::bf16, {"b", "g", "r", "m", "d"});
  auto k = b.param("k", DType::bf16, {"b", "g", "n", "d"});
  auto v = b.param("v", DType::bf16, {"b", "g", "n", "e"});
  auto slope = b.param("slope", DType::f32, {"g", "r"});
  auto s = b.sum(q * k, {"d"}) / b.sqrt(b.size("d"));
  auto n = b.index("n"), m = b.index("m");
  s = b.where(n <= m, s + slope * (n - m), -b.inf());
  b.output("o", DType::bf16, {"b", "g", "r", "m", "e"}, b.sum(b.softmax(s, "n") * v, {"n"}));
  return b.build();
}

Program build_document() {
  ProgramBuilder b("document");
  auto q = b.param("q", DType::bf16, {"b", "h", "m", "d"});
  auto k = b.param("k", DType::bf16, {"b", "h", "n", "d"});
  auto v = b.param("v", DType::bf16, {"b", "h", "n", "e"});
  b.param("doc", DType::i32, {"t"});
  auto same = b.gather("doc", {b.index("m")}) == b.gather("doc", {b.index("n")});
  auto s = b.where(same && b.index("n") <= b.index("m"), b.sum(q * k, {"d"}) / b.sqrt(b.size("d")),
                   -b.inf());
  b.output("o", DType::bf16, {"b", "h", "m", "e"}, b.sum(b.softmax(s, "n") * v, {"n"}));
  return b.build();
}

}  // namespace

TEST(Builder, CausalDimsAndTypes) {
  Program p = build_causal();
  ASSERT_EQ(p.outputs.size(), 2u);
  EXPECT_EQ(p.dims, (std::vector<std::string>{"b", "h", "m", "d", "n", "e"}));
  const Node& o = p.node(p.outputs[0].node);
  EXPECT_EQ(o.op, Op::Sum);
  EXPECT_EQ(o.type, DType::f32);
  EXPECT_EQ(p.dim_list(o.dims), "[b, h, m, e]");
  const Node& lse = p.node(p.outputs[1].node);
  EXPECT_EQ(lse.op, Op::LogSumExp);
  EXPECT_EQ(p.dim_list(lse.dims), "[b, h, m]");
}

TEST(Builder, SharedSubexpressionsAreOneNode) {
  Program p = build_causal();
  // The masked score s feeds both softmax and logsumexp: exactly one `where` node.
  int wheres = 0;
  for (const Node& n : p.nodes) wheres += n.op == Op::Where;
  EXPECT_EQ(wheres, 1);
}

TEST(Builder, StructuralEqualityAndHash) {
  Program a = build_causal(), b = build_causal(), c = build_causal("other");
  EXPECT_TRUE(a == b);
  EXPECT_EQ(a.hash(), b.hash());
  EXPECT_EQ(a.str(), b.str());
  EXPECT_FALSE(a == c);
  EXPECT_NE(a.hash(), c.hash());
  EXPECT_FALSE(a == build_alibi_gqa());
}

TEST(Builder, GqaAndGathers) {
  Program p = build_alibi_gqa();
  EXPECT_EQ(p.dim_list(p.node(p.outputs[0].node).dims), "[b, g, r, m, e]");
  Program d = build_document();
  int gathers = 0;
  for (const Node& n : d.nodes) gathers += n.op == Op::Gather;
  EXPECT_EQ(gathers, 2);
  EXPECT_EQ(d.params[3].name, "doc");
  EXPECT_EQ(d.dim_list(d.params[3].dims), "[t]");
}

TEST(Builder, DeadNodesFromRebindingAreDropped) {
  ProgramBuilder b("p");
  auto x = b.param("x", DType::f32, {"i"});
  auto unused = b.exp(x) + 1.0;
  (void)unused;
  b.output("y", DType::f32, {"i"}, x * 2.0);
  Program p = b.build();
  for (const Node& n : p.nodes) EXPECT_NE(n.op, Op::Exp);
}

TEST(Builder, Errors) {
  ProgramBuilder b("p");
  auto q = b.param("q", DType::f32, {"m", "d"});
  auto i = b.param("i", DType::i32, {"m"});
  EXPECT_THROW(b.param("m", DType::f32, {}), ProgramError);          // dim and param
  EXPECT_THROW(b.param("z", DType::f32, {"q"}), ProgramError);       // dim named like a param
  EXPECT_THROW(b.param("w", DType::f32, {"a", "a"}), ProgramError);  // repeated dim
  EXPECT_THROW(b.sum(q, {"n"}), ProgramError);                       // unknown dim
  EXPECT_THROW(b.sum(b.sum(q, {"d"}), {"d"}), ProgramError);         // dim the value lacks
  EXPECT_THROW(i / i, ProgramError);                                 // integer division
  EXPECT_THROW(q % q, ProgramError);                                 // float modulo
  EXPECT_THROW(b.where(q, q, q), ProgramError);                      // non-bool condition
  EXPECT_THROW(b.gather("q", {b.index("m")}), ProgramError);         // wrong rank
  EXPECT_THROW(b.gather("q", {q, q}), ProgramError);                 // float index
  EXPECT_THROW(b.output("o", DType::f32, {"m"}, q), ProgramError);   // missing dim d
  EXPECT_THROW(b.output("o", DType::i32, {"m", "d"}, q), ProgramError);  // float -> int
  EXPECT_THROW(b.build(), ProgramError);                             // no outputs
  try {
    b.output("o", DType::f32, {"m", "d", "x"}, q);
    FAIL();
  } catch (const ProgramError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown dimension 'x'"), std::string::npos);
  }
  try {
    b.output("o", DType::f32, {"m"}, q);
    FAIL();
  } catch (const ProgramError& e) {
    EXPECT_STREQ(e.what(),
                 "output 'o' is declared over [m] but its value is over [m, d]; missing [d]");
  }
}

TEST(Builder, EqualityIgnoresCreationOrder) {
  auto make = [](bool reversed) {
    ProgramBuilder b("p");
    auto x = b.param("x", DType::f32, {"m", "n"});
    Value e, t;
    if (reversed) {
      t = b.tanh(x);
      e = b.exp(x);
    } else {
      e = b.exp(x);
      t = b.tanh(x);
    }
    b.output("y", DType::f32, {"m", "n"}, e + t);
    return b.build();
  };
  EXPECT_TRUE(make(false) == make(true));
  EXPECT_EQ(make(false).hash(), make(true).hash());
}

TEST(Builder, RejectsForeignValuesAndBadConstants) {
  ProgramBuilder a("a"), b("b");
  auto x = a.param("x", DType::f32, {"m"});
  b.param("y", DType::f32, {"m"});
  EXPECT_THROW(b.exp(x), ProgramError);
  EXPECT_THROW(b.exp(Value{}), ProgramError);
  EXPECT_THROW(b.constant(0.5, DType::i64), ProgramError);
}
