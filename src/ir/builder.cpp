// ProgramBuilder: constructs IR nodes and checks dimensions and types (docs/language.md).
//
// This is the one place where the language's typing rules live; the .attn parser builds through
// it, so a C++-built program and a parsed one are checked identically. Every violation throws
// ProgramError carrying the SourceLoc given by the caller. Tests: tests/error/ (diagnostics),
// tests/unit/builder_test.cpp (C++-built variant programs).
#include "flashgen/builder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace flashgen {

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

bool is_numeric(DType t) { return is_float(t) || is_integer(t); }

// Float functions compute in f32 on integer or bool arguments (docs/language.md).
DType float_result(DType t) { return is_float(t) ? arithmetic_type(t) : DType::f32; }

const char* spelling(Op op) {
  const char* s = op_def(op).source;
  return *s ? s : op_name(op);
}

}  // namespace

ProgramBuilder::ProgramBuilder(std::string name, SourceLoc loc) {
  prog_.name = std::move(name);
  prog_.loc = loc;
}

ProgramBuilder ProgramBuilder::with_declarations_of(const Program& p) {
  ProgramBuilder b(p.name, p.loc);
  // Passes rebuild programs that were within the limit and add a few levels per operation
  // (softmax lowering, the online rewrite); the stages after them recurse over values, so
  // the limit stays finite.
  b.depth_limit_ = 4 * kMaxValueDepth;
  b.prog_.dims = p.dims;
  b.prog_.params = p.params;
  for (size_t i = 0; i < p.params.size(); ++i) {
    Node n;
    n.op = Op::Param;
    n.param = static_cast<int>(i);
    n.type = p.params[i].type;
    n.dims = p.params[i].dims;
    std::sort(n.dims.begin(), n.dims.end());
    b.add_node(n);
  }
  return b;
}

int ProgramBuilder::add_node(Node n) {
  uint64_t bits;
  std::memcpy(&bits, &n.value, sizeof bits);
  auto key = std::make_tuple(static_cast<int>(n.op), static_cast<int>(n.type), n.param, n.dim,
                             n.args, n.reduce, bits);
  auto it = cse_.find(key);
  if (it != cse_.end()) return it->second;
  int depth = 1;
  for (int a : n.args) depth = std::max(depth, depth_[a] + 1);
  if (depth > depth_limit_) {
    throw ProgramError(n.loc, "this value is the end of a chain of more than " +
                                  std::to_string(kMaxValueDepth) +
                                  " operations (the limit on a program's depth, which keeps "
                                  "compilation bounded)");
  }
  int id = static_cast<int>(prog_.nodes.size());
  prog_.nodes.push_back(std::move(n));
  depth_.push_back(depth);
  cse_.emplace(std::move(key), id);
  return id;
}

Value ProgramBuilder::make(Node n) {
  for (int a : n.args)
    if (a < 0 || a >= static_cast<int>(prog_.nodes.size()))
      throw ProgramError(n.loc, "internal: a Value that does not belong to this builder");
  return Value{this, add_node(std::move(n))};
}

void ProgramBuilder::own(Value v) const {
  if (v.builder != this || v.id < 0 || v.id >= static_cast<int>(prog_.nodes.size()))
    throw ProgramError({}, "a Value from another ProgramBuilder (or a default Value) was used");
}

int ProgramBuilder::dim_or_throw(const std::string& name, SourceLoc loc) const {
  int d = prog_.find_dim(name);
  if (d < 0) {
    if (prog_.find_param(name) >= 0)
      throw ProgramError(loc, quoted(name) + " is a parameter, not a dimension");
    throw ProgramError(loc, "unknown dimension " + quoted(name));
  }
  return d;
}

Value ProgramBuilder::param(const std::string& name, DType type,
                            const std::vector<std::string>& dims, SourceLoc loc) {
  if (type == DType::f64) throw ProgramError(loc, "f64 is not a parameter type");
  if (prog_.find_param(name) >= 0)
    throw ProgramError(loc, "parameter " + quoted(name) + " is declared twice");
  if (prog_.find_dim(name) >= 0)
    throw ProgramError(loc, quoted(name) + " is both a dimension and a parameter");
  std::set<std::string> seen;
  for (const auto& d : dims) {
    if (!seen.insert(d).second)
      throw ProgramError(loc, "dimension " + quoted(d) + " appears twice in parameter " +
                                  quoted(name) + " (a square tensor needs two names, e.g. [i, j])");
    if (d == name || prog_.find_param(d) >= 0)
      throw ProgramError(loc, quoted(d) + " is both a dimension and a parameter");
  }
  Parameter p;
  p.name = name;
  p.type = type;
  p.loc = loc;
  for (const auto& d : dims) {
    int id = prog_.find_dim(d);
    if (id < 0) {
      id = static_cast<int>(prog_.dims.size());
      prog_.dims.push_back(d);
    }
    p.dims.push_back(id);
  }
  prog_.params.push_back(p);
  Node n;
  n.op = Op::Param;
  n.param = static_cast<int>(prog_.params.size()) - 1;
  n.type = type;
  n.dims = p.dims;
  std::sort(n.dims.begin(), n.dims.end());
  n.loc = loc;
  return make(n);
}

