// Lexical errors: characters outside the language, malformed or out-of-range numbers,
// and caret placement after tabs and UTF-8.
// Each case asserts the exact diagnostic: FILE:LINE:COL, message, source line and caret.
#include "error/diagnose.h"
#include "frontend/lexer.h"

namespace flashgen::testing {
namespace {

const DiagnosticCase kCases[] = {
    {"UnexpectedCharacter",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q $ 2\n"
     "}\n",
     "t.attn:2:24: error: unexpected character '$'\n"
     "  out o: f32[m, d] = q $ 2\n"
     "                       ^"},
    {"BangIsNotNot",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: bool[m, n] = !c\n"
     "}\n",
     "t.attn:2:23: error: unexpected character '!' (logical negation is 'not')\n"
     "  out o: bool[m, n] = !c\n"
     "                      ^"},
    {"AmpersandIsNotAnd",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: bool[m, n] = c && c\n"
     "}\n",
     "t.attn:2:25: error: unexpected character '&' (logical and is 'and')\n"
     "  out o: bool[m, n] = c && c\n"
     "                        ^"},
    {"PipeIsNotOr",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: bool[m, n] = c || c\n"
     "}\n",
     "t.attn:2:25: error: unexpected character '|' (logical or is 'or')\n"
     "  out o: bool[m, n] = c || c\n"
     "                        ^"},
    {"SemicolonIsNotATerminator",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  s = q * 2;\n"
     "  out o: f32[m, d] = s\n"
     "}\n",
     "t.attn:2:12: error: unexpected character ';' (statements end at a newline)\n"
     "  s = q * 2;\n"
     "           ^"},
    {"NonAsciiCharacter",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q * \xce" "\xb1" "\n"
     "}\n",
     "t.attn:2:26: error: unexpected character U+03B1\n"
     "  out o: f32[m, d] = q * \xce" "\xb1" "\n"
     "                         ^"},
    {"ControlCharacter",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q \x01" "\n"
     "}\n",
     "t.attn:2:24: error: unexpected character '\\x01'\n"
     "  out o: f32[m, d] = q ?\n"
     "                       ^"},
    {"DeleteCharacter",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q \x7f" "\n"
     "}\n",
     "t.attn:2:24: error: unexpected character '\\x7f'\n"
     "  out o: f32[m, d] = q ?\n"
     "                       ^"},
    {"MalformedNumberSuffix",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q * 12ab\n"
     "}\n",
     "t.attn:2:26: error: malformed number '12ab'\n"
     "  out o: f32[m, d] = q * 12ab\n"
     "                         ^"},
    {"MalformedNumberExponent",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q * 1e\n"
     "}\n",
     "t.attn:2:26: error: malformed number '1e'\n"
     "  out o: f32[m, d] = q * 1e\n"
     "                         ^"},
    {"IntegerLiteralTooLarge",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q * 9007199254740993\n"
     "}\n",
     "t.attn:2:26: error: integer literal 9007199254740993 is too large (the limit is 2^53 = 9"
     "007199254740992)\n"
     "  out o: f32[m, d] = q * 9007199254740993\n"
     "                         ^"},
    {"DecimalLiteralTooLarge",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q * 1e39\n"
     "}\n",
     "t.attn:2:26: error: decimal literal 1e39 is too large for f32 (write inf for infinity)\n"
     "  out o: f32[m, d] = q * 1e39\n"
     "                         ^"},
    {"DecimalLiteralTooLargeForF64",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q * 12.5e400\n"
     "}\n",
     "t.attn:2:26: error: decimal literal 12.5e400 is too large for f32 (write inf for infinity)\n"
     "  out o: f32[m, d] = q * 12.5e400\n"
     "                         ^"},
    // Below the range of a double: from_chars reports it out of range, like an overflow.
    {"DecimalLiteralUnderflowsF64",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q * 1e-400\n"
     "}\n",
     "t.attn:2:26: error: decimal literal 1e-400 underflows f32 (the smallest positive f32 is "
     "~1.4e-45); write 0\n"
     "  out o: f32[m, d] = q * 1e-400\n"
     "                         ^"},
    // A tiny mantissa with a huge positive exponent is still tiny.
    {"DecimalLiteralUnderflowsDespiteExponent",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q * 0.00000000001e-320\n"
     "}\n",
     "t.attn:2:26: error: decimal literal 0.00000000001e-320 underflows f32 (the smallest "
     "positive f32 is ~1.4e-45); write 0\n"
     "  out o: f32[m, d] = q * 0.00000000001e-320\n"
     "                         ^"},
    // Representable as a double, but rounds to 0 in f32 (below 2^-150).
    {"DecimalLiteralUnderflowsF32",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "  out o: f32[m, d] = q * 1e-50\n"
     "}\n",
     "t.attn:2:26: error: decimal literal 1e-50 underflows f32 (the smallest positive f32 is "
     "~1.4e-45); write 0\n"
     "  out o: f32[m, d] = q * 1e-50\n"
     "                         ^"},
    {"CaretAfterTabs",
     "program p(q: f32[m, d], k: f32[n, d], t: i32[m], c: bool[m, n]) {\n"
     "\tout o: f32[m, d] = q\t$\n"
     "}\n",
     "t.attn:2:23: error: unexpected character '$'\n"
     "\tout o: f32[m, d] = q\t$\n"
     "\t                    \t^"},
    {"CaretAfterUtf8Comment",
     "# caf\xc3" "\xa9" "\n"
     "program p(q: f32[m]) { $\n",
     "t.attn:2:24: error: unexpected character '$'\n"
     "program p(q: f32[m]) { $\n"
     "                       ^"},
};

class LexerError : public ::testing::TestWithParam<DiagnosticCase> {};

TEST_P(LexerError, ExactDiagnostic) {
  EXPECT_EQ(diagnose(GetParam().source), GetParam().expected);
}

// Decimal literals at the edges of f32's range that are accepted: zero with any exponent, f32
// subnormals (down to the smallest, ~1.4e-45, and what rounds up to it), and the largest
// finite f32. The literal keeps the value written.
TEST(LexerNumbers, F32RangeEdgesAreAccepted) {
  const struct {
    const char* text;
    double value;
  } cases[] = {
      {"0.0", 0.0},          {"0e-999", 0.0},          {"1e-40", 1e-40},
      {"1.4e-45", 1.4e-45},  {"8e-46", 8e-46},         {"1.1754943e-38", 1.1754943e-38},
      {"3.4028234e38", 3.4028234e38},
  };
  for (const auto& c : cases) {
    std::string src = std::string("program p(q: f32[m]) {\n  out o: f32[m] = q * ") + c.text +
                      "\n}\n";
    EXPECT_EQ(diagnose(src), "<no error>") << c.text;
    std::vector<frontend::Token> toks = frontend::lex(c.text);
    ASSERT_EQ(toks.size(), 2u) << c.text;
    EXPECT_EQ(toks[0].kind, frontend::Tok::Float) << c.text;
    EXPECT_EQ(toks[0].value, c.value) << c.text;
  }
}

INSTANTIATE_TEST_SUITE_P(Diagnostics, LexerError, ::testing::ValuesIn(kCases), case_name);

}  // namespace
}  // namespace flashgen::testing
