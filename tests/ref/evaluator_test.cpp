// Hand-computed cases for the reference evaluator (src/ref/evaluator.cpp): softmax and
// logsumexp including all -inf rows, floor modulo, integer wrap-around, gathers and their
// out-of-range error, mean, empty reductions, casts, output layout, several outputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "flashgen/builder.h"
#include "flashgen/compile.h"
#include "flashgen/flashgen.h"
#include "flashgen/error.h"
#include "flashgen/ref.h"
#include "passes/passes.h"

namespace flashgen {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

Tensor make(DType t, std::vector<int64_t> shape, const std::vector<double>& v) {
  Tensor x(t, std::move(shape));
  EXPECT_EQ(x.numel(), static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) x.set(static_cast<int64_t>(i), v[i]);
  return x;
}

// An f32 value: what every f32-typed value of the reference holds (docs/language.md §5).
double f32(double x) { return static_cast<double>(static_cast<float>(x)); }

std::vector<double> values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get(i));
  return v;
}

TEST(RefEval, SoftmaxOfThreeValues) {
  ProgramBuilder b("sm");
  auto x = b.param("x", DType::f32, {"n"});
  b.output("p", DType::f32, {"n"}, b.softmax(x, "n"));
  b.output("l", DType::f32, {}, b.logsumexp(x, "n"));
  Program p = b.build();
  auto out = evaluate_reference_f64(p, {{"x", make(DType::f32, {3}, {1, 2, 3})}});
  double z = std::exp(1) + std::exp(2) + std::exp(3);
  auto pv = values(out.at("p"));
  EXPECT_EQ(pv[0], f32(std::exp(1) / z));
  EXPECT_EQ(pv[1], f32(std::exp(2) / z));
  EXPECT_EQ(pv[2], f32(std::exp(3) / z));
  EXPECT_EQ(out.at("l").get(0), f32(std::log(z)));
  EXPECT_EQ(pv[0], f32(0.09003057317038046));
  // Rounded outputs are f32 tensors holding the f32 rounding of the same numbers.
  auto r = evaluate_reference(p, {{"x", make(DType::f32, {3}, {1, 2, 3})}});
  EXPECT_EQ(r.at("p").dtype(), DType::f32);
  EXPECT_EQ(r.at("p").get(2), static_cast<double>(static_cast<float>(std::exp(3) / z)));
  // Shifting the inputs by a large constant changes nothing (the max is subtracted).
  auto big = evaluate_reference_f64(p, {{"x", make(DType::f32, {3}, {1001, 1002, 1003})}});
  EXPECT_NEAR(big.at("p").get(0), pv[0], 1e-15);
}

TEST(RefEval, AllMinusInfRowsGiveZeroSoftmaxAndMinusInfLse) {
  ProgramBuilder b("rows");
  auto x = b.param("x", DType::f32, {"m", "n"});
  b.output("p", DType::f32, {"m", "n"}, b.softmax(x, "n"));
  b.output("l", DType::f32, {"m"}, b.logsumexp(x, "n"));
  b.output("mx", DType::f32, {"m"}, b.max(x, {"n"}));
  Program p = b.build();
  Tensor in = make(DType::f32, {3, 2}, {-kInf, -kInf, 0, -kInf, std::log(3.0), std::log(1.0)});
  auto out = evaluate_reference_f64(p, {{"x", in}});
  std::vector<double> expect = {0, 0, 1, 0, 0.75, 0.25};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(out.at("p").get(i), expect[i], 1e-7) << i;
  EXPECT_EQ(out.at("p").get(0), 0);  // exactly 0, not NaN
  EXPECT_EQ(out.at("p").get(2), 1);
  EXPECT_EQ(out.at("l").get(0), -kInf);
  EXPECT_EQ(out.at("l").get(1), 0);
  EXPECT_NEAR(out.at("l").get(2), std::log(4.0), 1e-7);  // log(3) was rounded to f32
  EXPECT_EQ(out.at("mx").get(0), -kInf);
  for (double v : values(out.at("p"))) EXPECT_FALSE(std::isnan(v));
}

