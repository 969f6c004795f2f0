// Name-resolution errors raised by the parser: unknown names and functions, argument
// counts, dimension arguments, clashes between parameters, dimensions, locals and outputs.
// Each case asserts the exact diagnostic: FILE:LINE:COL, message, source line and caret.
#include "error/diagnose.h"

namespace flashgen::testing {
namespace {

const DiagnosticCase kCases[] = {
    {"UnknownName",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = qq\n"
     "}\n",
     "t.attn:2:22: error: unknown name 'qq' (did you mean 'q'?)\n"
     "  out o: f32[m, d] = qq\n"
     "                     ^"},
    {"UnknownNameWithoutSuggestion",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q * scale\n"
     "}\n",
     "t.attn:2:26: error: unknown name 'scale'\n"
     "  out o: f32[m, d] = q * scale\n"
     "                         ^"},
    {"NameUsedBeforeBinding",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  s = s2 + q\n"
     "  s2 = q\n"
     "  out o: f32[m, d] = s\n"
     "}\n",
     "t.attn:2:7: error: unknown name 's2'\n"
     "  s = s2 + q\n"
     "      ^"},
    {"UnknownFunction",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = sigmod(q)\n"
     "}\n",
     "t.attn:2:22: error: unknown function 'sigmod' (did you mean 'sigmoid'?)\n"
     "  out o: f32[m, d] = sigmod(q)\n"
     "                     ^"},
    {"UnknownFunctionWithoutSuggestion",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = gelu_approx(q)\n"
     "}\n",
     "t.attn:2:22: error: unknown function 'gelu_approx'\n"
     "  out o: f32[m, d] = gelu_approx(q)\n"
     "                     ^"},
    {"NoConversionToBool",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: bool[m, d] = bool(q)\n"
     "}\n",
     "t.attn:2:23: error: unknown function 'bool' (conversions are f32, f16, bf16, i32, i64)\n"
     "  out o: bool[m, d] = bool(q)\n"
     "                      ^"},
    {"NoConversionToF8",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = f8e4m3(q)\n"
     "}\n",
     "t.attn:2:22: error: unknown function 'f8e4m3' (conversions are f32, f16, bf16, i32, i64)"
     "\n"
     "  out o: f32[m, d] = f8e4m3(q)\n"
     "                     ^"},
    {"CallingAValue",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q(m)\n"
     "}\n",
     "t.attn:2:22: error: unknown function 'q' ('q' is a value; to index a parameter use [ ])"
     "\n"
     "  out o: f32[m, d] = q(m)\n"
     "                     ^"},
    {"FunctionUsedAsValue",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q * exp\n"
     "}\n",
     "t.attn:2:26: error: 'exp' is a function; call it as exp(...)\n"
     "  out o: f32[m, d] = q * exp\n"
     "                         ^"},
    {"UnaryFunctionArgumentCount",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = exp(q, q)\n"
     "}\n",
     "t.attn:2:22: error: exp takes 1 argument, got 2\n"
     "  out o: f32[m, d] = exp(q, q)\n"
     "                     ^"},
    {"UnaryFunctionNoArguments",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = exp()\n"
     "}\n",
     "t.attn:2:22: error: exp takes 1 argument, got 0\n"
     "  out o: f32[m, d] = exp()\n"
     "                     ^"},
    {"BinaryFunctionArgumentCount",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = maximum(q)\n"
     "}\n",
     "t.attn:2:22: error: maximum takes 2 arguments, got 1\n"
     "  out o: f32[m, d] = maximum(q)\n"
     "                     ^"},
    {"WhereArgumentCount",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d, n] = where(c, q)\n"
     "}\n",
     "t.attn:2:25: error: where takes 3 arguments, got 2\n"
     "  out o: f32[m, d, n] = where(c, q)\n"
     "                        ^"},
    {"ClampArgumentCount",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = clamp(q, 0, 1, 2)\n"
     "}\n",
     "t.attn:2:22: error: clamp takes 3 arguments, got 4\n"
     "  out o: f32[m, d] = clamp(q, 0, 1, 2)\n"
     "                     ^"},
    {"ConversionArgumentCount",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = f32(q, q)\n"
     "}\n",
     "t.attn:2:22: error: f32 takes 1 argument, got 2\n"
     "  out o: f32[m, d] = f32(q, q)\n"
     "                     ^"},
    {"ReductionWithoutDimension",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[] = sum(q)\n"
     "}\n",
     "t.attn:2:18: error: sum takes a value and one or more dimension names, as in sum(x, d)\n"
     "  out o: f32[] = sum(q)\n"
     "                 ^"},
    {"ReductionWithoutArguments",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[] = sum()\n"
     "}\n",
     "t.attn:2:18: error: sum takes a value and one or more dimension names, as in sum(x, d)\n"
     "  out o: f32[] = sum()\n"
     "                 ^"},
    {"ReductionDimensionIsAnExpression",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m] = sum(q, 1)\n"
     "}\n",
     "t.attn:2:26: error: sum reduces over dimension names: argument 2 must be a dimension nam"
     "e\n"
     "  out o: f32[m] = sum(q, 1)\n"
     "                         ^"},
    {"ReductionDimensionIsAParameter",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m] = sum(q, k)\n"
     "}\n",
     "t.attn:2:26: error: 'k' is a parameter, not a dimension (sum reduces over dimension name"
     "s)\n"
     "  out o: f32[m] = sum(q, k)\n"
     "                         ^"},
    {"MaxOfTwoValues",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d, n] = max(q, k)\n"
     "}\n",
     "t.attn:2:32: error: 'k' is a parameter, not a dimension (max reduces over dimension name"
     "s; the element-wise max of two values is maximum(a, b))\n"
     "  out o: f32[m, d, n] = max(q, k)\n"
     "                               ^"},
    {"ReductionDimensionIsALocal",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  s = q\n"
     "  out o: f32[m] = mean(q, s)\n"
     "}\n",
     "t.attn:3:27: error: 's' is a local value, not a dimension (mean reduces over dimension n"
     "ames)\n"
     "  out o: f32[m] = mean(q, s)\n"
     "                          ^"},
    {"ReductionUnknownDimension",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m] = sum(q, dd)\n"
     "}\n",
     "t.attn:2:26: error: unknown dimension 'dd' (did you mean 'd'?)\n"
     "  out o: f32[m] = sum(q, dd)\n"
     "                         ^"},
    {"ReductionDimensionTwice",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[] = sum(q, d, m, d)\n"
     "}\n",
     "t.attn:2:31: error: dimension 'd' is listed twice in sum()\n"
     "  out o: f32[] = sum(q, d, m, d)\n"
     "                              ^"},
    {"SoftmaxTwoDimensions",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = softmax(q, m, d)\n"
     "}\n",
     "t.attn:2:22: error: softmax takes a value and one dimension name, as in softmax(x, n)\n"
     "  out o: f32[m, d] = softmax(q, m, d)\n"
     "                     ^"},
    {"LogsumexpNoDimension",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m] = logsumexp(q)\n"
     "}\n",
     "t.attn:2:19: error: logsumexp takes a value and one dimension name, as in logsumexp(x, n"
     ")\n"
     "  out o: f32[m] = logsumexp(q)\n"
     "                  ^"},
    {"SizeOfParameter",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: i64[] = size(q)\n"
     "}\n",
     "t.attn:2:23: error: 'q' is a parameter, not a dimension (size takes a dimension name)\n"
     "  out o: i64[] = size(q)\n"
     "                      ^"},
    {"SizeOfUnknownDimension",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: i64[] = size(z)\n"
     "}\n",
     "t.attn:2:23: error: unknown dimension 'z'\n"
     "  out o: i64[] = size(z)\n"
     "                      ^"},
    {"SizeOfExpression",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: i64[] = size(m + 1)\n"
     "}\n",
     "t.attn:2:23: error: size takes one dimension name, as in size(d)\n"
     "  out o: i64[] = size(m + 1)\n"
     "                      ^"},
    {"SizeTwoArguments",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: i64[] = size(m, d)\n"
     "}\n",
     "t.attn:2:18: error: size takes one dimension name, as in size(d)\n"
     "  out o: i64[] = size(m, d)\n"
     "                 ^"},
    {"SizeNoArgument",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: i64[] = size()\n"
     "}\n",
     "t.attn:2:18: error: size takes one dimension name, as in size(d)\n"
     "  out o: i64[] = size()\n"
     "                 ^"},
    {"ParameterNamedLikeEarlierDimension",
     "program p(q: f32[m, d], m: f32[]) {\n"
     "  out o: f32[m, d] = q\n"
     "}\n",
     "t.attn:1:25: error: 'm' is both a dimension (declared at 1:18) and a parameter\n"
     "program p(q: f32[m, d], m: f32[]) {\n"
     "                        ^"},
    {"DimensionNamedLikeEarlierParameter",
     "program p(s: f32[], q: f32[s, d]) {\n"
     "  out o: f32[s, d] = q\n"
     "}\n",
     "t.attn:1:28: error: 's' is both a parameter (declared at 1:11) and a dimension\n"
     "program p(s: f32[], q: f32[s, d]) {\n"
     "                           ^"},
    {"DimensionNamedLikeItsParameter",
     "program p(n: f32[n]) {\n"
     "  out o: f32[n] = n\n"
     "}\n",
     "t.attn:1:18: error: 'n' is both a parameter (declared at 1:11) and a dimension\n"
     "program p(n: f32[n]) {\n"
     "                 ^"},
    {"DuplicateParameter",
     "program p(q: f32[m], k: f32[n], q: f32[n]) {\n"
     "  out o: f32[m] = q\n"
     "}\n",
     "t.attn:1:33: error: duplicate parameter 'q' (first declared at 1:11)\n"
     "program p(q: f32[m], k: f32[n], q: f32[n]) {\n"
     "                                ^"},
    {"DimensionTwiceInParameter",
     "program p(pair: f32[m, m]) {\n"
     "  out o: f32[m] = sum(pair, m)\n"
     "}\n",
     "t.attn:1:24: error: dimension 'm' appears twice in parameter 'pair' (a name is one dimen"
     "sion; give the other axis its own name)\n"
     "program p(pair: f32[m, m]) {\n"
     "                       ^"},
    {"AssignToParameter",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  q = q * 2\n"
     "  out o: f32[m, d] = q\n"
     "}\n",
     "t.attn:2:3: error: cannot assign to 'q': it is a parameter (declared at 1:11); choose an"
     "other name\n"
     "  q = q * 2\n"
     "  ^"},
    {"AssignToDimension",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  m = 1\n"
     "  out o: f32[m, d] = q\n"
     "}\n",
     "t.attn:2:3: error: cannot assign to 'm': it is a dimension (declared at 1:18); choose an"
     "other name\n"
     "  m = 1\n"
     "  ^"},
    {"NoOutput",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  s = q * 2\n"
     "}\n",
     "t.attn:1:9: error: program 'p' has no output (add a statement 'out NAME: TYPE[dims] = ex"
     "pr')\n"
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "        ^"},
    {"EmptyBody",
     "program p(q: f32[m]) {\n"
     "}\n",
     "t.attn:1:9: error: program 'p' has no output (add a statement 'out NAME: TYPE[dims] = ex"
     "pr')\n"
     "program p(q: f32[m]) {\n"
     "        ^"},
    {"DuplicateOutput",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q\n"
     "  out o: f32[m, d] = q * 2\n"
     "}\n",
     "t.attn:3:7: error: duplicate output 'o' (first declared at 2:7)\n"
     "  out o: f32[m, d] = q * 2\n"
     "      ^"},
    {"OutputNamedLikeParameter",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out k: f32[m, d] = q\n"
     "}\n",
     "t.attn:2:7: error: output 'k' has the name of a parameter (declared at 1:25)\n"
     "  out k: f32[m, d] = q\n"
     "      ^"},
    {"OutputNamedLikeDimension",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out d: f32[m, d] = q\n"
     "}\n",
     "t.attn:2:7: error: output 'd' has the name of a dimension (declared at 1:21)\n"
     "  out d: f32[m, d] = q\n"
     "      ^"},
    {"OutputReadBack",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q\n"
     "  out o2: f32[m, d] = o * 2\n"
     "}\n",
     "t.attn:3:23: error: 'o' is an output and cannot be read; bind the expression to a name a"
     "nd use that name\n"
     "  out o2: f32[m, d] = o * 2\n"
     "                      ^"},
    {"OutputUnknownDimension",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, dd] = q\n"
     "}\n",
     "t.attn:2:17: error: unknown dimension 'dd' (did you mean 'd'?)\n"
     "  out o: f32[m, dd] = q\n"
     "                ^"},
    {"OutputDimensionIsAParameter",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, k] = q\n"
     "}\n",
     "t.attn:2:17: error: 'k' is a parameter, not a dimension (an output lists dimension names"
     ")\n"
     "  out o: f32[m, k] = q\n"
     "                ^"},
    {"OutputDimensionTwice",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d, m] = q\n"
     "}\n",
     "t.attn:2:20: error: dimension 'm' appears twice in output 'o' (a name is one dimension; "
     "give the other axis its own name)\n"
     "  out o: f32[m, d, m] = q\n"
     "                   ^"},
    {"DuplicateProgram",
     "program p(q: f32[m]) {\n"
     "  out o: f32[m] = q\n"
     "}\n"
     "program p(q: f32[m]) {\n"
     "  out o: f32[m] = q\n"
     "}\n",
     "t.attn:4:9: error: duplicate program 'p' (first defined at 1:9)\n"
     "program p(q: f32[m]) {\n"
     "        ^"},
    {"GatherOnLocal",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  s = t\n"
     "  out o: i32[m] = s[m]\n"
     "}\n",
     "t.attn:3:19: error: 's' is a local value; only a parameter can be indexed\n"
     "  out o: i32[m] = s[m]\n"
     "                  ^"},
    {"GatherOnDimension",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: i64[m] = m[m]\n"
     "}\n",
     "t.attn:2:19: error: 'm' is a dimension; only a parameter can be indexed\n"
     "  out o: i64[m] = m[m]\n"
     "                  ^"},
    {"GatherOnUnknownName",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: i32[m] = tt[m]\n"
     "}\n",
     "t.attn:2:19: error: unknown parameter 'tt' (did you mean 't'?)\n"
     "  out o: i32[m] = tt[m]\n"
     "                  ^"},
    {"GatherOnOutput",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: i32[m] = t\n"
     "  out o2: i32[m] = o[m]\n"
     "}\n",
     "t.attn:3:20: error: 'o' is an output; only a parameter can be indexed\n"
     "  out o2: i32[m] = o[m]\n"
     "                   ^"},
};

class NamesError : public ::testing::TestWithParam<DiagnosticCase> {};

TEST_P(NamesError, ExactDiagnostic) {
  EXPECT_EQ(diagnose(GetParam().source), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(Diagnostics, NamesError, ::testing::ValuesIn(kCases), case_name);

}  // namespace
}  // namespace flashgen::testing
