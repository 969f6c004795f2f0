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

const char* op_name(Op op) { return op_def(op).name; }
int op_arity(Op op) { return op_def(op).arity; }
bool is_unary(Op op) {
  const OpDef& d = op_def(op);
  return d.arity == 1 && (d.kind == OpKind::unary || d.kind == OpKind::function);
}
bool is_binary(Op op) {
  const OpDef& d = op_def(op);
  return d.arity == 2 && (d.kind == OpKind::binary || d.kind == OpKind::function ||
                          d.kind == OpKind::internal);
}
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
DimSet dimset_intersect(const DimSet& a, const DimSet& b) {
  DimSet r;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(r));
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