TEST(RefEval, CausalMaskWithFullyMaskedRows) {
  // where(n <= m - 2, x, -inf): rows m = 0 and 1 are fully masked.
  ProgramBuilder b("shifted");
  auto x = b.param("x", DType::f32, {"m", "n"});
  auto s = b.where(b.index("n") <= b.index("m") - 2, x, -b.inf());
  b.output("p", DType::f32, {"m", "n"}, b.softmax(s, "n"));
  b.output("l", DType::f32, {"m"}, b.logsumexp(s, "n"));
  Program p = b.build();
  Tensor in(DType::f32, {4, 3});
  for (int i = 0; i < 12; ++i) in.set(i, 0.5 * i - 2);
  auto out = evaluate_reference_f64(p, {{"x", in}});
  for (int m = 0; m < 4; ++m) {
    double z = 0;
    for (int n = 0; n <= m - 2; ++n) z += std::exp(in.at({m, n}));
    for (int n = 0; n < 3; ++n) {
      double e = n <= m - 2 ? std::exp(in.at({m, n})) / z : 0.0;
      EXPECT_EQ(out.at("p").at({m, n}), f32(e)) << m << " " << n;
    }
    if (m < 2) EXPECT_EQ(out.at("l").get(m), -kInf) << m;
    else EXPECT_EQ(out.at("l").get(m), f32(std::log(z))) << m;
  }
}

TEST(RefEval, FloorModuloHasTheSignOfTheDivisor) {
  ProgramBuilder b("mod");
  auto a = b.param("a", DType::i64, {"i"});
  auto c = b.param("c", DType::i64, {"i"});
  b.output("r", DType::i64, {"i"}, a % c);
  Program p = b.build();
  auto out = evaluate_reference(p, {{"a", make(DType::i64, {7}, {7, -7, 7, -7, 0, 6, -1})},
                                    {"c", make(DType::i64, {7}, {3, 3, -3, -3, 5, -3, 4})}});
  EXPECT_EQ(out.at("r").dtype(), DType::i64);
  EXPECT_EQ(values(out.at("r")), (std::vector<double>{1, 2, -2, -1, 0, 0, 3}));
  // Index arithmetic: (n - m) % 4 over {m, n}.
  ProgramBuilder b2("mod2");
  b2.param("q", DType::f32, {"m"});
  b2.param("k", DType::f32, {"n"});
  b2.output("r", DType::i64, {"m", "n"},
             (b2.index("n") - b2.index("m")) % b2.constant(4, DType::i64));
  Program p2 = b2.build();
  auto o2 = evaluate_reference(p2, {{"q", Tensor(DType::f32, {3})},
                                    {"k", Tensor(DType::f32, {5})}});
  for (int m = 0; m < 3; ++m)
    for (int n = 0; n < 5; ++n) EXPECT_EQ(o2.at("r").at({m, n}), ((n - m) % 4 + 4) % 4);
  // Modulo by zero is an error, not a crash.
  EXPECT_THROW(evaluate_reference(p, {{"a", make(DType::i64, {1}, {3})},
                                      {"c", make(DType::i64, {1}, {0})}}),
               CallError);
}

TEST(RefEval, IntegerArithmeticIsExactAndI32Wraps) {
  ProgramBuilder b("ints");
  auto a = b.param("a", DType::i32, {"i"});
  auto c = b.param("c", DType::i64, {"i"});
  b.output("sq", DType::i32, {"i"}, a * a);          // i32: wraps modulo 2^32
  b.output("wide", DType::i64, {"i"}, a + c);        // i64: exact
  b.output("s", DType::i64, {}, b.sum(a, {"i"}));    // i64 accumulation
  b.output("big", DType::i64, {"i"}, c * 1000000007 + 1);
  b.output("neg", DType::i32, {"i"}, -a);
  b.output("mx", DType::i64, {}, b.max(c, {"i"}));
  Program p = b.build();
  auto out = evaluate_reference(
      p, {{"a", make(DType::i32, {3}, {65536, 2147483647, -5})},
          {"c", make(DType::i64, {3}, {1, 1, 4000000000.0})}});
  EXPECT_EQ(values(out.at("sq")), (std::vector<double>{0, 1, 25}));
  EXPECT_EQ(values(out.at("wide")), (std::vector<double>{65537, 2147483648.0, 3999999995.0}));
  EXPECT_EQ(out.at("s").get(0), 65536.0 + 2147483647.0 - 5);
  EXPECT_EQ(out.at("neg").get(1), -2147483647.0);
  EXPECT_EQ(out.at("mx").get(0), 4000000000.0);
  // 4e9 * 1000000007 + 1 = 4000000028000000001 needs all 62 bits: read the raw int64.
  const int64_t* raw = static_cast<const int64_t*>(out.at("big").data());
  EXPECT_EQ(raw[2], int64_t{4000000028000000001});
  EXPECT_EQ(raw[0], 1000000008);
}

