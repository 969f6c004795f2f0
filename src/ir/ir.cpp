// Dtypes, op metadata, dimension sets and Program queries (see include/flashgen/ir.h).
#include "flashgen/ir.h"

#include <algorithm>
#include <cstring>

namespace flashgen {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f8e4m3: return "f8e4m3";
    case DType::f8e5m2: return "f8e5m2";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::boolean: return "bool";
    case DType::f64: return "f64";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::f8e4m3, DType::f8e5m2, DType::i32,
                  DType::i64, DType::boolean})
    if (s == dtype_name(t)) return t;
  return std::nullopt;
}

bool is_float(DType t) {
  return t == DType::f32 || t == DType::f16 || t == DType::bf16 || t == DType::f8e4m3 ||
         t == DType::f8e5m2 || t == DType::f64;
}
bool is_integer(DType t) { return t == DType::i32 || t == DType::i64; }

int dtype_bytes(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::f8e4m3: case DType::f8e5m2: case DType::boolean: return 1;
    case DType::i64: case DType::f64: return 8;
  }
  return 0;
}

DType arithmetic_type(DType t) {
  if (t == DType::f16 || t == DType::bf16 || t == DType::f8e4m3 || t == DType::f8e5m2)
    return DType::f32;
  return t;
}

DType promote(DType a, DType b) {
  a = arithmetic_type(a);
  b = arithmetic_type(b);
  if (a == b) return a;
  if (a == DType::f64 || b == DType::f64) return DType::f64;
  if (is_float(a)) return a;
  if (is_float(b)) return b;
  if (a == DType::boolean) return b;
  if (b == DType::boolean) return a;
  return DType::i64;  // i32 with i64
}

namespace {
struct OpInfo {
  Op op;
  const char* name;
  int arity;
};
constexpr OpInfo kOps[] = {
    {Op::Param, "param", 0},       {Op::Const, "const", 0},     {Op::Index, "index", 0},
    {Op::Size, "size", 0},         {Op::Neg, "neg", 1},         {Op::Not, "not", 1},
    {Op::Exp, "exp", 1},           {Op::Exp2, "exp2", 1},       {Op::Log, "log", 1},
    {Op::Log2, "log2", 1},         {Op::Sqrt, "sqrt", 1},       {Op::Rsqrt, "rsqrt", 1},
    {Op::Tanh, "tanh", 1},         {Op::Sigmoid, "sigmoid", 1}, {Op::Relu, "relu", 1},
    {Op::Abs, "abs", 1},           {Op::Floor, "floor", 1},     {Op::Ceil, "ceil", 1},
    {Op::Sin, "sin", 1},           {Op::Cos, "cos", 1},         {Op::Cast, "cast", 1},
    {Op::Add, "add", 2},           {Op::Sub, "sub", 2},         {Op::Mul, "mul", 2},
    {Op::Div, "div", 2},           {Op::Mod, "mod", 2},         {Op::Pow, "pow", 2},
    {Op::Maximum, "maximum", 2},   {Op::Minimum, "minimum", 2}, {Op::Eq, "eq", 2},
    {Op::Ne, "ne", 2},             {Op::Lt, "lt", 2},           {Op::Le, "le", 2},
    {Op::Gt, "gt", 2},             {Op::Ge, "ge", 2},           {Op::And, "and", 2},
    {Op::Or, "or", 2},             {Op::Where, "where", 3},     {Op::Clamp, "clamp", 3},
    {Op::Sum, "sum", 1},           {Op::Max, "max", 1},         {Op::Min, "min", 1},
    {Op::Gather, "gather", -1},    {Op::Mean, "mean", 1},       {Op::Softmax, "softmax", 1},
    {Op::LogSumExp, "logsumexp", 1}, {Op::DivOrZero, "div_or_zero", 2},
};
const OpInfo& info(Op op) {
  for (const auto& i : kOps)
    if (i.op == op) return i;
  return kOps[0];
}
}  // namespace

const char* op_name(Op op) { return info(op).name; }
int op_arity(Op op) { return info(op).arity; }
bool is_unary(Op op) { return op >= Op::Neg && op <= Op::Cast; }
bool is_binary(Op op) { return (op >= Op::Add && op <= Op::Or) || op == Op::DivOrZero; }
bool is_reduction(Op op) { return op == Op::Sum || op == Op::Max || op == Op::Min; }
bool is_sugar(Op op) { return op == Op::Mean || op == Op::Softmax || op == Op::LogSumExp; }

DimSet dimset_union(const DimSet& a, const DimSet& b) {
  DimSet r;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(r));
  return r;
}
DimSet dimset_minus(const DimSet& a, const DimSet& b) {
  DimSet r;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(r));
  return r;
}
bool dimset_contains(const DimSet& a, int d) { return std::binary_search(a.begin(), a.end(), d); }
bool dimset_subset(const DimSet& sub, const DimSet& super) {
  return std::includes(super.begin(), super.end(), sub.begin(), sub.end());
}

bool Node::same_structure(const Node& o) const {
  return op == o.op && type == o.type && dims == o.dims && args == o.args &&
         std::memcmp(&value, &o.value, sizeof value) == 0 && param == o.param && dim == o.dim &&
         reduce == o.reduce;
}

int Program::find_dim(std::string_view n) const {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] == n) return static_cast<int>(i);
  return -1;
}
int Program::find_param(std::string_view n) const {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name == n) return static_cast<int>(i);
  return -1;
}

std::string Program::dim_list(const std::vector<int>& ids) const {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ", ";
    s += dims[ids[i]];
  }
  return s + "]";
}

uint64_t Program::hash() const {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : str()) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

bool Program::operator==(const Program& o) const {
  if (name != o.name || dims != o.dims || params.size() != o.params.size() ||
      nodes.size() != o.nodes.size() || outputs.size() != o.outputs.size())
    return false;
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name != o.params[i].name || params[i].type != o.params[i].type ||
        params[i].dims != o.params[i].dims)
      return false;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!nodes[i].same_structure(o.nodes[i])) return false;
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].name != o.outputs[i].name || outputs[i].type != o.outputs[i].type ||
        outputs[i].dims != o.outputs[i].dims || outputs[i].node != o.outputs[i].node)
      return false;
  return true;
}

}  // namespace flashgen
