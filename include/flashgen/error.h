// Errors raised by flashgen.
//
// - ProgramError: the program is invalid (a parse, name, dimension or type error). It carries
//   the SourceLoc of the offending construct; frontend/diagnostics formats it as
//   `FILE:LINE:COL: error: MESSAGE`, the source line and a caret.
// - CallError: the program is valid but a call is not (missing input, wrong dtype, rank or
//   extent, dimensions that disagree, out-of-range gathers). The message names the parameter
//   and the dimension. The CLI exits with status 2 on these.
// - BackendError: a backend could not compile or run (host compiler, NVRTC, no GPU, ...).
#pragma once

#include <stdexcept>
#include <string>

#include "flashgen/ir.h"

namespace flashgen {

struct ProgramError : std::runtime_error {
  SourceLoc loc;
  ProgramError(SourceLoc l, const std::string& msg) : std::runtime_error(msg), loc(l) {}
};

struct CallError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct BackendError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace flashgen