TEST(RefEval, FusedIntegerDotWrapsTheI32Product) {
  // sum(a * a, i): the product is i32 (wraps), the sum accumulates in i64. Nothing else reads
  // the product, so the evaluator contracts without materializing it.
  ProgramBuilder b("dot");
  auto a = b.param("a", DType::i32, {"i", "j"});
  b.output("dot", DType::i64, {"j"}, b.sum(a * a, {"i"}));
  Program p = b.build();
  auto out = evaluate_reference(
      p, {{"a", make(DType::i32, {3, 2}, {65536, 1, 2147483647, 2, -5, 3})}});
  EXPECT_EQ(values(out.at("dot")), (std::vector<double>{0 + 1 + 25, 1 + 4 + 9}));
}

TEST(RefEval, StridedAndWiderInputs) {
  // A transposed view and an f64 array for an f32 parameter; an i64 array for an i32 one.
  ProgramBuilder b("strided");
  auto x = b.param("x", DType::f32, {"i", "j"});
  auto c = b.param("c", DType::i32, {"j"});
  b.output("y", DType::f32, {"i", "j"}, x * c);
  Program p = b.build();
  Tensor base(DType::f64, {3, 2});  // holds x transposed
  for (int i = 0; i < 6; ++i) base.set(i, 0.1 * i);
  Tensor xt = base.with_strides({2, 3}, {1, 2});
  auto out = evaluate_reference_f64(p, {{"x", xt}, {"c", make(DType::i64, {3}, {1, -2, 3})}});
  const double cs[] = {1, -2, 3};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(out.at("y").at({i, j}), f32(static_cast<float>(base.at({j, i})) * cs[j]));
}

TEST(RefEval, GathersReadParametersAtIndexExpressions) {
  ProgramBuilder b("gather");
  b.param("q", DType::f32, {"m"});
  b.param("k", DType::f32, {"n"});
  b.param("doc", DType::i32, {"t"});
  b.param("table", DType::f32, {"h", "u"});
  auto m = b.index("m"), n = b.index("n");
  b.output("same", DType::boolean, {"m", "n"},
           b.gather("doc", {m}) == b.gather("doc", {n}));
  auto rel = b.clamp(n - m + 2, b.constant(0, DType::i64), b.constant(4, DType::i64));
  b.output("bias", DType::f32, {"h", "m", "n"}, b.gather("table", {b.index("h"), rel}));
  Program p = b.build();
  Tensor table(DType::f32, {2, 5});
  for (int i = 0; i < 10; ++i) table.set(i, i * 10);
  TensorMap in = {{"q", Tensor(DType::f32, {3})}, {"k", Tensor(DType::f32, {4})},
                  {"doc", make(DType::i32, {4}, {0, 0, 1, 1})}, {"table", table}};
  auto out = evaluate_reference(p, in);
  EXPECT_EQ(out.at("same").dtype(), DType::boolean);
  std::vector<int> doc = {0, 0, 1, 1};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(out.at("same").at({i, j}), doc[i] == doc[j] ? 1 : 0);
      for (int h = 0; h < 2; ++h) {
        int r = std::clamp(j - i + 2, 0, 4);
        EXPECT_EQ(out.at("bias").at({h, i, j}), 10 * (h * 5 + r));
      }
    }
  // Out of range: doc[m] with m up to 4 but t = 3.
  in["doc"] = make(DType::i32, {3}, {0, 0, 1});
  try {
    evaluate_reference(p, in);
    ADD_FAILURE() << "no error";
  } catch (const CallError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'doc'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("index 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("dimension 't'"), std::string::npos) << msg;
  }
  // A negative index is out of range too.
  ProgramBuilder b2("neg");
  b2.param("x", DType::f32, {"i"});
  b2.output("y", DType::f32, {"i"}, b2.gather("x", {b2.index("i") - 1}));
  Program p2 = b2.build();
  try {
    evaluate_reference(p2, {{"x", Tensor(DType::f32, {2})}});
    ADD_FAILURE() << "no error";
  } catch (const CallError& e) {
    EXPECT_NE(std::string(e.what()).find("index -1"), std::string::npos) << e.what();
  }
}