Value ProgramBuilder::read(const std::string& name, SourceLoc loc) {
  int p = prog_.find_param(name);
  if (p < 0) throw ProgramError(loc, "unknown parameter " + quoted(name));
  Node n;
  n.op = Op::Param;
  n.param = p;
  n.type = prog_.params[p].type;
  n.dims = prog_.params[p].dims;
  std::sort(n.dims.begin(), n.dims.end());
  n.loc = loc;
  return make(n);
}

Value ProgramBuilder::index(const std::string& dim, SourceLoc loc) {
  Node n;
  n.op = Op::Index;
  n.dim = dim_or_throw(dim, loc);
  n.type = DType::i64;
  n.dims = {n.dim};
  n.loc = loc;
  return make(n);
}

Value ProgramBuilder::size(const std::string& dim, SourceLoc loc) {
  Node n;
  n.op = Op::Size;
  n.dim = dim_or_throw(dim, loc);
  n.type = DType::i64;
  n.loc = loc;
  return make(n);
}

Value ProgramBuilder::constant(double v, DType type, SourceLoc loc) {
  if ((is_integer(type) || type == DType::boolean) && !(std::isfinite(v) && v == std::floor(v)))
    throw ProgramError(loc, std::string("constant ") + std::to_string(v) + " is not a valid " +
                                dtype_name(type));
  Node n;
  n.op = Op::Const;
  n.value = v;
  n.type = type;
  n.loc = loc;
  return make(n);
}

Value ProgramBuilder::unary(Op op, Value a, SourceLoc loc) {
  own(a);
  const Node& x = node(a.id);
  Node n;
  n.op = op;
  n.args = {a.id};
  n.dims = x.dims;
  n.loc = loc;
  std::string tn = dtype_name(x.type);
  const OpDef& d = op_def(op);
  if (d.arity != 1 || (d.kind != OpKind::unary && d.kind != OpKind::function) ||
      d.type == TypeRule::own)
    throw ProgramError(loc, std::string("not a unary operation: ") + op_name(op));
  switch (d.type) {
    case TypeRule::numeric:
    case TypeRule::rounding:
      if (!is_numeric(x.type))
        throw ProgramError(loc, std::string(spelling(op)) + " needs a number, got " + tn);
      n.type = arithmetic_type(x.type);
      if (d.type == TypeRule::rounding && is_integer(n.type)) return a;  // floor of an integer
      break;
    case TypeRule::logic:
      if (x.type != DType::boolean)
        throw ProgramError(loc, std::string("'") + spelling(op) + "' needs a bool, got " + tn);
      n.type = DType::boolean;
      break;
    case TypeRule::to_float:
      n.type = float_result(x.type);
      break;
    default:
      throw ProgramError(loc, std::string("not a unary operation: ") + op_name(op));
  }
  return make(n);
}

