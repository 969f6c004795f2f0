// Diagnostics whose sources are built rather than spelled out: nesting limits (deeply nested
// parentheses, calls, gathers and unary chains are a diagnostic, never a stack overflow) and
// a NUL byte in the source. The exact text is asserted.
#include <algorithm>
#include <string>

#include "error/diagnose.h"
#include "flashgen/builder.h"
#include "flashgen/compile.h"
#include "frontend/parser.h"

namespace flashgen::testing {
namespace {

const std::string kHeader = "program p(q: f32[m, d], t: i32[m], c: bool[m]) {\n";

// An ASCII source line as a diagnostic shows it, with the caret at byte column `col`: whole up to
// 160 bytes, else the 160 bytes from 80 before the column, with "..." where it is cut.
std::string shown_with_caret(const std::string& line, int col) {
  if (line.size() <= 160) return line + "\n" + std::string(col - 1, ' ') + "^";
  const size_t start = col - 1 > 80 ? col - 1 - 80 : 0, end = std::min(line.size(), start + 160);
  const std::string head = start > 0 ? "..." : "";
  return head + line.substr(start, end - start) + (end < line.size() ? "..." : "") + "\n" +
         std::string(head.size() + (col - 1 - start), ' ') + "^";
}

// The diagnostic for body line `line` (line 2 of the file) with the caret at column `col`.
std::string expected(const std::string& line, int col) {
  return "t.attn:2:" + std::to_string(col) +
         ": error: expression nested too deeply (more than " +
         std::to_string(frontend::kMaxNesting) + " levels)\n" + shown_with_caret(line, col);
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


// A program deeper than kMaxValueDepth is a diagnostic at the operation that crosses the limit,
// never a stack overflow in a later stage: a long sum on one line, and chained statements.
std::string depth_message() {
  return "error: this value is the end of a chain of more than " +
         std::to_string(kMaxValueDepth) +
         " operations (the limit on a program's depth, which keeps compilation bounded)";
}

TEST(DepthError, LongSumOnOneLine) {
  const int terms = 160000;
  std::string line = "  out z: f32[m, d] = q";
  for (int i = 1; i < terms; ++i) line += " + q";
  // q is depth 1; the k-th '+' (1-based, at column 20 + 4k) makes depth k + 1.
  int col = 20 + 4 * kMaxValueDepth;
  EXPECT_EQ(diagnose(kHeader + line + "\n}\n"), "t.attn:2:" + std::to_string(col) + ": " +
                                                   depth_message() + "\n" +
                                                   shown_with_caret(line, col));
}

TEST(DepthError, ChainedStatements) {
  std::string src = kHeader + "  a = q\n";
  for (int i = 0; i < 200000; ++i) src += "  a = a * q\n";
  src += "  out z: f32[m, d] = a\n}\n";
  // Statement k (line k + 2) makes depth k + 1.
  EXPECT_EQ(diagnose(src), "t.attn:" + std::to_string(kMaxValueDepth + 2) + ":9: " +
                               depth_message() + "\n  a = a * q\n        ^");
}

// At the limit every stage runs: the passes, the plan and both emitters walk the whole chain.
TEST(DepthError, AtTheLimitEveryStageRuns) {
  std::string src = "program p(x: f32[m], k: f32[n, d], q: f32[m, d]) {\n  a = x\n";
  // Each statement adds two levels; leave room for the score and the softmax.
  const int stmts = (kMaxValueDepth - 12) / 2;
  for (int i = 0; i < stmts; ++i) src += "  a = a * 1.5 + x\n";
  src += "  s = where(n <= m, sum(q * k, d) + a, -inf)\n";
  src += "  out z: f32[m, d] = sum(softmax(s, n) * k, n)\n}\n";
  Program p = parse_source(src, "t.attn").at(0);
  CompileOptions opt;
  EXPECT_NO_THROW(explain(p, opt));
  for (const std::string& stage : pipeline_stage_names()) EXPECT_NO_THROW(dump_after(p, stage, opt));
  EXPECT_NE(emit_source(p, opt).find("1.5f"), std::string::npos);
}

}  // namespace
}  // namespace flashgen::testing