TEST(RefEval, MeanSumMaxMinAndEmptySets) {
  ProgramBuilder b("red");
  auto x = b.param("x", DType::f32, {"i", "j"});
  b.output("mean", DType::f32, {"i"}, b.mean(x, {"j"}));
  b.output("sum", DType::f32, {"j"}, b.sum(x, {"i"}));
  b.output("all", DType::f32, {}, b.sum(x, {"i", "j"}));
  b.output("max", DType::f32, {"i"}, b.max(x, {"j"}));
  b.output("min", DType::f32, {"i"}, b.min(x, {"j"}));
  b.output("lse", DType::f32, {"i"}, b.logsumexp(x, "j"));
  Program p = b.build();
  auto out = evaluate_reference_f64(p, {{"x", make(DType::f32, {2, 3}, {1, 2, 6, -1, 0, 4})}});
  EXPECT_EQ(values(out.at("mean")), (std::vector<double>{3, 1}));
  EXPECT_EQ(values(out.at("sum")), (std::vector<double>{0, 2, 10}));
  EXPECT_EQ(out.at("all").get(0), 12);
  EXPECT_EQ(values(out.at("max")), (std::vector<double>{6, 4}));
  EXPECT_EQ(values(out.at("min")), (std::vector<double>{1, -1}));
  // j = 0: sum 0, max -inf, min +inf, mean NaN, logsumexp -inf.
  auto e = evaluate_reference_f64(p, {{"x", Tensor(DType::f32, {2, 0})}});
  EXPECT_EQ(values(e.at("max")), (std::vector<double>{-kInf, -kInf}));
  EXPECT_EQ(values(e.at("min")), (std::vector<double>{kInf, kInf}));
  EXPECT_EQ(values(e.at("lse")), (std::vector<double>{-kInf, -kInf}));
  EXPECT_TRUE(std::isnan(e.at("mean").get(0)));
  EXPECT_EQ(e.at("sum").numel(), 0);
  EXPECT_EQ(e.at("all").get(0), 0);
}

TEST(RefEval, CastsRoundToTheirType) {
  ProgramBuilder b("casts");
  auto x = b.param("x", DType::f32, {"i"});
  b.output("viabf16", DType::f32, {"i"}, b.cast(x, DType::bf16) * 1);
  b.output("viaf16", DType::f32, {"i"}, b.cast(x, DType::f16) + 0);
  b.output("asbf16", DType::bf16, {"i"}, x * 3);
  b.output("toint", DType::i32, {"i"}, b.cast(x, DType::i32));
  Program p = b.build();
  double t = 1 + std::ldexp(1, -8) + std::ldexp(1, -20);  // just above a bf16 tie
  Tensor in = make(DType::f64, {6}, {t, 2.7, -2.7, 1e20, std::nan(""), 65519});
  auto out = evaluate_reference(p, {{"x", in}});
  double tf = static_cast<float>(t);
  EXPECT_EQ(out.at("viabf16").get(0), 1 + std::ldexp(1, -7));
  EXPECT_EQ(out.at("viabf16").get(1), 2.703125);
  EXPECT_EQ(out.at("viaf16").get(0), 1 + std::ldexp(1, -8));  // f16 keeps 10 bits
  EXPECT_EQ(out.at("viaf16").get(5), 65504);
  EXPECT_EQ(out.at("asbf16").dtype(), DType::bf16);
  // x * 3 is an f32 value, then the output rounds it to bf16.
  EXPECT_EQ(out.at("asbf16").get(0), round_to_dtype(f32(3 * tf), DType::bf16));
  EXPECT_EQ(out.at("asbf16").get(3), round_to_dtype(f32(3 * static_cast<double>(1e20f)),
                                                    DType::bf16));
  EXPECT_EQ(values(out.at("toint")),
            (std::vector<double>{1, 2, -2, 2147483647, 0, 65519}));
  // The f64 evaluation skips only the output rounding: inputs are still rounded to f32, and
  // x * 3 is an f32 value.
  auto f = evaluate_reference_f64(p, {{"x", in}});
  EXPECT_EQ(f.at("asbf16").dtype(), DType::f64);
  EXPECT_EQ(f.at("asbf16").get(1), f32(3 * static_cast<double>(2.7f)));
}

