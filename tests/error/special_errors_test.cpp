// Diagnostics whose sources are built rather than spelled out: nesting limits (deeply nested
// parentheses, calls, gathers and unary chains are a diagnostic, never a stack overflow) and
// a NUL byte in the source. The exact text is asserted.
#include <string>

#include "error/diagnose.h"
#include "frontend/parser.h"

namespace flashgen::testing {
namespace {

const std::string kHeader = "program p(q: f32[m, d], t: i32[m], c: bool[m]) {\n";

// The diagnostic for body line `line` (line 2 of the file) with the caret at column `col`.
std::string expected(const std::string& line, int col) {
  return "t.attn:2:" + std::to_string(col) +
         ": error: expression nested too deeply (more than " +
         std::to_string(frontend::kMaxNesting) + " levels)\n" + line + "\n" +
         std::string(col - 1, ' ') + "^";
}

TEST(NestingError, Parentheses) {
  const int n = 300;
  std::string prefix = "  out o: f32[m, d] = ";
  std::string line = prefix + std::string(n, '(') + "q" + std::string(n, ')');
  // The statement's expression is level 1, so the (kMaxNesting)th '(' opens level
  // kMaxNesting + 1, and the error is at the token after it.
  int col = static_cast<int>(prefix.size()) + frontend::kMaxNesting + 1;
  EXPECT_EQ(diagnose(kHeader + line + "\n}\n"), expected(line, col));
}

TEST(NestingError, UnaryMinusChain) {
  std::string prefix = "  out o: f32[m, d] = ";
  std::string line = prefix + std::string(300, '-') + "q";
  int col = static_cast<int>(prefix.size()) + frontend::kMaxNesting;
  EXPECT_EQ(diagnose(kHeader + line + "\n}\n"), expected(line, col));
}

TEST(NestingError, NotChain) {
  std::string prefix = "  out o: bool[m] = ";
  std::string line = prefix;
  for (int i = 0; i < 300; ++i) line += "not ";
  line += "c";
  int col = static_cast<int>(prefix.size()) + 4 * (frontend::kMaxNesting - 1) + 1;
  EXPECT_EQ(diagnose(kHeader + line + "\n}\n"), expected(line, col));
}

TEST(NestingError, CallsAndGathers) {
  std::string prefix = "  out o: f32[m] = ";
  std::string line = prefix;
  for (int i = 0; i < 150; ++i) line += "i64(t[";
  line += "m";
  for (int i = 0; i < 150; ++i) line += "])";
  // Each "i64(t[" opens two levels (the call's argument and the gather's index); the
  // statement's expression is level 1, so group k starts level 2k + 1.
  int col = static_cast<int>(prefix.size()) + 6 * (frontend::kMaxNesting / 2) + 1;
  EXPECT_EQ(diagnose(kHeader + line + "\n}\n"), expected(line, col));
}

TEST(NestingError, JustBelowTheLimitParses) {
  int n = frontend::kMaxNesting - 1;
  std::string line = "  out o: f32[m, d] = " + std::string(n, '(') + "q" + std::string(n, ')');
  EXPECT_EQ(diagnose(kHeader + line + "\n}\n"), "<no error>");
  std::string gathers = "  out o: i32[m] = ";
  for (int i = 0; i < (frontend::kMaxNesting - 1) / 2; ++i) gathers += "t[i64(";
  gathers += "m";
  for (int i = 0; i < (frontend::kMaxNesting - 1) / 2; ++i) gathers += ")]";
  EXPECT_EQ(diagnose(kHeader + gathers + "\n}\n"), "<no error>");
}

TEST(SpecialError, NulCharacter) {
  std::string src = kHeader + "  out o: f32[m, d] = q " + std::string(1, '\0') + " + 1\n}\n";
  EXPECT_EQ(diagnose(src),
            "t.attn:2:24: error: unexpected character '\\x00'\n"
            "  out o: f32[m, d] = q ? + 1\n"
            "                       ^");
}

}  // namespace
}  // namespace flashgen::testing
