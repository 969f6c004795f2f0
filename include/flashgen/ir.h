// flashgen IR: a Program is a DAG of nodes over named dimension sets.
//
// Every node is a tensor value over a *set* of the program's dimensions (broadcast by name).
// Nodes are stored in topological order (a node's args always precede it) and are hash-consed
// by the builder, so structurally equal sub-expressions share one node and two programs built
// the same way compare equal node by node. The text form (`Program::str()`) is stable and is
// what golden tests compare; `Program::hash()` is a hash of it (the kernel cache keys on it).
//
// The sugar ops (Mean, Softmax, LogSumExp) stay as nodes until passes/canonicalize lowers them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flashgen {

// ---------------------------------------------------------------------------------------------
// Element types
enum class DType : uint8_t { f32, f16, bf16, f8e4m3, f8e5m2, i32, i64, boolean, f64 };

const char* dtype_name(DType t);  // "f32", ..., "bool"; f64 is internal (reference evaluator)
std::optional<DType> parse_dtype(std::string_view s);
bool is_float(DType t);
bool is_integer(DType t);  // i32, i64 (not bool)
int dtype_bytes(DType t);
// The type arithmetic runs in: bf16/f16/f8 promote to f32, others stay.
DType arithmetic_type(DType t);
// Result type of an arithmetic op on a and b (docs/language.md "Tensors, broadcasting and types").
DType promote(DType a, DType b);

// ---------------------------------------------------------------------------------------------
// Source locations (1-based; line 0 means "no location", e.g. built through the C++ API).
struct SourceLoc {
  int line = 0;
  int col = 0;
};

// ---------------------------------------------------------------------------------------------
// Operations
enum class Op : uint8_t {
  // Leaves
  Param,  // reads a whole parameter; `param` = index; dims = the parameter's dims
  Const,  // `value`; dims = {}
  Index,  // the index of dimension `dim` as an i64 value; dims = {dim}
  Size,   // the extent of dimension `dim` as an i64 scalar; dims = {}
  // Unary element-wise
  Neg, Not, Exp, Exp2, Log, Log2, Sqrt, Rsqrt, Tanh, Sigmoid, Relu, Abs, Floor, Ceil, Sin, Cos,
  Cast,  // to `type`
  // Binary element-wise
  Add, Sub, Mul, Div, Mod, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge, And, Or,
  // Ternary element-wise
  Where,  // (cond, a, b)
  Clamp,  // (x, lo, hi)
  // Reductions over `reduce` (the result loses those dims)
  Sum, Max, Min,
  // Indexing: reads parameter `param` at args[0..rank) (integer index expressions)
  Gather,
  // Sugar, lowered by canonicalize
  Mean,       // over `reduce`
  Softmax,    // over `reduce` (one dim); keeps the dims
  LogSumExp,  // over `reduce` (one dim)
  // Internal primitives introduced by canonicalize (not spelled in .attn source)
  DivOrZero,  // a / b, but 0 where b == 0 (softmax of an all -inf row is 0, never NaN)
};

