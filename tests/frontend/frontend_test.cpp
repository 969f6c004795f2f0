// The frontend's public API (include/flashgen/frontend.h): format_diagnostic, SourceError's
// fields, parse_file and select_program.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "flashgen/frontend.h"
#include "support/support.h"

namespace flashgen {
namespace {

TEST(FormatDiagnostic, ThreeLines) {
  EXPECT_EQ(format_diagnostic("a.attn", "x\n  y = 1\nz\n", {2, 3}, "bad"),
            "a.attn:2:3: error: bad\n  y = 1\n  ^");
  EXPECT_EQ(format_diagnostic("a.attn", "abc", {1, 1}, "m"), "a.attn:1:1: error: m\nabc\n^");
}

TEST(FormatDiagnostic, EdgeCases) {
  // No location (e.g. a program built in C++): no source line.
  EXPECT_EQ(format_diagnostic("a.attn", "x", {}, "bad"), "a.attn: error: bad");
  // Carriage returns are not shown; tabs are kept in the caret line so it lines up.
  EXPECT_EQ(format_diagnostic("f", "a\r\n\tb\tc\r\n", {2, 4}, "m"),
            "f:2:4: error: m\n\tb\tc\n\t \t^");
  // A column past the end of the line (end of line, end of file).
  EXPECT_EQ(format_diagnostic("f", "ab\n", {1, 3}, "m"), "f:1:3: error: m\nab\n  ^");
  // A line past the end of the source shows an empty line.
  EXPECT_EQ(format_diagnostic("f", "ab\n", {5, 2}, "m"), "f:5:2: error: m\n\n ^");
  // Control characters are shown as '?' (a NUL would cut what() short); DEL too.
  EXPECT_EQ(format_diagnostic("f", std::string("a\0b\x01\x7f", 5), {1, 2}, "m"),
            "f:1:2: error: m\na?b??\n ^");
  // Bytes that are not valid UTF-8 (a stray continuation byte, a truncated sequence, 0xff)
  // are shown as '?' and take one column each.
  EXPECT_EQ(format_diagnostic("f", "a\x80" "b\xe2\x82" "c\xff" "d!", {1, 8}, "m"),
            "f:1:8: error: m\na?b??c?d!\n       ^");
  // A multi-byte UTF-8 character takes one column on screen.
  EXPECT_EQ(format_diagnostic("f", "\xc3\xa9x!", {1, 4}, "m"), "f:1:4: error: m\n\xc3\xa9x!\n  ^");
}

TEST(FormatDiagnostic, ALongLineIsShownAsAWindowAroundTheColumn) {
  std::string line;
  for (int i = 0; i < 20000; ++i) line += "x" + std::to_string(i) + " + ";
  const int col = 50001;  // 1-based byte column
  const std::string d = format_diagnostic("f", line + "\n", {1, col}, "m");
  EXPECT_LT(d.size(), 400u) << d.size();
  const size_t a = d.find('\n'), b = d.find('\n', a + 1);
  ASSERT_NE(b, std::string::npos);
  const std::string shown = d.substr(a + 1, b - a - 1), caret = d.substr(b + 1);
  EXPECT_EQ(shown.substr(0, 3), "...");
  EXPECT_EQ(shown.substr(shown.size() - 3), "...");
  ASSERT_EQ(caret.back(), '^');
  EXPECT_EQ(shown[caret.size() - 1], line[col - 1]);  // the caret is under the column's byte
  EXPECT_NE(shown.find(line.substr(col - 11, 20)), std::string::npos);
  // A column far past the end of a long line: the window ends at the line's end and the caret
  // stands just after it.
  const std::string past = format_diagnostic("f", std::string(200, 'a'), {1, 400}, "m");
  EXPECT_EQ(past, "f:1:400: error: m\n..." + std::string(80, 'a') + "\n" +
                      std::string(83, ' ') + "^");
  // Near the start: no leading "...", the caret where it was.
  const std::string near = format_diagnostic("f", line, {1, 5}, "m");
  EXPECT_EQ(near.substr(near.find('\n') + 1, 5), line.substr(0, 5));
  EXPECT_EQ(near.substr(near.rfind('\n') + 1), "    ^");
}

TEST(ParseSource, SourceErrorCarriesLocationAndMessage) {
  try {
    parse_source("program p(q: f32[m]) {\n  out o: f32[m] = q / 0 +\n}\n", "x.attn");
    FAIL() << "no error";
  } catch (const SourceError& e) {
    EXPECT_EQ(e.loc.line, 2);
    EXPECT_EQ(e.loc.col, 26);
    EXPECT_EQ(e.message, "expected an expression, found end of line");
    EXPECT_EQ(std::string(e.what()),
              "x.attn:2:26: error: expected an expression, found end of line\n"
              "  out o: f32[m] = q / 0 +\n"
              "                         ^");
  }
}

TEST(ParseSource, AnErrorInALaterProgramFailsTheWholeFile) {
  EXPECT_THROW(parse_source("program a(q: f32[m]) {\n  out o: f32[m] = q\n}\n"
                            "program b(q: f32[m]) {\n  out o: f32[m] = q * w\n}\n",
                            "x.attn"),
               SourceError);
}

TEST(ParseFile, ReadsAndNamesTheFile) {
  testing::TempDir dir;
  std::string path = dir.file("p.attn");
  {
    std::ofstream(path) << "program p(q: f32[m]) {\n  out o: f32[m] = exp(q)\n}\n";
  }
  auto ps = parse_file(path);
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_EQ(ps[0].name, "p");
  std::string bad = dir.file("bad.attn");
  {
    std::ofstream(bad) << "program p(q: f32[m]) {\n  out o: f32[m] = exp(q, q)\n}\n";
  }
  try {
    parse_file(bad);
    FAIL() << "no error";
  } catch (const SourceError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(bad + ":2:19: error: exp takes 1 argument, got 2\n", 0),
              0u)
        << e.what();
  }
  EXPECT_THROW(parse_file(dir.file("missing.attn")), CallError);
}

// What cannot be read is a CallError naming the path and the reason, never a diagnostic about
// an empty program.
TEST(ParseFile, UnreadablePathsAreCallErrors) {
  testing::TempDir dir;
  auto message = [](const std::string& path) -> std::string {
    try {
      parse_file(path);
    } catch (const CallError& e) {
      return e.what();
    } catch (const std::exception& e) {
      return std::string("not a CallError: ") + e.what();
    }
    return "<no error>";
  };
  EXPECT_EQ(message(dir.path()), "cannot read " + dir.path() + ": is a directory");
  EXPECT_EQ(message(dir.file("missing.attn")),
            "cannot read " + dir.file("missing.attn") + ": no such file");
  std::string locked = dir.file("locked.attn");
  std::ofstream(locked) << "program p(q: f32[m]) {\n  out o: f32[m] = q\n}\n";
  std::filesystem::permissions(locked, std::filesystem::perms::none);
  if (::access(locked.c_str(), R_OK) == 0)
    GTEST_SKIP() << "file permissions do not apply to this user (root)";
  EXPECT_EQ(message(locked), "cannot read " + locked + ": Permission denied");
}

TEST(SelectProgram, ByNameOrTheOnlyOne) {
  auto two = parse_source("program a(q: f32[m]) {\n  out o: f32[m] = q\n}\n"
                          "program b(q: f32[m]) {\n  out o: f32[m] = -q\n}\n",
                          "x.attn");
  EXPECT_EQ(select_program(two, "b").name, "b");
  EXPECT_EQ(select_program(two, "a").name, "a");
  try {
    select_program(two, "");
    FAIL() << "no error";
  } catch (const CallError& e) {
    EXPECT_EQ(std::string(e.what()),
              "the file holds several programs (a, b); choose one with --program NAME");
  }
  try {
    select_program(two, "c");
    FAIL() << "no error";
  } catch (const CallError& e) {
    EXPECT_EQ(std::string(e.what()), "no program named 'c' (the file holds: a, b)");
  }
  std::vector<Program> one(two.begin(), two.begin() + 1);
  EXPECT_EQ(select_program(one, "").name, "a");
  EXPECT_EQ(select_program(one, "a").name, "a");
  EXPECT_THROW(select_program(one, "b"), CallError);
}

}  // namespace
}  // namespace flashgen
