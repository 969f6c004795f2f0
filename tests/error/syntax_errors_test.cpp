// Syntax errors: program structure, parameters, statements, expressions, nesting limits.
// Each case asserts the exact diagnostic: FILE:LINE:COL, message, source line and caret.
#include "error/diagnose.h"

namespace flashgen::testing {
namespace {

const DiagnosticCase kCases[] = {
    {"TopLevelNotAProgram",
     "x = 1\n",
     "t.attn:1:1: error: expected 'program', found 'x'\n"
     "x = 1\n"
     "^"},
    {"EmptyFile",
     "# nothing here\n"
     "\n",
     "t.attn:1:1: error: no program in the file (a program starts with 'program NAME(PARAMS) {"
     "')\n"
     "# nothing here\n"
     "^"},
    {"MissingProgramName",
     "program (q: f32[m]) {\n"
     "  out o: f32[m] = q\n"
     "}\n",
     "t.attn:1:9: error: expected a name (the program's name) after 'program', found '('\n"
     "program (q: f32[m]) {\n"
     "        ^"},
    {"MissingParenAfterName",
     "program p q: f32[m]) {\n"
     "  out o: f32[m] = q\n"
     "}\n",
     "t.attn:1:11: error: expected '(' after the program name, found 'q'\n"
     "program p q: f32[m]) {\n"
     "          ^"},
    {"NoParameters",
     "program p() {\n"
     "  out o: i64[] = 1\n"
     "}\n",
     "t.attn:1:11: error: program 'p' has no parameters (a program reads at least one paramete"
     "r)\n"
     "program p() {\n"
     "          ^"},
    {"MissingColonInParameter",
     "program p(q f32[m]) {\n"
     "  out o: f32[m] = q\n"
     "}\n",
     "t.attn:1:13: error: expected ':' after parameter 'q', found 'f32'\n"
     "program p(q f32[m]) {\n"
     "            ^"},
    {"UnknownType",
     "program p(q: f64[m]) {\n"
     "  out o: f32[m] = q\n"
     "}\n",
     "t.attn:1:14: error: unknown type 'f64' (types are f32, f16, bf16, f8e4m3, f8e5m2, i32, i"
     "64, bool)\n"
     "program p(q: f64[m]) {\n"
     "             ^"},
    {"MissingDimensionList",
     "program p(q: f32) {\n"
     "  out o: f32[] = q\n"
     "}\n",
     "t.attn:1:17: error: expected '[' (the dimension list) after the type of parameter 'q', f"
     "ound ')'\n"
     "program p(q: f32) {\n"
     "                ^"},
    {"MissingDimensionName",
     "program p(q: f32[m, ]) {\n"
     "  out o: f32[m] = q\n"
     "}\n",
     "t.attn:1:21: error: expected a name (a dimension name) in the dimensions of parameter 'q"
     "', found ']'\n"
     "program p(q: f32[m, ]) {\n"
     "                    ^"},
    {"UnclosedDimensionList",
     "program p(q: f32[m, d) {\n"
     "  out o: f32[m] = q\n"
     "}\n",
     "t.attn:1:22: error: expected ']' after the dimensions of parameter 'q', found ')'\n"
     "program p(q: f32[m, d) {\n"
     "                     ^"},
    {"MissingCloseParen",
     "program p(q: f32[m] {\n"
     "  out o: f32[m] = q\n"
     "}\n",
     "t.attn:1:21: error: expected ')' after the parameters, found '{'\n"
     "program p(q: f32[m] {\n"
     "                    ^"},
    {"MissingOpenBrace",
     "program p(q: f32[m])\n"
     "  out o: f32[m] = q\n"
     "}\n",
     "t.attn:2:3: error: expected '{' to open the program's body, found 'out'\n"
     "  out o: f32[m] = q\n"
     "  ^"},
    {"UnclosedProgram",
     "program p(q: f32[m]) {\n"
     "  out o: f32[m] = q\n",
     "t.attn:2:20: error: unexpected end of file: program 'p' is not closed by '}'\n"
     "  out o: f32[m] = q\n"
     "                   ^"},
    {"StatementStartsWithOperator",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  + q\n"
     "  out o: f32[m, d] = q\n"
     "}\n",
     "t.attn:2:3: error: expected a statement ('NAME = expr' or 'out NAME: TYPE[dims] = expr')"
     ", found '+'\n"
     "  + q\n"
     "  ^"},
    {"ExpressionStatement",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  q + 1\n"
     "  out o: f32[m, d] = q\n"
     "}\n",
     "t.attn:2:5: error: expected '=' after 'q' (a statement is 'NAME = expr' or 'out NAME: TY"
     "PE[dims] = expr'), found '+'\n"
     "  q + 1\n"
     "    ^"},
    {"MissingExpression",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  s = * q\n"
     "  out o: f32[m, d] = s\n"
     "}\n",
     "t.attn:2:7: error: expected an expression, found '*'\n"
     "  s = * q\n"
     "      ^"},
    {"MissingExpressionAtEndOfLine",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  s = q *\n"
     "  out o: f32[m, d] = s\n"
     "}\n",
     "t.attn:2:10: error: expected an expression, found end of line\n"
     "  s = q *\n"
     "         ^"},
    {"TrailingTokens",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  s = q q\n"
     "  out o: f32[m, d] = s\n"
     "}\n",
     "t.attn:2:9: error: expected an operator or the end of the line, found 'q'\n"
     "  s = q q\n"
     "        ^"},
    {"ChainedComparison",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: bool[m, n] = m < n < m\n"
     "}\n",
     "t.attn:2:29: error: comparisons cannot be chained: parenthesize, or write 'a < b and b <"
     " c'\n"
     "  out o: bool[m, n] = m < n < m\n"
     "                            ^"},
    {"ChainedEquality",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: bool[m, n] = m == n == m\n"
     "}\n",
     "t.attn:2:30: error: comparisons cannot be chained: parenthesize, or write 'a == b and b "
     "== c'\n"
     "  out o: bool[m, n] = m == n == m\n"
     "                             ^"},
    {"UnclosedParenthesis",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  s = (q + 1\n"
     "  out o: f32[m, d] = s\n"
     "}\n",
     "t.attn:3:3: error: expected ')' to close the '(' at 2:7, found 'out'\n"
     "  out o: f32[m, d] = s\n"
     "  ^"},
    {"UnclosedCall",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  s = exp(q\n"
     "  out o: f32[m, d] = s\n"
     "}\n",
     "t.attn:3:3: error: expected ')' to close the '(' at 2:10, found 'out'\n"
     "  out o: f32[m, d] = s\n"
     "  ^"},
    {"UnclosedGather",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  s = t[m\n"
     "  out o: i32[m] = s\n"
     "}\n",
     "t.attn:3:3: error: expected ']' to close the '[' at 2:8, found 'out'\n"
     "  out o: i32[m] = s\n"
     "  ^"},
    {"NotAsOperand",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: bool[m, n] = c and c == not c\n"
     "}\n",
     "t.attn:2:34: error: 'not' binds looser than arithmetic and comparisons here; parenthesiz"
     "e: (not x)\n"
     "  out o: bool[m, n] = c and c == not c\n"
     "                                 ^"},
    {"IndexingAnExpression",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = (q)[m, d]\n"
     "}\n",
     "t.attn:2:25: error: only a parameter can be indexed (write p[i, j] with p a parameter)\n"
     "  out o: f32[m, d] = (q)[m, d]\n"
     "                        ^"},
    {"CallingAnExpression",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = (q)(m)\n"
     "}\n",
     "t.attn:2:25: error: only a function name can be called\n"
     "  out o: f32[m, d] = (q)(m)\n"
     "                        ^"},
    {"MissingOutputName",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out : f32[m, d] = q\n"
     "}\n",
     "t.attn:2:7: error: expected a name (the output's name) after 'out', found ':'\n"
     "  out : f32[m, d] = q\n"
     "      ^"},
    {"MissingOutputColon",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o f32[m, d] = q\n"
     "}\n",
     "t.attn:2:9: error: expected ':' after output 'o', found 'f32'\n"
     "  out o f32[m, d] = q\n"
     "        ^"},
    {"MissingOutputAssign",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] q\n"
     "}\n",
     "t.attn:2:20: error: expected '=' after the dimensions of output 'o', found 'q'\n"
     "  out o: f32[m, d] q\n"
     "                   ^"},
    {"TrailingCommaInCall",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = maximum(q, q,)\n"
     "}\n",
     "t.attn:2:35: error: expected an expression, found ')'\n"
     "  out o: f32[m, d] = maximum(q, q,)\n"
     "                                  ^"},
};

class SyntaxError : public ::testing::TestWithParam<DiagnosticCase> {};

TEST_P(SyntaxError, ExactDiagnostic) {
  EXPECT_EQ(diagnose(GetParam().source), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(Diagnostics, SyntaxError, ::testing::ValuesIn(kCases), case_name);

}  // namespace
}  // namespace flashgen::testing
