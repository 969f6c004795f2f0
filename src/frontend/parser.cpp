// The .attn parser (see parser.h). Grammar, lowest precedence first:
//   or_expr  := and_expr ('or' and_expr)*
//   and_expr := not_expr ('and' not_expr)*
//   not_expr := 'not' not_expr | cmp_expr
//   cmp_expr := add_expr [('=='|'!='|'<'|'<='|'>'|'>=') add_expr]      (no chaining)
//   add_expr := mul_expr (('+'|'-') mul_expr)*
//   mul_expr := unary (('*'|'/'|'%') unary)*
//   unary    := '-' unary | primary
//   primary  := INT | DECIMAL | 'inf' | 'true' | 'false' | '(' or_expr ')'
//             | NAME '(' args ')' | NAME '[' [or_expr {',' or_expr}] ']' | NAME
// Tests: tests/frontend/parser_test.cpp (precedence, rebinding, programs), tests/error/.
#include "frontend/parser.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "flashgen/builder.h"
#include "flashgen/error.h"

namespace flashgen::frontend {

namespace {

std::string at(SourceLoc l) { return std::to_string(l.line) + ":" + std::to_string(l.col); }

// The dtypes a program may declare (f64 is internal to the reference evaluator).
std::optional<DType> source_dtype(const std::string& s) {
  static const std::pair<const char*, DType> kTypes[] = {
      {"f32", DType::f32},       {"f16", DType::f16},       {"bf16", DType::bf16},
      {"f8e4m3", DType::f8e4m3}, {"f8e5m2", DType::f8e5m2}, {"i32", DType::i32},
      {"i64", DType::i64},       {"bool", DType::boolean},
  };
  for (const auto& [name, t] : kTypes)
    if (s == name) return t;
  return std::nullopt;
}

enum class Fn { Unary, Binary, Where, Clamp, Cast, Size, Reduce, ReduceOne };
struct FnInfo {
  Fn kind;
  Op op = Op::Const;
  DType to = DType::f32;  // Cast
};

// The built-in functions by name: the element-wise functions, reductions and sugar of the op
// table (their `source` spelling), the casts and size.
const std::map<std::string, FnInfo>& functions() {
  static const std::map<std::string, FnInfo> kFns = [] {
    std::map<std::string, FnInfo> m = {
        {"where", {Fn::Where, Op::Where}},
        {"clamp", {Fn::Clamp, Op::Clamp}},
        {"f32", {Fn::Cast, Op::Cast, DType::f32}}, {"f16", {Fn::Cast, Op::Cast, DType::f16}},
        {"bf16", {Fn::Cast, Op::Cast, DType::bf16}}, {"i32", {Fn::Cast, Op::Cast, DType::i32}},
        {"i64", {Fn::Cast, Op::Cast, DType::i64}},
        {"size", {Fn::Size, Op::Size}},
    };
    for (const OpDef* d : op_defs()) {
      if (d->kind == OpKind::function)
        m[d->source] = {d->arity == 1 ? Fn::Unary : Fn::Binary, d->op};
      else if (d->kind == OpKind::reduction || d->op == Op::Mean)
        m[d->source] = {Fn::Reduce, d->op};
      else if (d->kind == OpKind::sugar)
        m[d->source] = {Fn::ReduceOne, d->op};
    }
    return m;
  }();
  return kFns;
}

std::optional<FnInfo> find_function(const std::string& s) {
  auto it = functions().find(s);
  if (it == functions().end()) return std::nullopt;
  return it->second;
}

// Edit distance, for "did you mean" hints.
int distance(const std::string& a, const std::string& b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string suggest_function(const std::string& name) {
  std::string best;
  int best_d = 3;
  for (const auto& entry : functions()) {
    const std::string& f = entry.first;
    int d = distance(name, f);
    if (d < best_d && d < static_cast<int>(name.size())) {
      best_d = d;
      best = f;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

std::string plural(size_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& t) : t_(t) {}

  std::vector<Program> parse_file() {
    std::vector<Program> programs;
    std::map<std::string, SourceLoc> names;
    skip_newlines();
    while (peek().kind != Tok::End) {
      if (peek().kind != Tok::KwProgram)
        fail(peek(), "expected 'program', found " + describe(peek()));
      Program p = parse_program();
      auto [it, fresh] = names.emplace(p.name, p.loc);
      if (!fresh)
        throw ProgramError(p.loc, "duplicate program '" + p.name + "' (first defined at " +
                                      at(it->second) + ")");
      programs.push_back(std::move(p));
      skip_newlines();
    }
    if (programs.empty())
      throw ProgramError(peek().loc, "no program in the file (a program starts with "
                                     "'program NAME(PARAMS) {')");
    return programs;
  }

 private:
  // Token access ---------------------------------------------------------------------------
  const Token& peek(size_t ahead = 0) const {
    return t_[std::min(p_ + ahead, t_.size() - 1)];
  }
  const Token& next() {
    const Token& t = t_[p_];
    if (p_ + 1 < t_.size()) ++p_;
    return t;
  }
  bool accept(Tok k) {
    if (peek().kind != k) return false;
    next();
    return true;
  }
  [[noreturn]] void fail(const Token& t, const std::string& msg) { throw ProgramError(t.loc, msg); }
  const Token& expect(Tok k, const std::string& context) {
    if (peek().kind != k)
      fail(peek(), std::string("expected ") + tok_spelling(k) + " " + context + ", found " +
                       describe(peek()));
    return next();
  }
  void skip_newlines() {
    while (peek().kind == Tok::Newline) next();
  }

  // Builder calls: a builder error without a location takes the construct's location.
  template <class F>
  auto build(SourceLoc loc, F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (ProgramError& e) {
      if (e.loc.line == 0) e.loc = loc;
      throw;
    }
  }

  struct Nest {
    Parser& p;
    Nest(Parser& parser, const Token& at) : p(parser) {
      if (++p.depth_ > kMaxNesting)
        p.fail(at, "expression nested too deeply (more than " + std::to_string(kMaxNesting) +
                       " levels)");
    }
    ~Nest() { --p.depth_; }
  };

  // Declarations ---------------------------------------------------------------------------
  Program parse_program() {
    next();  // 'program'
    const Token& name = expect(Tok::Ident, "(the program's name) after 'program'");
    b_ = std::make_unique<ProgramBuilder>(name.text, name.loc);
    dims_.clear();
    params_.clear();
    locals_.clear();
    outputs_.clear();
    expect(Tok::LParen, "after the program name");
    if (peek().kind == Tok::RParen)
      fail(peek(), "program '" + name.text + "' has no parameters (a program reads at least "
                   "one parameter)");
    do {
      parse_param();
    } while (accept(Tok::Comma));
    expect(Tok::RParen, "after the parameters");
    skip_newlines();
    expect(Tok::LBrace, "to open the program's body");
    for (;;) {
      skip_newlines();
      if (peek().kind == Tok::RBrace) break;
      if (peek().kind == Tok::End)
        fail(peek(), "unexpected end of file: program '" + name.text + "' is not closed by '}'");
      parse_statement();
    }
    next();  // '}'
    if (outputs_.empty())
      throw ProgramError(name.loc, "program '" + name.text + "' has no output (add a statement "
                                   "'out NAME: TYPE[dims] = expr')");
    Program p = build(name.loc, [&] { return b_->build(); });
    b_.reset();
    return p;
  }

  DType parse_dtype_name(const std::string& what) {
    const Token& t = expect(Tok::Ident, "(a type) after ':' in " + what);
    auto d = source_dtype(t.text);
    if (!d)
      fail(t, "unknown type '" + t.text + "' (types are f32, f16, bf16, f8e4m3, f8e5m2, i32, "
              "i64, bool)");
    return *d;
  }

  // A bracketed dimension list `[a, b]` (possibly empty); returns names and their tokens.
  std::vector<const Token*> parse_dim_list(const std::string& what) {
    std::vector<const Token*> dims;
    expect(Tok::LBracket, "(the dimension list) after the type of " + what);
    if (accept(Tok::RBracket)) return dims;
    do {
      const Token& d = expect(Tok::Ident, "(a dimension name) in the dimensions of " + what);
      for (const Token* e : dims)
        if (e->text == d.text)
          fail(d, "dimension '" + d.text + "' appears twice in " + what + " (a name is one "
                  "dimension; give the other axis its own name)");
      dims.push_back(&d);
    } while (accept(Tok::Comma));
    expect(Tok::RBracket, "after the dimensions of " + what);
    return dims;
  }

  void parse_param() {
    const Token& name = expect(Tok::Ident, "(a parameter name)");
    if (auto it = params_.find(name.text); it != params_.end())
      fail(name, "duplicate parameter '" + name.text + "' (first declared at " +
                     at(it->second.loc) + ")");
    if (auto it = dims_.find(name.text); it != dims_.end())
      fail(name, "'" + name.text + "' is both a dimension (declared at " + at(it->second) +
                     ") and a parameter");
    params_[name.text] = ParamInfo{name.loc, {}};
    std::string what = "parameter '" + name.text + "'";
    expect(Tok::Colon, "after " + what);
    DType type = parse_dtype_name(what);
    std::vector<std::string> dims;
    for (const Token* d : parse_dim_list(what)) {
      if (auto it = params_.find(d->text); it != params_.end())
        fail(*d, "'" + d->text + "' is both a parameter (declared at " + at(it->second.loc) +
                     ") and a dimension");
      dims_.emplace(d->text, d->loc);
      dims.push_back(d->text);
    }
    Value v = build(name.loc, [&] { return b_->param(name.text, type, dims, name.loc); });
    params_[name.text].value = v;
  }

  // Statements -----------------------------------------------------------------------------
  void parse_statement() {
    if (peek().kind == Tok::KwOut) {
      parse_output();
    } else if (peek().kind == Tok::Ident) {
      const Token& name = next();
      if (peek().kind != Tok::Assign)
        fail(peek(), "expected '=' after '" + name.text + "' (a statement is 'NAME = expr' or "
                     "'out NAME: TYPE[dims] = expr'), found " + describe(peek()));
      if (auto it = params_.find(name.text); it != params_.end())
        fail(name, "cannot assign to '" + name.text + "': it is a parameter (declared at " +
                       at(it->second.loc) + "); choose another name");
      if (auto it = dims_.find(name.text); it != dims_.end())
        fail(name, "cannot assign to '" + name.text + "': it is a dimension (declared at " +
                       at(it->second) + "); choose another name");
      next();  // '='
      Value v = parse_expr();
      end_statement();
      locals_[name.text] = v;  // after the expression: `s = s + 1` reads the old `s`
    } else {
      fail(peek(), "expected a statement ('NAME = expr' or 'out NAME: TYPE[dims] = expr'), "
                   "found " + describe(peek()));
    }
  }

  void end_statement() {
    Tok k = peek().kind;
    if (k == Tok::Newline) {
      next();
      return;
    }
    if (k == Tok::RBrace || k == Tok::End) return;
    fail(peek(), "expected an operator or the end of the line, found " + describe(peek()));
  }

  void parse_output() {
    next();  // 'out'
    const Token& name = expect(Tok::Ident, "(the output's name) after 'out'");
    if (auto it = outputs_.find(name.text); it != outputs_.end())
      fail(name, "duplicate output '" + name.text + "' (first declared at " + at(it->second) +
                     ")");
    if (auto it = params_.find(name.text); it != params_.end())
      fail(name, "output '" + name.text + "' has the name of a parameter (declared at " +
                     at(it->second.loc) + ")");
    if (auto it = dims_.find(name.text); it != dims_.end())
      fail(name, "output '" + name.text + "' has the name of a dimension (declared at " +
                     at(it->second) + ")");
    std::string what = "output '" + name.text + "'";
    expect(Tok::Colon, "after " + what);
    DType type = parse_dtype_name(what);
    std::vector<std::string> dims;
    for (const Token* d : parse_dim_list(what)) {
      require_dim(*d, "an output lists dimension names");
      dims.push_back(d->text);
    }
    expect(Tok::Assign, "after the dimensions of " + what);
    Value v = parse_expr();
    end_statement();
    outputs_.emplace(name.text, name.loc);
    build(name.loc, [&] { b_->output(name.text, type, dims, v, name.loc); });
  }

  // A name that must be a declared dimension (reduction arguments, size(), out lists); `why`
  // says why a dimension is needed when the name is some other kind of value.
  void require_dim(const Token& t, const std::string& why) {
    if (dims_.count(t.text)) return;
    std::string kind = params_.count(t.text)    ? "a parameter"
                       : locals_.count(t.text)  ? "a local value"
                       : outputs_.count(t.text) ? "an output"
                                                : "";
    if (kind.empty()) fail(t, "unknown dimension '" + t.text + "'" + suggest(t.text, true));
    fail(t, "'" + t.text + "' is " + kind + ", not a dimension (" + why + ")");
  }

  std::string suggest(const std::string& name, bool dims_only) const {
    std::string best;
    int best_d = 3;
    auto consider = [&](const std::string& cand) {
      int d = distance(name, cand);
      if (d < best_d && d < static_cast<int>(std::max(name.size(), cand.size()))) {
        best_d = d;
        best = cand;
      }
    };
    for (const auto& [n, l] : dims_) consider(n);
    if (!dims_only) {
      for (const auto& [n, v] : locals_) consider(n);
      for (const auto& [n, v] : params_) consider(n);
    }
    return best.empty() ? "" : " (did you mean '" + best + "'?)";
  }

  // Expressions ----------------------------------------------------------------------------
  static std::optional<Op> comparison(Tok k) {
    switch (k) {
      case Tok::Eq: return Op::Eq;
      case Tok::Ne: return Op::Ne;
      case Tok::Lt: return Op::Lt;
      case Tok::Le: return Op::Le;
      case Tok::Gt: return Op::Gt;
      case Tok::Ge: return Op::Ge;
      default: return std::nullopt;
    }
  }

  Value binary(Op op, Value a, Value b, SourceLoc loc) {
    return build(loc, [&] { return b_->binary(op, a, b, loc); });
  }

  Value parse_expr() {
    Nest nest(*this, peek());
    Value l = parse_and();
    while (peek().kind == Tok::KwOr) {
      SourceLoc loc = next().loc;
      Value r = parse_and();
      l = binary(Op::Or, l, r, loc);
    }
    return l;
  }

  Value parse_and() {
    Value l = parse_not();
    while (peek().kind == Tok::KwAnd) {
      SourceLoc loc = next().loc;
      Value r = parse_not();
      l = binary(Op::And, l, r, loc);
    }
    return l;
  }

  Value parse_not() {
    if (peek().kind != Tok::KwNot) return parse_cmp();
    Nest nest(*this, peek());
    SourceLoc loc = next().loc;
    Value a = parse_not();
    return build(loc, [&] { return b_->unary(Op::Not, a, loc); });
  }

  Value parse_cmp() {
    Value l = parse_add();
    auto op = comparison(peek().kind);
    if (!op) return l;
    const Token& first = next();
    Value r = parse_add();
    if (comparison(peek().kind))
      fail(peek(), "comparisons cannot be chained: parenthesize, or write 'a " + first.text +
                       " b and b " + peek().text + " c'");
    return binary(*op, l, r, first.loc);
  }

  Value parse_add() {
    Value l = parse_mul();
    while (peek().kind == Tok::Plus || peek().kind == Tok::Minus) {
      const Token& t = next();
      Value r = parse_mul();
      l = binary(t.kind == Tok::Plus ? Op::Add : Op::Sub, l, r, t.loc);
    }
    return l;
  }

  Value parse_mul() {
    Value l = parse_unary();
    for (;;) {
      Tok k = peek().kind;
      Op op = k == Tok::Star ? Op::Mul : k == Tok::Slash ? Op::Div : Op::Mod;
      if (k != Tok::Star && k != Tok::Slash && k != Tok::Percent) return l;
      SourceLoc loc = next().loc;
      Value r = parse_unary();
      l = binary(op, l, r, loc);
    }
  }

  Value parse_unary() {
    if (peek().kind != Tok::Minus) return parse_postfix();
    Nest nest(*this, peek());
    SourceLoc loc = next().loc;
    Value a = parse_unary();
    return build(loc, [&] { return b_->unary(Op::Neg, a, loc); });
  }

  Value parse_postfix() {
    Value v = parse_primary();
    if (peek().kind == Tok::LBracket)
      fail(peek(), "only a parameter can be indexed (write p[i, j] with p a parameter)");
    if (peek().kind == Tok::LParen) fail(peek(), "only a function name can be called");
    return v;
  }

  Value parse_primary() {
    const Token& t = peek();
    switch (t.kind) {
      case Tok::Int:
        next();
        return build(t.loc, [&] { return b_->constant(t.value, DType::i64, t.loc); });
      case Tok::Float:
        next();
        return build(t.loc, [&] { return b_->constant(t.value, DType::f32, t.loc); });
      case Tok::KwInf:
        next();
        return build(t.loc, [&] { return b_->inf(t.loc); });
      case Tok::KwTrue:
      case Tok::KwFalse: {
        next();
        double v = t.kind == Tok::KwTrue ? 1 : 0;
        return build(t.loc, [&] { return b_->constant(v, DType::boolean, t.loc); });
      }
      case Tok::LParen: {
        next();
        Value v = parse_expr();
        expect(Tok::RParen, "to close the '(' at " + at(t.loc));
        return v;
      }
      case Tok::Ident:
        next();
        if (peek().kind == Tok::LParen) return parse_call(t);
        if (peek().kind == Tok::LBracket) return parse_gather(t);
        return resolve(t);
      case Tok::KwNot:
        fail(t, "'not' binds looser than arithmetic and comparisons here; parenthesize: "
                "(not x)");
      default:
        fail(t, "expected an expression, found " + describe(t));
    }
  }

  Value resolve(const Token& t) {
    if (auto it = locals_.find(t.text); it != locals_.end()) return it->second;
    if (auto it = params_.find(t.text); it != params_.end()) return it->second.value;
    if (dims_.count(t.text)) return build(t.loc, [&] { return b_->index(t.text, t.loc); });
    if (outputs_.count(t.text))
      fail(t, "'" + t.text + "' is an output and cannot be read; bind the expression to a name "
              "and use that name");
    if (find_function(t.text))
      fail(t, "'" + t.text + "' is a function; call it as " + t.text + "(...)");
    fail(t, "unknown name '" + t.text + "'" + suggest(t.text, false));
  }

  Value parse_gather(const Token& name) {
    const Token& open = next();  // '['
    if (!params_.count(name.text)) {
      if (locals_.count(name.text) || dims_.count(name.text) || outputs_.count(name.text)) {
        std::string kind = locals_.count(name.text) ? "a local value"
                           : dims_.count(name.text) ? "a dimension"
                                                    : "an output";
        fail(name, "'" + name.text + "' is " + kind + "; only a parameter can be indexed");
      }
      fail(name, "unknown parameter '" + name.text + "'" + suggest(name.text, false));
    }
    std::vector<Value> idx;
    // `p[]` reads a scalar parameter itself (a gather with no index would be a needless node).
    if (peek().kind == Tok::RBracket && b_->program().params[b_->program().find_param(
                                            name.text)].dims.empty()) {
      next();
      return params_.at(name.text).value;
    }
    if (!accept(Tok::RBracket)) {
      do {
        idx.push_back(parse_expr());
      } while (accept(Tok::Comma));
      expect(Tok::RBracket, "to close the '[' at " + at(open.loc));
    }
    return build(name.loc, [&] { return b_->gather(name.text, idx, name.loc); });
  }

  // Function calls -------------------------------------------------------------------------
  Value parse_call(const Token& name) {
    auto fn = find_function(name.text);
    if (!fn) {
      std::string msg = "unknown function '" + name.text + "'";
      if (source_dtype(name.text))
        msg += " (conversions are f32, f16, bf16, i32, i64)";
      else if (params_.count(name.text) || locals_.count(name.text))
        msg += " ('" + name.text + "' is a value; to index a parameter use [ ])";
      else
        msg += suggest_function(name.text);
      fail(name, msg);
    }
    const Token& open = next();  // '('
    switch (fn->kind) {
      case Fn::Size: {
        if (peek().kind != Tok::Ident || (peek(1).kind != Tok::RParen &&
                                          peek(1).kind != Tok::Comma))
          fail(peek().kind == Tok::RParen ? name : peek(),
               "size takes one dimension name, as in size(d)");
        const Token& d = next();
        require_dim(d, "size takes a dimension name");
        if (peek().kind == Tok::Comma) fail(name, "size takes one dimension name, as in size(d)");
        expect(Tok::RParen, "to close the '(' at " + at(open.loc));
        return build(name.loc, [&] { return b_->size(d.text, name.loc); });
      }
      case Fn::Reduce:
      case Fn::ReduceOne: return parse_reduction(name, open, *fn);
      default: break;
    }
    std::vector<Value> args;
    if (!accept(Tok::RParen)) {
      do {
        args.push_back(parse_expr());
      } while (accept(Tok::Comma));
      expect(Tok::RParen, "to close the '(' at " + at(open.loc));
    }
    size_t want = fn->kind == Fn::Unary || fn->kind == Fn::Cast ? 1
                  : fn->kind == Fn::Binary                     ? 2
                                                                : 3;
    if (args.size() != want)
      fail(name, name.text + " takes " + plural(want, "argument") + ", got " +
                     std::to_string(args.size()));
    SourceLoc loc = name.loc;
    switch (fn->kind) {
      case Fn::Unary: return build(loc, [&] { return b_->unary(fn->op, args[0], loc); });
      case Fn::Cast: return build(loc, [&] { return b_->cast(args[0], fn->to, loc); });
      case Fn::Binary: return binary(fn->op, args[0], args[1], loc);
      case Fn::Where:
        return build(loc, [&] { return b_->where(args[0], args[1], args[2], loc); });
      case Fn::Clamp:
        return build(loc, [&] { return b_->clamp(args[0], args[1], args[2], loc); });
      default: fail(name, "internal error: unhandled function '" + name.text + "'");
    }
  }

  Value parse_reduction(const Token& name, const Token& open, const FnInfo& fn) {
    bool one = fn.kind == Fn::ReduceOne;
    std::string usage = one ? name.text + " takes a value and one dimension name, as in " +
                                  name.text + "(x, n)"
                            : name.text + " takes a value and one or more dimension names, as "
                                          "in " + name.text + "(x, d)";
    if (peek().kind == Tok::RParen) fail(name, usage);
    Value v = parse_expr();
    std::vector<std::string> dims;
    std::string why = name.text + " reduces over dimension names";
    if (name.text == "max" || name.text == "min")
      why += "; the element-wise " + name.text + " of two values is " + name.text + "imum(a, b)";
    while (accept(Tok::Comma)) {
      const Token& d = peek();
      if (d.kind != Tok::Ident || (peek(1).kind != Tok::Comma && peek(1).kind != Tok::RParen))
        fail(d, name.text + " reduces over dimension names: argument " +
                    std::to_string(dims.size() + 2) + " must be a dimension name");
      next();
      require_dim(d, why);
      if (std::find(dims.begin(), dims.end(), d.text) != dims.end())
        fail(d, "dimension '" + d.text + "' is listed twice in " + name.text + "()");
      dims.push_back(d.text);
    }
    expect(Tok::RParen, "to close the '(' at " + at(open.loc));
    if (dims.empty() || (one && dims.size() != 1)) fail(name, usage);
    return build(name.loc, [&] { return b_->reduce(fn.op, v, dims, name.loc); });
  }

  struct ParamInfo {
    SourceLoc loc;
    Value value;
  };

  const std::vector<Token>& t_;
  size_t p_ = 0;
  int depth_ = 0;
  std::unique_ptr<ProgramBuilder> b_;
  std::map<std::string, SourceLoc> dims_;
  std::map<std::string, ParamInfo> params_;
  std::map<std::string, Value> locals_;
  std::map<std::string, SourceLoc> outputs_;
};

}  // namespace

std::vector<Program> parse_programs(const std::vector<Token>& tokens) {
  if (tokens.empty() || tokens.back().kind != Tok::End)
    throw ProgramError({1, 1}, "internal error: token stream without an end");
  return Parser(tokens).parse_file();
}

}  // namespace flashgen::frontend
