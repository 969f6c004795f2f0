// Tests of call-time binding (src/ref/bind.cpp) and random inputs (src/ref/random.cpp): every
// error names the parameter and the dimension; inputs are converted to the declared dtypes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "flashgen/builder.h"
#include "flashgen/error.h"
#include "flashgen/ref.h"

namespace flashgen {
namespace {

Program attention() {
  ProgramBuilder b("attn");
  auto q = b.param("q", DType::bf16, {"b", "h", "m", "d"});
  auto k = b.param("k", DType::bf16, {"b", "h", "n", "d"});
  auto v = b.param("v", DType::bf16, {"b", "h", "n", "e"});
  b.param("doc", DType::i32, {"t"});
  b.param("keep", DType::boolean, {"n"});
  auto s = b.sum(q * k, {"d"}) / b.sqrt(b.size("d"));
  s = b.where(b.gather("keep", {b.index("n")}) &&
                  b.gather("doc", {b.index("m")}) == b.gather("doc", {b.index("n")}),
              s, -b.inf());
  b.output("o", DType::bf16, {"b", "h", "m", "e"}, b.sum(b.softmax(s, "n") * v, {"n"}));
  return b.build();
}

TensorMap good_inputs() {
  return {{"q", Tensor(DType::f32, {2, 3, 5, 4})}, {"k", Tensor(DType::f32, {2, 3, 7, 4})},
          {"v", Tensor(DType::bf16, {2, 3, 7, 6})}, {"doc", Tensor(DType::i32, {7})},
          {"keep", Tensor(DType::boolean, {7})}};
}

std::string error_of(const Program& p, const TensorMap& in, const Extents& extra = {}) {
  try {
    bind_extents(p, in, extra);
  } catch (const CallError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(RefBind, BindsEveryDimension) {
  Program p = attention();
  Extents e = bind_extents(p, good_inputs());
  EXPECT_EQ(e, (Extents{{"b", 2}, {"h", 3}, {"m", 5}, {"d", 4}, {"n", 7}, {"e", 6}, {"t", 7}}));
  // Extra extents that agree, or name no dimension of the program, are accepted.
  EXPECT_EQ(bind_extents(p, good_inputs(), {{"m", 5}, {"zzz", 9}}), e);
}

TEST(RefBind, ErrorsNameParameterAndDimension) {
  Program p = attention();
  TensorMap in = good_inputs();
  in.erase("v");
  EXPECT_EQ(error_of(p, in), "missing input for parameter 'v' (bf16[b, h, n, e])");

  in = good_inputs();
  in["k"] = Tensor(DType::f32, {2, 3, 7});
  EXPECT_EQ(error_of(p, in),
            "parameter 'k' is bf16[b, h, n, d] (rank 4) but its input has rank 3, shape "
            "[2, 3, 7]");

  in = good_inputs();
  in["k"] = Tensor(DType::f32, {2, 3, 7, 32});
  EXPECT_EQ(error_of(p, in), "parameter 'k' dimension 'd' has extent 32 but 'q' binds d = 4");

  in = good_inputs();
  in["doc"] = Tensor(DType::f32, {7});
  EXPECT_EQ(error_of(p, in),
            "parameter 'doc' is i32[t] but its input is f32 (integer parameters need an "
            "integer array)");
  in = good_inputs();
  in["q"] = Tensor(DType::i64, {2, 3, 5, 4});
  EXPECT_NE(error_of(p, in).find("parameter 'q' is bf16[b, h, m, d] but its input is i64"),
            std::string::npos);
  in = good_inputs();
  in["keep"] = Tensor(DType::i32, {7});
  EXPECT_NE(error_of(p, in).find("'keep' is bool[n] but its input is i32 (bool parameters"),
            std::string::npos);

  EXPECT_EQ(error_of(p, good_inputs(), {{"n", 8}}),
            "dimension 'n' is given as 8 but parameter 'k' binds n = 7");
}

TEST(RefBind, UnboundDimensionNeedsAnExtent) {
  Program p = attention();
  p.dims.push_back("z");  // a dimension no parameter binds
  EXPECT_NE(error_of(p, good_inputs()).find("dimension 'z' is not bound by any input"),
            std::string::npos);
  EXPECT_EQ(bind_extents(p, good_inputs(), {{"z", 3}}).at("z"), 3);
}

TEST(RefBind, PrepareConvertsToDeclaredTypes) {
  Program p = attention();
  TensorMap in = good_inputs();
  Tensor q(DType::f64, {2, 3, 5, 4});
  for (int64_t i = 0; i < q.numel(); ++i) q.set(i, 0.1 * i + 1e-5);
  in["q"] = q;
  Tensor doc(DType::i64, {7});
  for (int i = 0; i < 7; ++i) doc.set(i, i * 1000);
  in["doc"] = doc;
  TensorMap pr = prepare_inputs(p, in);
  EXPECT_EQ(pr.at("q").dtype(), DType::bf16);
  for (int64_t i = 0; i < q.numel(); ++i)
    ASSERT_EQ(pr.at("q").get(i), round_to_dtype(q.get(i), DType::bf16));
  EXPECT_EQ(pr.at("doc").dtype(), DType::i32);
  EXPECT_EQ(pr.at("doc").get(6), 6000);
  EXPECT_EQ(pr.at("k").dtype(), DType::bf16);
  // An i64 value that does not fit the declared i32 is an error naming the parameter.
  doc.set(3, 5e9);
  in["doc"] = doc;
  try {
    prepare_inputs(p, in);
    ADD_FAILURE();
  } catch (const CallError& e) {
    EXPECT_NE(std::string(e.what()).find("parameter 'doc'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("5000000000"), std::string::npos) << e.what();
  }
}

TEST(RefBind, RandomInputsFollowTheirDistributions) {
  Program p = attention();
  Extents ext = {{"b", 2}, {"h", 3}, {"m", 50}, {"d", 64}, {"n", 77}, {"e", 6}, {"t", 77}};
  TensorMap a = random_inputs(p, ext, 42), a2 = random_inputs(p, ext, 42),
            c = random_inputs(p, ext, 43);
  ASSERT_EQ(a.at("q").shape(), (std::vector<int64_t>{2, 3, 50, 64}));
  EXPECT_EQ(a.at("q").dtype(), DType::bf16);
  double s = 0, s2 = 0;
  int64_t n = a.at("q").numel(), same = 0, diff = 0;
  for (int64_t i = 0; i < n; ++i) {
    double x = a.at("q").get(i);
    s += x, s2 += x * x;
    EXPECT_EQ(x, round_to_dtype(x, DType::bf16));
    same += x == a2.at("q").get(i);
    diff += x != c.at("q").get(i);
  }
  EXPECT_EQ(same, n);          // same seed, same values
  EXPECT_GT(diff, n * 9 / 10);  // another seed, other values
  EXPECT_NEAR(s / n, 0, 0.03);
  EXPECT_NEAR(s2 / n, 1, 0.05);
  int trues = 0;
  for (int i = 0; i < 77; ++i) trues += a.at("keep").get(i) != 0;
  EXPECT_GT(trues, 45);
  EXPECT_LT(trues, 75);
  // doc indexes nothing here: values in [0, 4).
  for (int i = 0; i < 77; ++i) {
    EXPECT_GE(a.at("doc").get(i), 0);
    EXPECT_LT(a.at("doc").get(i), 4);
  }
  EXPECT_NO_THROW(evaluate_reference(p, random_inputs(p, {{"b", 1}, {"h", 2}, {"m", 7},
                                                           {"d", 5}, {"n", 9}, {"e", 3},
                                                           {"t", 9}}, 1)));
}

// Large tensors fill in parallel chunks; element k's value depends only on (seed, name, k), so
// a long tensor (several threads) starts with exactly the values of a short one (one thread).
TEST(RefBind, RandomInputsDoNotDependOnTheirLengthOrThreads) {
  ProgramBuilder b("long");
  auto x = b.param("x", DType::f32, {"m"});
  auto k = b.param("k", DType::boolean, {"m"});
  auto i = b.param("i", DType::i32, {"m"});
  b.output("o", DType::f32, {"m"}, b.where(k, x, b.cast(i, DType::f32)));
  Program p = b.build();
  TensorMap small = random_inputs(p, {{"m", 1000}}, 5);
  TensorMap big = random_inputs(p, {{"m", 300001}}, 5);
  for (const char* name : {"x", "k", "i"})
    for (int64_t j = 0; j < 1000; ++j)
      ASSERT_EQ(small.at(name).get(j), big.at(name).get(j)) << name << "[" << j << "]";
  // and the long one is not a repetition of its first chunk
  int64_t same = 0;
  for (int64_t j = 0; j < 1000; ++j) same += big.at("x").get(j) == big.at("x").get(150000 + j);
  EXPECT_LT(same, 50);
}

TEST(RefBind, RandomIndexParametersStayInRange) {
  ProgramBuilder b("idx");
  auto x = b.param("x", DType::f32, {"m"});
  b.param("pos", DType::i32, {"m"});
  b.param("table", DType::f32, {"u"});
  b.param("other", DType::f32, {"w"});
  // pos indexes u (directly) and w (through a cast): values in [0, min(u, w)).
  auto y = b.gather("table", {b.read("pos")}) +
           b.gather("other", {b.cast(b.read("pos"), DType::i64)});
  b.output("y", DType::f32, {"m"}, x + y);
  Program p = b.build();
  for (uint64_t seed = 0; seed < 5; ++seed) {
    TensorMap in = random_inputs(p, {{"m", 200}, {"u", 13}, {"w", 9}}, seed);
    int64_t mx = 0;
    for (int i = 0; i < 200; ++i) mx = std::max<int64_t>(mx, in.at("pos").get(i));
    EXPECT_LT(mx, 9);
    EXPECT_GE(mx, 6);  // uniform over the range, not just [0, 4)
    EXPECT_NO_THROW(evaluate_reference(p, in));
  }
  EXPECT_THROW(random_inputs(p, {{"m", 2}, {"u", 3}}, 0), CallError);  // w has no extent
}

}  // namespace
}  // namespace flashgen
