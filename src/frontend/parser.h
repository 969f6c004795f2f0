// The .attn parser: tokens -> checked Programs, by recursive descent over docs/language.md.
//
// The parser resolves names (locals, parameters, dimensions, functions, outputs) and builds the
// IR only through flashgen::ProgramBuilder, passing each construct's SourceLoc, so every
// dimension and type rule is checked in one place (src/ir/builder.cpp). A builder error without
// a location gets the location of the construct being built. Errors are ProgramError; the
// caller (frontend.cpp) formats them. Name rules decided here (docs/language.md "Names"):
// a local may be rebound, but never takes the name of a parameter or a dimension; outputs
// cannot be read back; program, parameter and output names are unique.
// Tests: tests/frontend/parser_test.cpp, tests/error/*_test.cpp, tests/golden/.
#pragma once

#include <vector>

#include "flashgen/ir.h"
#include "frontend/lexer.h"

namespace flashgen::frontend {

// Nesting limit for parentheses, calls, gathers and unary chains (a deep input is an error,
// not a stack overflow).
inline constexpr int kMaxNesting = 200;

// Parses every program in the token stream (from lex()); throws ProgramError on the first
// error. A token stream with no program is an error.
std::vector<Program> parse_programs(const std::vector<Token>& tokens);

}  // namespace flashgen::frontend
