// The .attn lexer (see lexer.h for the token rules). One pass over the bytes; columns count
// bytes, 1-based. Tests: tests/frontend/lexer_test.cpp, tests/error/lexer_errors_test.cpp.
#include "frontend/lexer.h"

#include <cfloat>
#include <charconv>
#include <cstdint>
#include <cstdio>

#include "flashgen/error.h"

namespace flashgen::frontend {

namespace {

bool is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident_char(char c) { return is_ident_start(c) || is_digit(c); }

// How an unexpected byte is shown: 'c' when printable ASCII, U+XXXX for UTF-8, else \xNN.
std::string show_char(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  char buf[32];
  if (c >= 0x20 && c < 0x7f) {
    std::snprintf(buf, sizeof buf, "'%c'", c);
    return buf;
  }
  int len = c >= 0xf0 && c < 0xf8 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
  if (c >= 0xf8) len = 0;
  if (len > 0 && i + len <= s.size()) {
    uint32_t cp = c & (0x7f >> len);
    bool ok = true;
    for (int k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (ok) {
      std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned>(cp));
      return buf;
    }
  }
  std::snprintf(buf, sizeof buf, "'\\x%02x'", c);
  return buf;
}

struct Keyword {
  const char* text;
  Tok kind;
};
constexpr Keyword kKeywords[] = {
    {"program", Tok::KwProgram}, {"out", Tok::KwOut}, {"inf", Tok::KwInf},
    {"true", Tok::KwTrue},       {"false", Tok::KwFalse}, {"and", Tok::KwAnd},
    {"or", Tok::KwOr},           {"not", Tok::KwNot},
};

constexpr uint64_t kMaxExactInt = uint64_t{1} << 53;

// The decimal exponent of the first nonzero digit of a decimal literal (DIGITS[.DIGITS][e[+-]N]):
// 0 for "1.5", -3 for "0.0012", 2 for "1e2". Used only to tell overflow from underflow when
// the value is outside the range of a double, so a saturated exponent is fine.
int64_t decimal_exponent(std::string_view text) {
  int64_t exp10 = 0;
  size_t e = text.find_first_of("eE");
  std::string_view mant = text.substr(0, e);
  if (e != std::string_view::npos) {
    size_t j = e + 1;
    bool neg = j < text.size() && text[j] == '-';
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) ++j;
    for (; j < text.size(); ++j) {
      if (exp10 < (int64_t{1} << 40)) exp10 = exp10 * 10 + (text[j] - '0');
    }
    if (neg) exp10 = -exp10;
  }
  size_t dot = mant.find('.');
  size_t int_digits = dot == std::string_view::npos ? mant.size() : dot;
  // Position of the first nonzero digit relative to the decimal point.
  int64_t pos = 0;
  bool found = false;
  for (size_t k = 0; k < mant.size(); ++k) {
    if (mant[k] == '.') continue;
    if (mant[k] != '0') {
      found = true;
      pos = k < int_digits ? static_cast<int64_t>(int_digits - k - 1)
                           : -static_cast<int64_t>(k - int_digits);
      break;
    }
  }
  return found ? exp10 + pos : INT64_MIN;
}

}  // namespace

const char* tok_spelling(Tok t) {
  switch (t) {
    case Tok::Ident: return "a name";
    case Tok::Int: return "an integer";
    case Tok::Float: return "a number";
    case Tok::KwProgram: return "'program'";
    case Tok::KwOut: return "'out'";
    case Tok::KwInf: return "'inf'";
    case Tok::KwTrue: return "'true'";
    case Tok::KwFalse: return "'false'";
    case Tok::KwAnd: return "'and'";
    case Tok::KwOr: return "'or'";
    case Tok::KwNot: return "'not'";
    case Tok::LParen: return "'('";
    case Tok::RParen: return "')'";
    case Tok::LBracket: return "'['";
    case Tok::RBracket: return "']'";
    case Tok::LBrace: return "'{'";
    case Tok::RBrace: return "'}'";
    case Tok::Comma: return "','";
    case Tok::Colon: return "':'";
    case Tok::Assign: return "'='";
    case Tok::Eq: return "'=='";
    case Tok::Ne: return "'!='";
    case Tok::Lt: return "'<'";
    case Tok::Le: return "'<='";
    case Tok::Gt: return "'>'";
    case Tok::Ge: return "'>='";
    case Tok::Plus: return "'+'";
    case Tok::Minus: return "'-'";
    case Tok::Star: return "'*'";
    case Tok::Slash: return "'/'";
    case Tok::Percent: return "'%'";
    case Tok::Newline: return "end of line";
    case Tok::End: return "end of file";
  }
  return "?";
}

std::string describe(const Token& t) {
  if (t.kind == Tok::Newline || t.kind == Tok::End) return tok_spelling(t.kind);
  return "'" + t.text + "'";
}

