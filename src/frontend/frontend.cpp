// The frontend's public entry points (include/flashgen/frontend.h): lex + parse + diagnostics.
//
// Every ProgramError raised while lexing, parsing or building (through ProgramBuilder) becomes
// one SourceError whose what() is the formatted diagnostic:
//   FILE:LINE:COL: error: MESSAGE
//   <the source line>
//   <caret under column COL>
// (three lines, no trailing newline). No partial result is returned.
// Tests: tests/error/*_test.cpp (exact texts), tests/frontend/frontend_test.cpp.
#include "flashgen/frontend.h"

#include <algorithm>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "frontend/lexer.h"
#include "frontend/parser.h"

namespace flashgen {

namespace {

// The text of 1-based line `n` of `source` (empty past the end), without its line break.
std::string source_line(const std::string& source, int n) {
  size_t begin = 0;
  for (int l = 1; l < n; ++l) {
    size_t nl = source.find('\n', begin);
    if (nl == std::string::npos) return "";
    begin = nl + 1;
  }
  size_t end = source.find('\n', begin);
  std::string line = source.substr(begin, end == std::string::npos ? end : end - begin);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

// The length of the valid UTF-8 sequence starting at s[i] (a byte >= 0x80), or 0 when it is
// not one (stray continuation byte, overlong form, surrogate, beyond U+10FFFF, cut short).
size_t utf8_length(const std::string& s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t len = c >= 0xc2 && c <= 0xdf   ? 2
               : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4
                                        : 0;
  if (len == 0 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
  if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0) || (c == 0xf0 && c1 < 0x90) ||
      (c == 0xf4 && c1 >= 0x90))
    return 0;
  return len;
}

}  // namespace

std::string format_diagnostic(const std::string& file, const std::string& source, SourceLoc loc,
                              const std::string& message) {
  if (loc.line <= 0) return file + ": error: " + message;
  std::string out = file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.col) +
                    ": error: " + message + "\n";
  std::string line = source_line(source, loc.line);
  // Control characters (a NUL would even cut what() short) and bytes that are not part of
  // valid UTF-8 are shown as '?'; tabs are kept.
  for (size_t i = 0; i < line.size();) {
    unsigned char c = static_cast<unsigned char>(line[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t') || c == 0x7f) line[i] = '?';
      ++i;
      continue;
    }
    size_t len = utf8_length(line, i);
    if (len == 0) {
      line[i++] = '?';
    } else {
      i += len;
    }
  }
  // A long line is shown as a window of kWindow bytes around the column, cut at character
  // boundaries and marked with "...", so a diagnostic stays short.
  constexpr size_t kWindow = 160;
  int col = loc.col;
  if (line.size() > kWindow) {
    auto boundary = [&](size_t i) {  // back to the first byte of the character at i
      while (i > 0 && i < line.size() && (static_cast<unsigned char>(line[i]) & 0xc0) == 0x80) --i;
      return i;
    };
    const size_t at = std::min(static_cast<size_t>(std::max(col - 1, 0)), line.size());
    size_t start = boundary(at > kWindow / 2 ? at - kWindow / 2 : 0);
    size_t end = std::min(line.size(), start + kWindow);
    if (end < line.size()) end = boundary(end);
    const std::string head = start > 0 ? "..." : "";
    col = static_cast<int>(at - start + head.size()) + 1;
    line = head + line.substr(start, end - start) + (end < line.size() ? "..." : "");
  }
  out += line + "\n";
  // The caret lines up under the column: tabs are copied, UTF-8 continuation bytes take no
  // column on screen.
  for (int i = 0; i + 1 < col; ++i) {
    unsigned char c = i < static_cast<int>(line.size()) ? line[i] : ' ';
    if (c == '\t')
      out += '\t';
    else if ((c & 0xc0) != 0x80)
      out += ' ';
  }
  out += '^';
  return out;
}

std::vector<Program> parse_source(const std::string& source, const std::string& filename) {
  try {
    return frontend::parse_programs(frontend::lex(source));
  } catch (const ProgramError& e) {
    throw SourceError(e.loc, e.what(), format_diagnostic(filename, source, e.loc, e.what()));
  }
}

// Reading a file is a call error (exit 2 in the CLI) whatever goes wrong: a missing file, a
// folder (which an ifstream opens and reads as empty on Linux), a file without read permission.
std::vector<Program> parse_file(const std::string& path) {
  auto fail = [&](const std::string& why) { throw CallError("cannot read " + path + ": " + why); };
  std::error_code ec;
  std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (st.type() == std::filesystem::file_type::not_found) fail("no such file");
  if (st.type() == std::filesystem::file_type::directory) fail("is a directory");
  if (ec) fail(ec.message());
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(errno ? std::strerror(errno) : "cannot open it");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail(errno ? std::strerror(errno) : "read error");
  return parse_source(ss.str(), path);
}

const Program& select_program(const std::vector<Program>& programs, const std::string& name) {
  std::string names;
  for (const Program& p : programs) names += (names.empty() ? "" : ", ") + p.name;
  if (name.empty()) {
    if (programs.size() == 1) return programs[0];
    if (programs.empty()) throw CallError("no program to choose from");
    throw CallError("the file holds several programs (" + names +
                    "); choose one with --program NAME");
  }
  for (const Program& p : programs)
    if (p.name == name) return p;
  throw CallError("no program named '" + name + "' (the file holds: " + names + ")");
}

}  // namespace flashgen
