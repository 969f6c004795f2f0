// Dimension and type errors raised by ProgramBuilder (src/ir/builder.cpp) while the parser
// builds, located at the construct being built.
// Each case asserts the exact diagnostic: FILE:LINE:COL, message, source line and caret.
#include "error/diagnose.h"

namespace flashgen::testing {
namespace {

const DiagnosticCase kCases[] = {
    {"ReductionOverMissingDimension",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = sum(q, n)\n"
     "}\n",
     "t.attn:2:22: error: sum over 'n', which the value (over [m, d]) does not have\n"
     "  out o: f32[m, d] = sum(q, n)\n"
     "                     ^"},
    {"SoftmaxOverMissingDimension",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = softmax(q, n)\n"
     "}\n",
     "t.attn:2:22: error: softmax over 'n', which the value (over [m, d]) does not have\n"
     "  out o: f32[m, d] = softmax(q, n)\n"
     "                     ^"},
    {"ReductionOfBool",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: i64[m] = sum(c, n)\n"
     "}\n",
     "t.attn:2:19: error: sum of a bool value; convert it first, e.g. i64(x)\n"
     "  out o: i64[m] = sum(c, n)\n"
     "                  ^"},
    {"OutputMissingDimension",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m] = q\n"
     "}\n",
     "t.attn:2:7: error: output 'o' is declared over [m] but its value is over [m, d]; missing"
     " [d]\n"
     "  out o: f32[m] = q\n"
     "      ^"},
    {"OutputExtraDimension",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d, n] = q\n"
     "}\n",
     "t.attn:2:7: error: output 'o' is declared over [m, d, n] but its value is over [m, d]; e"
     "xtra [n]\n"
     "  out o: f32[m, d, n] = q\n"
     "      ^"},
    {"OutputMissingAndExtraDimensions",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, n] = q\n"
     "}\n",
     "t.attn:2:7: error: output 'o' is declared over [m, n] but its value is over [m, d]; miss"
     "ing [d]; extra [n]\n"
     "  out o: f32[m, n] = q\n"
     "      ^"},
    {"IntegerDivision",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: i64[m, n] = n / m\n"
     "}\n",
     "t.attn:2:24: error: '/' on integers (i64 and i64); write f32(a) / b, or floor(f32(a) / b"
     ")\n"
     "  out o: i64[m, n] = n / m\n"
     "                       ^"},
    {"ModuloOnFloats",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q % 2\n"
     "}\n",
     "t.attn:2:24: error: '%' needs integers, got f32 and i64\n"
     "  out o: f32[m, d] = q % 2\n"
     "                       ^"},
    {"WhereConditionNotBool",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = where(q, q, 0.)\n"
     "}\n",
     "t.attn:2:22: error: where's condition must be bool, got f32\n"
     "  out o: f32[m, d] = where(q, q, 0.)\n"
     "                     ^"},
    {"WhereBranchesBoolAndNumber",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, n] = where(c, c, 0.)\n"
     "}\n",
     "t.attn:2:22: error: where's branches must both be numbers or both bools, got bool and f3"
     "2\n"
     "  out o: f32[m, n] = where(c, c, 0.)\n"
     "                     ^"},
    {"AndOnNumbers",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: bool[m, n] = c and m\n"
     "}\n",
     "t.attn:2:25: error: 'and' needs bools, got bool and i64\n"
     "  out o: bool[m, n] = c and m\n"
     "                        ^"},
    {"OrOnNumbers",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: bool[m, n] = n or c\n"
     "}\n",
     "t.attn:2:25: error: 'or' needs bools, got i64 and bool\n"
     "  out o: bool[m, n] = n or c\n"
     "                        ^"},
    {"NotOnNumber",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: bool[m] = not t\n"
     "}\n",
     "t.attn:2:20: error: 'not' needs a bool, got i32\n"
     "  out o: bool[m] = not t\n"
     "                   ^"},
    {"FloatToIntegerOutput",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: i32[m, d] = q\n"
     "}\n",
     "t.attn:2:7: error: output 'o' is i32 but its value is f32 (a float to integer conversion"
     ")\n"
     "  out o: i32[m, d] = q\n"
     "      ^"},
    {"BoolToFloatOutput",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, n] = c\n"
     "}\n",
     "t.attn:2:7: error: output 'o' is f32 but its value is bool\n"
     "  out o: f32[m, n] = c\n"
     "      ^"},
    {"NumberToBoolOutput",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: bool[m] = t\n"
     "}\n",
     "t.attn:2:7: error: output 'o' is bool but its value is i32\n"
     "  out o: bool[m] = t\n"
     "      ^"},
    {"OrderingBools",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: bool[m, n] = c < c\n"
     "}\n",
     "t.attn:2:25: error: '<' needs numbers, got bool and bool\n"
     "  out o: bool[m, n] = c < c\n"
     "                        ^"},
    {"EqualityBoolAndNumber",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: bool[m, n] = c == 1\n"
     "}\n",
     "t.attn:2:25: error: '==' compares two numbers or two bools, got bool and i64\n"
     "  out o: bool[m, n] = c == 1\n"
     "                        ^"},
    {"NegateBool",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: bool[m, n] = -c\n"
     "}\n",
     "t.attn:2:23: error: unary - needs a number, got bool\n"
     "  out o: bool[m, n] = -c\n"
     "                      ^"},
    {"ArithmeticOnBool",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: i64[m, n] = c + 1\n"
     "}\n",
     "t.attn:2:24: error: '+' needs numbers, got bool and i64\n"
     "  out o: i64[m, n] = c + 1\n"
     "                       ^"},
    {"AbsOfBool",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, n] = abs(c)\n"
     "}\n",
     "t.attn:2:22: error: abs needs a number, got bool\n"
     "  out o: f32[m, n] = abs(c)\n"
     "                     ^"},
    {"PowOfBool",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, n] = pow(c, 2)\n"
     "}\n",
     "t.attn:2:22: error: pow needs numbers, got bool and i64\n"
     "  out o: f32[m, n] = pow(c, 2)\n"
     "                     ^"},
    {"ClampOfBool",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, n] = clamp(c, 0, 1)\n"
     "}\n",
     "t.attn:2:22: error: clamp needs numbers, got bool, i64 and i64\n"
     "  out o: f32[m, n] = clamp(c, 0, 1)\n"
     "                     ^"},
    {"MaximumOfBools",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: bool[m, n] = maximum(c, c)\n"
     "}\n",
     "t.attn:2:23: error: 'maximum' needs numbers, got bool and bool\n"
     "  out o: bool[m, n] = maximum(c, c)\n"
     "                      ^"},
    {"GatherIndexCount",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: i32[m, n] = t[m, n]\n"
     "}\n",
     "t.attn:2:22: error: parameter 't' has rank 1 but is indexed with 2 indexes\n"
     "  out o: i32[m, n] = t[m, n]\n"
     "                     ^"},
    {"GatherWithoutIndices",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q[]\n"
     "}\n",
     "t.attn:2:22: error: parameter 'q' has rank 2 but is indexed with 0 indexes\n"
     "  out o: f32[m, d] = q[]\n"
     "                     ^"},
    {"GatherIndexNotInteger",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: i32[m, d] = t[q]\n"
     "}\n",
     "t.attn:2:22: error: index 1 of 't' (dimension 'm') must be an integer, got f32\n"
     "  out o: i32[m, d] = t[q]\n"
     "                     ^"},
    {"GatherBoolIndex",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: i32[m, n] = t[c]\n"
     "}\n",
     "t.attn:2:22: error: index 1 of 't' (dimension 'm') must be an integer, got bool\n"
     "  out o: i32[m, n] = t[c]\n"
     "                     ^"},
};

class TypesError : public ::testing::TestWithParam<DiagnosticCase> {};

TEST_P(TypesError, ExactDiagnostic) {
  EXPECT_EQ(diagnose(GetParam().source), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(Diagnostics, TypesError, ::testing::ValuesIn(kCases), case_name);

}  // namespace
}  // namespace flashgen::testing