Value ProgramBuilder::binary(Op op, Value a, Value b, SourceLoc loc) {
  own(a);
  own(b);
  const Node& x = node(a.id);
  const Node& y = node(b.id);
  Node n;
  n.op = op;
  n.args = {a.id, b.id};
  n.dims = dimset_union(x.dims, y.dims);
  n.loc = loc;
  std::string types = std::string(dtype_name(x.type)) + " and " + dtype_name(y.type);
  std::string what = std::string("'") + spelling(op) + "'";
  const OpDef& d = op_def(op);
  if (d.arity != 2 || d.type == TypeRule::own)
    throw ProgramError(loc, std::string("not a binary operation: ") + op_name(op));
  switch (d.type) {
    case TypeRule::numeric:
      if (!is_numeric(x.type) || !is_numeric(y.type))
        throw ProgramError(loc, what + " needs numbers, got " + types);
      n.type = promote(x.type, y.type);
      break;
    case TypeRule::division:
      if (!is_numeric(x.type) || !is_numeric(y.type))
        throw ProgramError(loc, what + " needs numbers, got " + types);
      if (is_integer(x.type) && is_integer(y.type))
        throw ProgramError(loc, "'/' on integers (" + types +
                                    "); write f32(a) / b, or floor(f32(a) / b)");
      n.type = promote(x.type, y.type);
      break;
    case TypeRule::integers:
      if (!is_integer(x.type) || !is_integer(y.type))
        throw ProgramError(loc, what + " needs integers, got " + types);
      n.type = promote(x.type, y.type);
      break;
    case TypeRule::to_float:  // a function: its name unquoted, as the unary functions say it
      if (!is_numeric(x.type) || !is_numeric(y.type))
        throw ProgramError(loc, std::string(spelling(op)) + " needs numbers, got " + types);
      n.type = float_result(promote(x.type, y.type));
      break;
    case TypeRule::equality:
      if (!((is_numeric(x.type) && is_numeric(y.type)) ||
            (x.type == DType::boolean && y.type == DType::boolean)))
        throw ProgramError(loc, what + " compares two numbers or two bools, got " + types);
      n.type = DType::boolean;
      break;
    case TypeRule::order:
      if (!is_numeric(x.type) || !is_numeric(y.type))
        throw ProgramError(loc, what + " needs numbers, got " + types);
      n.type = DType::boolean;
      break;
    case TypeRule::logic:
      if (x.type != DType::boolean || y.type != DType::boolean)
        throw ProgramError(loc, what + " needs bools, got " + types);
      n.type = DType::boolean;
      break;
    default:
      throw ProgramError(loc, std::string("not a binary operation: ") + op_name(op));
  }
  return make(n);
}

Value ProgramBuilder::where(Value c, Value a, Value b, SourceLoc loc) {
  own(c);
  own(a);
  own(b);
  const Node& cn = node(c.id);
  const Node& x = node(a.id);
  const Node& y = node(b.id);
  if (cn.type != DType::boolean)
    throw ProgramError(loc, std::string("where's condition must be bool, got ") +
                                dtype_name(cn.type));
  bool both_bool = x.type == DType::boolean && y.type == DType::boolean;
  if (!both_bool && (!is_numeric(x.type) || !is_numeric(y.type)))
    throw ProgramError(loc, std::string("where's branches must both be numbers or both bools, got ") +
                                dtype_name(x.type) + " and " + dtype_name(y.type));
  Node n;
  n.op = Op::Where;
  n.args = {c.id, a.id, b.id};
  n.dims = dimset_union(cn.dims, dimset_union(x.dims, y.dims));
  n.type = both_bool ? DType::boolean : promote(x.type, y.type);
  n.loc = loc;
  return make(n);
}

Value ProgramBuilder::clamp(Value x, Value lo, Value hi, SourceLoc loc) {
  own(x);
  own(lo);
  own(hi);
  const Node& a = node(x.id);
  const Node& l = node(lo.id);
  const Node& h = node(hi.id);
  if (!is_numeric(a.type) || !is_numeric(l.type) || !is_numeric(h.type))
    throw ProgramError(loc, std::string("clamp needs numbers, got ") + dtype_name(a.type) + ", " +
                                dtype_name(l.type) + " and " + dtype_name(h.type));
  Node n;
  n.op = Op::Clamp;
  n.args = {x.id, lo.id, hi.id};
  n.dims = dimset_union(a.dims, dimset_union(l.dims, h.dims));
  n.type = promote(a.type, promote(l.type, h.type));
  n.loc = loc;
  return make(n);
}

Value ProgramBuilder::cast(Value a, DType to, SourceLoc loc) {
  own(a);
  const Node& x = node(a.id);
  if (to == DType::boolean || to == DType::f64 || to == DType::f8e4m3 || to == DType::f8e5m2)
    throw ProgramError(loc, std::string("no conversion function to ") + dtype_name(to));
  if (x.type == to) return a;
  Node n;
  n.op = Op::Cast;
  n.args = {a.id};
  n.dims = x.dims;
  n.type = to;
  n.loc = loc;
  return make(n);
}