TEST(RefEval, IndexSizeWhereLogicAndLayout) {
  ProgramBuilder b("misc");
  auto q = b.param("q", DType::bf16, {"m", "d"});
  b.param("k", DType::f32, {"n"});
  auto m = b.index("m"), n = b.index("n");
  b.output("diff", DType::i64, {"n", "m"}, n - m);  // declared order differs from sorted
  b.output("sz", DType::f32, {}, b.sqrt(b.size("d")));
  b.output("logic", DType::boolean, {"m", "n"},
           (n <= m && !(n == b.constant(1, DType::i64))) || m == b.constant(2, DType::i64));
  b.output("w", DType::f32, {"d", "m"},
           b.where(m >= b.constant(1, DType::i64), q, b.constant(-0.5)));
  Program p = b.build();
  Tensor qt(DType::f32, {3, 2});
  for (int i = 0; i < 6; ++i) qt.set(i, i + 0.25);
  auto out = evaluate_reference(p, {{"q", qt}, {"k", Tensor(DType::f32, {4})}});
  EXPECT_EQ(out.at("diff").shape(), (std::vector<int64_t>{4, 3}));
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(out.at("diff").at({j, i}), j - i);
      EXPECT_EQ(out.at("logic").at({i, j}), ((j <= i && j != 1) || i == 2) ? 1 : 0);
    }
  EXPECT_NEAR(out.at("sz").get(0), std::sqrt(2.0), 1e-7);
  EXPECT_EQ(out.at("w").shape(), (std::vector<int64_t>{2, 3}));
  for (int i = 0; i < 3; ++i)
    for (int d = 0; d < 2; ++d)
      EXPECT_EQ(out.at("w").at({d, i}), i >= 1 ? round_to_dtype(qt.at({i, d}), DType::bf16)
                                                : -0.5);
}

