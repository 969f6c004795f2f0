// The .attn frontend: source text -> checked Programs.
#pragma once

#include <string>
#include <vector>

#include "flashgen/error.h"
#include "flashgen/ir.h"

namespace flashgen {

// A diagnostic formatted as docs/language.md says:
//   FILE:LINE:COL: error: MESSAGE
//   <the source line>
//   <spaces>^
std::string format_diagnostic(const std::string& file, const std::string& source, SourceLoc loc,
                              const std::string& message);

// Thrown by parse_* with the diagnostic already formatted in what().
struct SourceError : std::runtime_error {
  SourceLoc loc;
  std::string message;  // unformatted
  SourceError(SourceLoc l, std::string msg, const std::string& formatted)
      : std::runtime_error(formatted), loc(l), message(std::move(msg)) {}
};

// Parses and checks every program in `source`. Throws SourceError on the first error.
std::vector<Program> parse_source(const std::string& source, const std::string& filename);
// Reads and parses a file (a missing file is a CallError).
std::vector<Program> parse_file(const std::string& path);
// Picks the program named `name`, or the only one when `name` is empty (else an error listing
// the names).
const Program& select_program(const std::vector<Program>& programs, const std::string& name);

}  // namespace flashgen
