// The .attn lexer (src/frontend/lexer.h): token kinds, values and 1-based locations, newline
// handling inside brackets, comments, numbers and keywords.
#include <gtest/gtest.h>

#include "flashgen/error.h"
#include "frontend/lexer.h"

namespace flashgen::frontend {
namespace {

std::vector<Tok> kinds(const std::string& s) {
  std::vector<Tok> out;
  for (const Token& t : lex(s)) out.push_back(t.kind);
  return out;
}

TEST(Lexer, KindsAndLocations) {
  auto toks = lex("program p(q: f32[m]) {\n  out o: f32[m] = q  # c\n}\n");
  std::vector<Tok> want = {Tok::KwProgram, Tok::Ident,  Tok::LParen,   Tok::Ident,  Tok::Colon,
                           Tok::Ident,     Tok::LBracket, Tok::Ident,  Tok::RBracket, Tok::RParen,
                           Tok::LBrace,    Tok::Newline, Tok::KwOut,    Tok::Ident,  Tok::Colon,
                           Tok::Ident,     Tok::LBracket, Tok::Ident,  Tok::RBracket, Tok::Assign,
                           Tok::Ident,     Tok::Newline, Tok::RBrace,   Tok::Newline, Tok::End};
  ASSERT_EQ(toks.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(toks[i].kind, want[i]) << i;
  EXPECT_EQ(toks[1].text, "p");
  EXPECT_EQ(toks[1].loc.line, 1);
  EXPECT_EQ(toks[1].loc.col, 9);
  EXPECT_EQ(toks[12].loc.line, 2);  // out
  EXPECT_EQ(toks[12].loc.col, 3);
  EXPECT_EQ(toks[20].loc.col, 19);  // q
  EXPECT_EQ(toks[21].loc.col, 25);  // the newline after the comment
  EXPECT_EQ(toks[22].loc.line, 3);
  // End sits just after the last token, where a missing token would go.
  EXPECT_EQ(toks.back().loc.line, 3);
  EXPECT_EQ(toks.back().loc.col, 2);
}

TEST(Lexer, NewlinesInsideBracketsAreNotTokens) {
  EXPECT_EQ(kinds("f(a,\n b)\n"), (std::vector<Tok>{Tok::Ident, Tok::LParen, Tok::Ident,
                                                     Tok::Comma, Tok::Ident, Tok::RParen,
                                                     Tok::Newline, Tok::End}));
  EXPECT_EQ(kinds("x[\n1\n]\ny"), (std::vector<Tok>{Tok::Ident, Tok::LBracket, Tok::Int,
                                                     Tok::RBracket, Tok::Newline, Tok::Ident,
                                                     Tok::End}));
  // Braces do not continue a statement.
  EXPECT_EQ(kinds("{\n}"), (std::vector<Tok>{Tok::LBrace, Tok::Newline, Tok::RBrace, Tok::End}));
  // A stray closer does not make the depth negative (the next newline still counts).
  EXPECT_EQ(kinds(")\n("), (std::vector<Tok>{Tok::RParen, Tok::Newline, Tok::LParen, Tok::End}));
}

TEST(Lexer, BlankLinesAndCommentsCollapse) {
  EXPECT_EQ(kinds("\n\n# only a comment\n  \n\r\na # x\n\n\nb"),
            (std::vector<Tok>{Tok::Ident, Tok::Newline, Tok::Ident, Tok::End}));
  EXPECT_EQ(kinds(""), (std::vector<Tok>{Tok::End}));
  EXPECT_EQ(kinds("# x"), (std::vector<Tok>{Tok::End}));
}

TEST(Lexer, Numbers) {
  struct Case {
    const char* text;
    Tok kind;
    double value;
  };
  for (const Case& c : {Case{"12", Tok::Int, 12}, Case{"0", Tok::Int, 0},
                        Case{"007", Tok::Int, 7}, Case{"0.5", Tok::Float, 0.5},
                        Case{"1e-9", Tok::Float, 1e-9}, Case{"3.", Tok::Float, 3},
                        Case{"2E+3", Tok::Float, 2000}, Case{"1.5e2", Tok::Float, 150},
                        Case{"9007199254740992", Tok::Int, 9007199254740992.0},
                        Case{"3.4e38", Tok::Float, 3.4e38}}) {
    auto toks = lex(c.text);
    ASSERT_EQ(toks.size(), 2u) << c.text;
    EXPECT_EQ(toks[0].kind, c.kind) << c.text;
    EXPECT_EQ(toks[0].value, c.value) << c.text;
    EXPECT_EQ(toks[0].text, c.text);
  }
  // "1.2.3" is the number 1.2 followed by a stray '.'.
  EXPECT_THROW(lex("1.2.3"), ProgramError);
  // A sign is an operator, not part of the literal.
  EXPECT_EQ(kinds("-1"), (std::vector<Tok>{Tok::Minus, Tok::Int, Tok::End}));
  // "1e" followed by a name character is malformed; "1 e" is two tokens.
  EXPECT_THROW(lex("1e"), ProgramError);
  EXPECT_EQ(kinds("1 e"), (std::vector<Tok>{Tok::Int, Tok::Ident, Tok::End}));
}

TEST(Lexer, KeywordsAndNames) {
  EXPECT_EQ(kinds("program out inf true false and or not"),
            (std::vector<Tok>{Tok::KwProgram, Tok::KwOut, Tok::KwInf, Tok::KwTrue, Tok::KwFalse,
                              Tok::KwAnd, Tok::KwOr, Tok::KwNot, Tok::End}));
  // Prefixes and other spellings are names; dtype and function names are names too.
  for (const char* name : {"programs", "outp", "_x", "Inf", "f32", "softmax", "a_1", "notx"}) {
    auto toks = lex(name);
    EXPECT_EQ(toks[0].kind, Tok::Ident) << name;
    EXPECT_EQ(toks[0].text, name);
  }
}

TEST(Lexer, Operators) {
  EXPECT_EQ(kinds("== != < <= > >= = + - * / % , :"),
            (std::vector<Tok>{Tok::Eq, Tok::Ne, Tok::Lt, Tok::Le, Tok::Gt, Tok::Ge, Tok::Assign,
                              Tok::Plus, Tok::Minus, Tok::Star, Tok::Slash, Tok::Percent,
                              Tok::Comma, Tok::Colon, Tok::End}));
  EXPECT_EQ(kinds("a<=b"), (std::vector<Tok>{Tok::Ident, Tok::Le, Tok::Ident, Tok::End}));
  EXPECT_EQ(kinds("a==-b"),
            (std::vector<Tok>{Tok::Ident, Tok::Eq, Tok::Minus, Tok::Ident, Tok::End}));
}

TEST(Lexer, ErrorLocations) {
  try {
    lex("a\n  b @");
    FAIL() << "no error";
  } catch (const ProgramError& e) {
    EXPECT_EQ(e.loc.line, 2);
    EXPECT_EQ(e.loc.col, 5);
  }
}

}  // namespace
}  // namespace flashgen::frontend