std::vector<Token> lex(std::string_view s) {
  std::vector<Token> out;
  int line = 1;
  size_t line_start = 0;
  int depth = 0;  // open ( and [ (never below 0, so stray closers cannot hide newlines)
  SourceLoc end_loc{1, 1};
  auto loc_at = [&](size_t i) { return SourceLoc{line, static_cast<int>(i - line_start) + 1}; };
  auto push = [&](Tok k, size_t begin, size_t end, double value = 0) {
    Token t;
    t.kind = k;
    t.text = std::string(s.substr(begin, end - begin));
    t.value = value;
    t.loc = loc_at(begin);
    end_loc = loc_at(end);
    out.push_back(std::move(t));
  };

  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (c == '\n') {
      if (depth == 0 && !out.empty() && out.back().kind != Tok::Newline) {
        Token t;
        t.kind = Tok::Newline;
        t.loc = loc_at(i);
        out.push_back(std::move(t));
      }
      ++i;
      ++line;
      line_start = i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    if (c == '#') {
      while (i < s.size() && s[i] != '\n') ++i;
      continue;
    }
    if (is_ident_start(c)) {
      size_t b = i;
      while (i < s.size() && is_ident_char(s[i])) ++i;
      std::string_view word = s.substr(b, i - b);
      Tok kind = Tok::Ident;
      for (const Keyword& k : kKeywords)
        if (word == k.text) kind = k.kind;
      push(kind, b, i);
      continue;
    }
    if (is_digit(c)) {
      size_t b = i;
      bool decimal = false;
      while (i < s.size() && is_digit(s[i])) ++i;
      if (i < s.size() && s[i] == '.') {
        decimal = true;
        ++i;
        while (i < s.size() && is_digit(s[i])) ++i;
      }
      if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
        if (j < s.size() && is_digit(s[j])) {
          decimal = true;
          i = j;
          while (i < s.size() && is_digit(s[i])) ++i;
        }
      }
      if (i < s.size() && is_ident_char(s[i])) {
        size_t e = i;
        while (e < s.size() && is_ident_char(s[e])) ++e;
        throw ProgramError(loc_at(b), "malformed number '" + std::string(s.substr(b, e - b)) + "'");
      }
      std::string_view text = s.substr(b, i - b);
      if (!decimal) {
        uint64_t v = 0;
        for (char d : text) {
          v = v * 10 + static_cast<uint64_t>(d - '0');
          if (v > kMaxExactInt)
            throw ProgramError(loc_at(b), "integer literal " + std::string(text) +
                                              " is too large (the limit is 2^53 = "
                                              "9007199254740992)");
        }
        push(Tok::Int, b, i, static_cast<double>(v));
      } else {
        double v = 0;
        // from_chars follows strtod's syntax ("3." included) and ignores the locale.
        auto r = std::from_chars(text.data(), text.data() + text.size(), v);
        const bool out_of_range = r.ec == std::errc::result_out_of_range;
        if (out_of_range ? decimal_exponent(text) >= 0 : (r.ec == std::errc() && v > FLT_MAX)) {
          throw ProgramError(loc_at(b), "decimal literal " + std::string(text) +
                                            " is too large for f32 (write inf for infinity)");
        }
        // A nonzero literal that rounds to 0 in f32 (below half the smallest subnormal, 2^-150)
        // would silently become 0. Subnormal f32 values are accepted.
        if (out_of_range || (r.ec == std::errc() && v != 0 && static_cast<float>(v) == 0.0f)) {
          throw ProgramError(loc_at(b), "decimal literal " + std::string(text) +
                                            " underflows f32 (the smallest positive f32 is "
                                            "~1.4e-45); write 0");
        }
        if (r.ec != std::errc() || r.ptr != text.data() + text.size())
          throw ProgramError(loc_at(b), "malformed number '" + std::string(text) + "'");
        push(Tok::Float, b, i, v);
      }
      continue;
    }
    auto two = [&](char next) { return i + 1 < s.size() && s[i + 1] == next; };
    size_t b = i;
    switch (c) {
      case '(': ++depth; push(Tok::LParen, b, ++i); continue;
      case '[': ++depth; push(Tok::LBracket, b, ++i); continue;
      case ')': depth = depth > 0 ? depth - 1 : 0; push(Tok::RParen, b, ++i); continue;
      case ']': depth = depth > 0 ? depth - 1 : 0; push(Tok::RBracket, b, ++i); continue;
      case '{': push(Tok::LBrace, b, ++i); continue;
      case '}': push(Tok::RBrace, b, ++i); continue;
      case ',': push(Tok::Comma, b, ++i); continue;
      case ':': push(Tok::Colon, b, ++i); continue;
      case '+': push(Tok::Plus, b, ++i); continue;
      case '-': push(Tok::Minus, b, ++i); continue;
      case '*': push(Tok::Star, b, ++i); continue;
      case '/': push(Tok::Slash, b, ++i); continue;
      case '%': push(Tok::Percent, b, ++i); continue;
      case '=':
        if (two('=')) { i += 2; push(Tok::Eq, b, i); } else { push(Tok::Assign, b, ++i); }
        continue;
      case '<':
        if (two('=')) { i += 2; push(Tok::Le, b, i); } else { push(Tok::Lt, b, ++i); }
        continue;
      case '>':
        if (two('=')) { i += 2; push(Tok::Ge, b, i); } else { push(Tok::Gt, b, ++i); }
        continue;
      case '!':
        if (two('=')) { i += 2; push(Tok::Ne, b, i); continue; }
        throw ProgramError(loc_at(b), "unexpected character '!' (logical negation is 'not')");
      case '&':
        throw ProgramError(loc_at(b), "unexpected character '&' (logical and is 'and')");
      case '|':
        throw ProgramError(loc_at(b), "unexpected character '|' (logical or is 'or')");
      case ';':
        throw ProgramError(loc_at(b), "unexpected character ';' (statements end at a newline)");
      default:
        throw ProgramError(loc_at(b), "unexpected character " + show_char(s, i));
    }
  }
  Token end;
  end.kind = Tok::End;
  end.loc = end_loc;
  out.push_back(std::move(end));
  return out;
}

}  // namespace flashgen::frontend