TEST(RefEval, ElementwiseFunctions) {
  ProgramBuilder b("fns");
  auto x = b.param("x", DType::f32, {"i"});
  auto y = b.param("y", DType::f32, {"i"});
  std::vector<std::pair<std::string, Value>> outs = {
      {"exp2", b.unary(Op::Exp2, x)}, {"log2", b.unary(Op::Log2, b.unary(Op::Abs, x))},
      {"rsqrt", b.unary(Op::Rsqrt, b.unary(Op::Abs, x))}, {"sig", b.sigmoid(x)},
      {"relu", b.unary(Op::Relu, x)}, {"floor", b.unary(Op::Floor, x)},
      {"ceil", b.unary(Op::Ceil, x)}, {"sin", b.unary(Op::Sin, x)},
      {"cos", b.unary(Op::Cos, x)}, {"tanh", b.tanh(x)},
      {"pow", b.binary(Op::Pow, b.unary(Op::Abs, x), y)},
      {"maximum", b.binary(Op::Maximum, x, y)}, {"minimum", b.binary(Op::Minimum, x, y)},
      {"div0", b.binary(Op::DivOrZero, x, y)}, {"clamp", b.clamp(x, y, y + 1)}};
  for (auto& [name, v] : outs) b.output(name, DType::f32, {"i"}, v);
  Program p = b.build();
  std::vector<double> xs = {-1.5, 0.25, 2.0, -0.75}, ys = {0.5, 0.0, 3.0, -2.0};
  auto out = evaluate_reference_f64(p, {{"x", make(DType::f32, {4}, xs)},
                                        {"y", make(DType::f32, {4}, ys)}});
  for (int i = 0; i < 4; ++i) {
    double a = xs[i], c = ys[i];
    EXPECT_EQ(out.at("exp2").get(i), f32(std::exp2(a)));
    EXPECT_EQ(out.at("log2").get(i), f32(std::log2(std::fabs(a))));
    EXPECT_EQ(out.at("rsqrt").get(i), f32(1 / std::sqrt(std::fabs(a))));
    EXPECT_EQ(out.at("sig").get(i), f32(1 / (1 + std::exp(-a))));
    EXPECT_EQ(out.at("relu").get(i), a > 0 ? a : 0);
    EXPECT_EQ(out.at("floor").get(i), std::floor(a));
    EXPECT_EQ(out.at("ceil").get(i), std::ceil(a));
    EXPECT_EQ(out.at("sin").get(i), f32(std::sin(a)));
    EXPECT_EQ(out.at("cos").get(i), f32(std::cos(a)));
    EXPECT_EQ(out.at("tanh").get(i), f32(std::tanh(a)));
    EXPECT_EQ(out.at("pow").get(i), f32(std::pow(std::fabs(a), c)));
    EXPECT_EQ(out.at("maximum").get(i), std::max(a, c));
    EXPECT_EQ(out.at("minimum").get(i), std::min(a, c));
    EXPECT_EQ(out.at("div0").get(i), c == 0 ? 0 : f32(a / c));
    EXPECT_EQ(out.at("clamp").get(i), std::clamp(a, c, c + 1));
  }
}

// relu(-0) is +0, in the reference, in constant folding and on the CPU backend (the backends'
// fg_relu): a quotient by it is +inf, not -inf.
TEST(RefEval, ReluOfNegativeZeroIsPositiveZero) {
  const Program p = parse_source(
      "program rz(x: f32[i]) {\n"
      "  out r: f32[i] = relu(x)\n"
      "  out q: f32[i] = 1.0 / relu(-relu(x))\n"
      "  out c: f32[i] = x * 0.0 + 1.0 / relu(-0.0)\n}\n", "rz.attn").at(0);
  const TensorMap in = {{"x", make(DType::f32, {3}, {-0.0, 0.0, 2.0})}};
  for (const TensorMap& out : {evaluate_reference_f64(p, in), evaluate_reference_f64(canonicalize(p), in),
                               run_cpu(p, in)}) {
    EXPECT_FALSE(std::signbit(out.at("r").get(0)));
    EXPECT_EQ(out.at("q").get(0), std::numeric_limits<double>::infinity());
    EXPECT_EQ(out.at("q").get(2), std::numeric_limits<double>::infinity());  // relu(-2) = +0
    EXPECT_EQ(out.at("c").get(1), std::numeric_limits<double>::infinity());
  }
}

TEST(RefEval, SeveralOutputsShareWork) {
  ProgramBuilder b("multi");
  auto x = b.param("x", DType::f32, {"m", "n"});
  auto v = b.param("v", DType::f32, {"n", "e"});
  auto pr = b.softmax(x, "n");
  b.output("o", DType::f32, {"m", "e"}, b.sum(pr * v, {"n"}));
  b.output("p", DType::f32, {"m", "n"}, pr);
  b.output("prod", DType::f32, {"m", "n", "e"}, pr * v);  // also an operand of the sum
  Program p = b.build();
  TensorMap in = random_inputs(p, {{"m", 3}, {"n", 5}, {"e", 2}}, 11);
  auto out = evaluate_reference_f64(p, in);
  for (int i = 0; i < 3; ++i)
    for (int e = 0; e < 2; ++e) {
      double acc = 0;
      for (int j = 0; j < 5; ++j) {
        double pij = out.at("p").at({i, j});
        EXPECT_EQ(out.at("prod").at({i, j, e}), f32(pij * in.at("v").at({j, e})));
        acc += f32(pij * in.at("v").at({j, e}));
      }
      EXPECT_EQ(out.at("o").at({i, e}), f32(acc));
    }
}

}  // namespace
}  // namespace flashgen