Value ProgramBuilder::reduce(Op op, Value a, const std::vector<std::string>& dims, SourceLoc loc) {
  own(a);
  const Node& x = node(a.id);
  const char* fname = op_name(op);
  if (!is_reduction(op) && !is_sugar(op))
    throw ProgramError(loc, std::string("not a reduction: ") + fname);
  if (dims.empty()) throw ProgramError(loc, std::string(fname) + " needs a dimension to reduce over");
  if ((op == Op::Softmax || op == Op::LogSumExp) && dims.size() != 1)
    throw ProgramError(loc, std::string(fname) + " takes exactly one dimension");
  DimSet r;
  for (const auto& d : dims) {
    int id = dim_or_throw(d, loc);
    if (!dimset_contains(x.dims, id))
      throw ProgramError(loc, std::string(fname) + " over " + quoted(d) +
                                  ", which the value (over " + prog_.dim_list(x.dims) +
                                  ") does not have");
    if (dimset_contains(r, id))
      throw ProgramError(loc, std::string(fname) + " names dimension " + quoted(d) + " twice");
    r = dimset_union(r, {id});
  }
  if (x.type == DType::boolean)
    throw ProgramError(loc, std::string(fname) + " of a bool value; convert it first, e.g. i64(x)");
  Node n;
  n.op = op;
  n.args = {a.id};
  n.reduce = r;
  n.dims = op == Op::Softmax ? x.dims : dimset_minus(x.dims, r);
  n.loc = loc;
  if (op == Op::Sum || op == Op::Max || op == Op::Min)
    n.type = is_integer(x.type) ? DType::i64 : arithmetic_type(x.type);
  else
    n.type = float_result(x.type);
  return make(n);
}

Value ProgramBuilder::gather(const std::string& name, const std::vector<Value>& idx,
                             SourceLoc loc) {
  int p = prog_.find_param(name);
  if (p < 0) {
    if (prog_.find_dim(name) >= 0)
      throw ProgramError(loc, quoted(name) + " is a dimension; only parameters can be indexed");
    throw ProgramError(loc, "unknown parameter " + quoted(name));
  }
  const Parameter& par = prog_.params[p];
  if (idx.size() != par.dims.size())
    throw ProgramError(loc, "parameter " + quoted(name) + " has rank " +
                                std::to_string(par.dims.size()) + " but is indexed with " +
                                std::to_string(idx.size()) + " index" +
                                (idx.size() == 1 ? "" : "es"));
  for (const Value& v : idx) own(v);
  Node n;
  n.op = Op::Gather;
  n.param = p;
  n.type = par.type;
  n.loc = loc;
  for (size_t i = 0; i < idx.size(); ++i) {
    const Node& ix = node(idx[i].id);
    if (!is_integer(ix.type))
      throw ProgramError(loc, "index " + std::to_string(i + 1) + " of " + quoted(name) +
                                  " (dimension " + quoted(prog_.dims[par.dims[i]]) +
                                  ") must be an integer, got " + dtype_name(ix.type));
    n.args.push_back(idx[i].id);
    n.dims = dimset_union(n.dims, ix.dims);
  }
  return make(n);
}

void ProgramBuilder::output(const std::string& name, DType type,
                            const std::vector<std::string>& dims, Value v, SourceLoc loc) {
  own(v);
  for (const Output& o : prog_.outputs)
    if (o.name == name) throw ProgramError(loc, "output " + quoted(name) + " is declared twice");
  if (prog_.find_param(name) >= 0)
    throw ProgramError(loc, "output " + quoted(name) + " has the name of a parameter");
  if (prog_.find_dim(name) >= 0)
    throw ProgramError(loc, "output " + quoted(name) + " has the name of a dimension");
  if (type == DType::f64) throw ProgramError(loc, "f64 is not an output type");
  const Node& x = node(v.id);
  Output o;
  o.name = name;
  o.type = type;
  o.node = v.id;
  o.loc = loc;
  for (const auto& d : dims) {
    int id = dim_or_throw(d, loc);
    if (std::find(o.dims.begin(), o.dims.end(), id) != o.dims.end())
      throw ProgramError(loc, "dimension " + quoted(d) + " appears twice in output " + quoted(name));
    o.dims.push_back(id);
  }
  DimSet declared = o.dims;
  std::sort(declared.begin(), declared.end());
  if (declared != x.dims) {
    DimSet missing = dimset_minus(x.dims, declared), extra = dimset_minus(declared, x.dims);
    std::string msg = "output " + quoted(name) + " is declared over " + prog_.dim_list(o.dims) +
                      " but its value is over " + prog_.dim_list(x.dims);
    if (!missing.empty()) msg += "; missing " + prog_.dim_list(missing);
    if (!extra.empty()) msg += "; extra " + prog_.dim_list(extra);
    throw ProgramError(loc, msg);
  }
  bool ok = (is_float(type) && is_numeric(x.type)) ||
            (is_integer(type) && is_integer(x.type)) ||
            (type == DType::boolean && x.type == DType::boolean);
  if (!ok) {
    std::string why = is_integer(type) && is_float(x.type) ? " (a float to integer conversion)" : "";
    throw ProgramError(loc, "output " + quoted(name) + " is " + dtype_name(type) +
                                " but its value is " + dtype_name(x.type) + why);
  }
  prog_.outputs.push_back(o);
}

