// The .attn lexer: source text -> tokens with 1-based source locations.
//
// - `#` starts a comment to the end of the line.
// - A newline ends a statement, so it is a token (Tok::Newline) except inside `( )` or `[ ]`,
//   where the statement continues. Braces do not suppress newlines.
// - Numbers: `12` is an integer literal (Tok::Int, at most 2^53 so the IR's double holds it
//   exactly); `0.5`, `1e-9`, `3.` are decimal literals (Tok::Float, at most the largest finite
//   f32). A number directly followed by a letter, digit or `_` (`12ab`, `1e`) is malformed.
// - Keywords: program out inf true false and or not. Everything else that looks like a name is
//   Tok::Ident (dtype and function names are identifiers; the parser gives them meaning).
// Errors are ProgramError with the location of the offending character.
// Tests: tests/error/lexer_errors_test.cpp, tests/frontend/lexer_test.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "flashgen/ir.h"

namespace flashgen::frontend {

enum class Tok {
  Ident, Int, Float,
  KwProgram, KwOut, KwInf, KwTrue, KwFalse, KwAnd, KwOr, KwNot,
  LParen, RParen, LBracket, RBracket, LBrace, RBrace, Comma, Colon, Assign,
  Eq, Ne, Lt, Le, Gt, Ge, Plus, Minus, Star, Slash, Percent,
  Newline, End,
};

struct Token {
  Tok kind = Tok::End;
  std::string text;  // the spelling as written (empty for Newline/End)
  double value = 0;  // Int, Float
  SourceLoc loc;
};

// The spelling of a token kind for messages: "'('", "a name", "end of line", ...
const char* tok_spelling(Tok t);
// How a token is shown in a message: "'foo'", "'('", "end of line", "end of file".
std::string describe(const Token& t);

// Lexes the whole source; the last token is always Tok::End (located just after the last
// non-blank character, so a caret there points where something is missing).
std::vector<Token> lex(std::string_view source);

}  // namespace flashgen::frontend
