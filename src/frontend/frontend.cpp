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

}  // namespace

std::string format_diagnostic(const std::string& file, const std::string& source, SourceLoc loc,
                              const std::string& message) {
  if (loc.line <= 0) return file + ": error: " + message;
  std::string out = file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.col) +
                    ": error: " + message + "\n";
  std::string line = source_line(source, loc.line);
  // Control characters (a NUL would even cut what() short) are shown as '?'; tabs are kept.
  for (char& c : line)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) c = '?';
  out += line + "\n";
  // The caret lines up under the column: tabs are copied, UTF-8 continuation bytes take no
  // column on screen.
  for (int i = 0; i + 1 < loc.col; ++i) {
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

std::vector<Program> parse_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CallError("cannot read '" + path + "': no such file or not readable");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw CallError("cannot read '" + path + "'");
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