Program ProgramBuilder::build(std::vector<int>* final_ids) {
  if (prog_.outputs.empty())
    throw ProgramError(prog_.loc, "program " + quoted(prog_.name) + " has no 'out' statement");
  // Canonical node order: parameter reads first, then a depth-first post-order from the outputs
  // (in statement order, args left to right). Nodes no output needs (left behind by rebinding)
  // are dropped. So two programs built from the same expressions compare equal whatever order
  // their nodes were created in (C++ evaluates call arguments in an unspecified order).
  Program out = prog_;
  out.nodes.clear();
  std::vector<int> remap(prog_.nodes.size(), -1);
  auto emit = [&](int id) {
    Node n = prog_.nodes[id];
    for (int& a : n.args) a = remap[a];
    remap[id] = static_cast<int>(out.nodes.size());
    out.nodes.push_back(std::move(n));
  };
  for (size_t p = 0; p < prog_.params.size(); ++p)
    for (size_t i = 0; i < prog_.nodes.size(); ++i)
      if (prog_.nodes[i].op == Op::Param && prog_.nodes[i].param == static_cast<int>(p)) emit(i);
  // Iterative DFS (programs can be deep).
  for (const Output& o : prog_.outputs) {
    std::vector<std::pair<int, size_t>> stack{{o.node, 0}};
    while (!stack.empty()) {
      auto& [id, next] = stack.back();
      if (remap[id] >= 0) {
        stack.pop_back();
        continue;
      }
      const Node& n = prog_.nodes[id];
      if (next < n.args.size()) {
        int a = n.args[next++];
        if (remap[a] < 0) stack.push_back({a, 0});
        continue;
      }
      int done = id;
      stack.pop_back();
      emit(done);
    }
  }
  for (Output& o : out.outputs) o.node = remap[o.node];
  if (final_ids) *final_ids = remap;
  return out;
}

// Operators ------------------------------------------------------------------------------------
namespace {
ProgramBuilder& B(Value a) { return *a.builder; }
}  // namespace
Value operator+(Value a, Value b) { return B(a).binary(Op::Add, a, b); }
Value operator-(Value a, Value b) { return B(a).binary(Op::Sub, a, b); }
Value operator*(Value a, Value b) { return B(a).binary(Op::Mul, a, b); }
Value operator/(Value a, Value b) { return B(a).binary(Op::Div, a, b); }
Value operator%(Value a, Value b) { return B(a).binary(Op::Mod, a, b); }
Value operator-(Value a) { return B(a).unary(Op::Neg, a); }
Value operator==(Value a, Value b) { return B(a).binary(Op::Eq, a, b); }
Value operator!=(Value a, Value b) { return B(a).binary(Op::Ne, a, b); }
Value operator<(Value a, Value b) { return B(a).binary(Op::Lt, a, b); }
Value operator<=(Value a, Value b) { return B(a).binary(Op::Le, a, b); }
Value operator>(Value a, Value b) { return B(a).binary(Op::Gt, a, b); }
Value operator>=(Value a, Value b) { return B(a).binary(Op::Ge, a, b); }
Value operator&&(Value a, Value b) { return B(a).binary(Op::And, a, b); }
Value operator||(Value a, Value b) { return B(a).binary(Op::Or, a, b); }
Value operator!(Value a) { return B(a).unary(Op::Not, a); }

namespace {
// A C++ literal becomes an i64 constant when integral, else f32 (as in .attn source).
Value literal(ProgramBuilder& b, double v) {
  bool integral = std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9e15;
  return b.constant(v, integral ? DType::i64 : DType::f32);
}
}  // namespace
Value operator+(Value a, double b) { return a + literal(B(a), b); }
Value operator-(Value a, double b) { return a - literal(B(a), b); }
Value operator*(Value a, double b) { return a * literal(B(a), b); }
Value operator/(Value a, double b) { return a / B(a).constant(b, DType::f32); }
Value operator+(double a, Value b) { return literal(B(b), a) + b; }
Value operator-(double a, Value b) { return literal(B(b), a) - b; }
Value operator*(double a, Value b) { return literal(B(b), a) * b; }
Value operator/(double a, Value b) { return B(b).constant(a, DType::f32) / b; }

}  // namespace flashgen
