// Lexical errors: characters outside the language, malformed or out-of-range numbers,
// and caret placement after tabs and UTF-8.
// Each case asserts the exact diagnostic: FILE:LINE:COL, message, source line and caret.
#include "error/diagnose.h"

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

INSTANTIATE_TEST_SUITE_P(Diagnostics, LexerError, ::testing::ValuesIn(kCases), case_name);

}  // namespace
}  // namespace flashgen::testing