// The op table (src/ir/op_table.cpp): one row per op, read by every consumer (the text form,
// the parser, the builder's type rules, scalar evaluation, the element emitter's C functions).
enum class OpKind : uint8_t {
  leaf,       // param, const, index, size
  unary,      // a prefix operator (-x, not x) or a cast
  function,   // an element-wise built-in spelled name(x) or name(x, y) in .attn
  binary,     // an infix operator
  ternary,    // where, clamp
  reduction,  // sum, max, min over dims
  gather,     // a parameter read at index expressions
  sugar,      // mean, softmax, logsumexp (lowered by canonicalize)
  internal,   // introduced by the passes, not spelled in .attn
};
// How the builder types an element-wise op and what it requires of its arguments.
enum class TypeRule : uint8_t {
  own,        // the op has its own rule in the builder (leaves, casts, where, reductions, ...)
  numeric,    // numbers; the promoted arithmetic type (integers stay integers)
  rounding,   // a number; its arithmetic type (floor of an integer is the integer itself)
  to_float,   // a float result: f32, or f64 for f64 (unary: integers and bools convert to f32;
              // pow: numbers only)
  division,   // numbers, not both integers; the promoted type
  integers,   // integers; the promoted type
  equality,   // two numbers or two bools; bool
  order,      // numbers; bool
  logic,      // bools; bool
};
struct OpDef {
  Op op;
  const char* name;    // the text form (IR printer, explain), e.g. "add", "sum", "softmax"
  const char* source;  // how .attn spells it ("+", "exp", "unary -"); "" when it cannot
  int arity;           // -1: variable (gather)
  OpKind kind;
  TypeRule type;
  const char* c_fn;            // the C function of float element code (cpu and cuda), or null
  double (*eval)(double);      // the f64 value of a unary op (reference, folding), or null
  // Costlier per element than a shared-memory read on a GPU: the special-function pipe
  // (transcendentals, square roots, division under fast math; a quarter of the FMA rate or
  // less) or a memory read (gather). Score code built on one is worth computing once per tile
  // diagonal or once per key of a tile (lower/lower_tensor_core.cpp, which takes a key's gather
  // by plain dim indices and a division by a per-block value for cheap).
  bool costly = false;
};
const OpDef& op_def(Op op);
std::vector<const OpDef*> op_defs();

const char* op_name(Op op);  // the spelling in the text form, e.g. "add", "sum", "softmax"
bool is_unary(Op op);
bool is_binary(Op op);
bool is_reduction(Op op);  // Sum, Max, Min (primitives)
bool is_sugar(Op op);      // Mean, Softmax, LogSumExp
int op_arity(Op op);       // -1 for Gather (variable)

// A set of dimension ids, sorted ascending, no duplicates.
using DimSet = std::vector<int>;
DimSet dimset_union(const DimSet& a, const DimSet& b);
DimSet dimset_minus(const DimSet& a, const DimSet& b);
DimSet dimset_intersect(const DimSet& a, const DimSet& b);
bool dimset_contains(const DimSet& a, int d);
bool dimset_subset(const DimSet& sub, const DimSet& super);

struct Node {
  Op op = Op::Const;
  DType type = DType::f32;
  DimSet dims;            // the value's dimension set
  std::vector<int> args;  // node ids, each < this node's id
  double value = 0;       // Const
  int param = -1;         // Param, Gather
  int dim = -1;           // Index, Size
  DimSet reduce;          // Sum/Max/Min/Mean/Softmax/LogSumExp
  SourceLoc loc;          // where it was written (not part of structural identity)

  bool same_structure(const Node& o) const;
};

struct Parameter {
  std::string name;
  DType type = DType::f32;
  std::vector<int> dims;  // memory order, outermost first
  SourceLoc loc;
};

struct Output {
  std::string name;
  DType type = DType::f32;
  std::vector<int> dims;  // memory order, outermost first; as a set equal to nodes[node].dims
  int node = -1;
  SourceLoc loc;
};

struct Program {
  std::string name;
  std::vector<std::string> dims;  // the program's dimensions, in order of first declaration
  std::vector<Parameter> params;
  std::vector<Node> nodes;  // topological order
  std::vector<Output> outputs;
  SourceLoc loc;

  int find_dim(std::string_view name) const;    // -1 if absent
  int find_param(std::string_view name) const;  // -1 if absent
  const Node& node(int id) const { return nodes[id]; }
  std::string dim_list(const std::vector<int>& ids) const;  // "[b, h, m]"

  // Stable text form (golden tests); see src/ir/printer.cpp for the grammar.
  std::string str() const;
  uint64_t hash() const;  // structural: FNV-1a of str()
  bool operator==(const Program& o) const;  // structural (ignores source locations)
};

}  // namespace flashgen
