// The public C++ builder: constructs the same IR as the .attn frontend, without text.
//
//   flashgen::ProgramBuilder b("causal");
//   auto q = b.param("q", DType::bf16, {"b", "h", "m", "d"});
//   auto k = b.param("k", DType::bf16, {"b", "h", "n", "d"});
//   auto v = b.param("v", DType::bf16, {"b", "h", "n", "e"});
//   auto s = b.sum(q * k, {"d"}) / b.sqrt(b.size("d"));
//   s = b.where(b.index("n") <= b.index("m"), s, -b.inf());
//   b.output("o", DType::bf16, {"b", "h", "m", "e"}, b.sum(b.softmax(s, "n") * v, {"n"}));
//   flashgen::Program p = b.build();
//
// Every call checks dimensions and types as docs/language.md says and throws ProgramError (with the
// SourceLoc passed in, if any) on a violation. The frontend's parser builds programs through
// this class, so the two paths cannot disagree. Equal sub-expressions are shared (hash-consing).
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "flashgen/error.h"
#include "flashgen/ir.h"

namespace flashgen {

class ProgramBuilder;

// The longest chain of operations a program may contain (a value computed from a value computed
// from ... ): `x + x + ... + x` with more terms, or more chained statements `a = a * x`, is a
// ProgramError at the operation that crosses it. The compiler's stages walk values recursively,
// so the limit keeps their stack use (and the generated code) bounded.
inline constexpr int kMaxValueDepth = 1000;

// A handle to a node under construction. Cheap to copy; valid while its builder lives.
struct Value {
  ProgramBuilder* builder = nullptr;
  int id = -1;
};

class ProgramBuilder {
 public:
  explicit ProgramBuilder(std::string name, SourceLoc loc = {});

  // Declarations ------------------------------------------------------------------------------
  // Declares a parameter (and any new dimension names in `dims`) and returns a read of it.
  Value param(const std::string& name, DType type, const std::vector<std::string>& dims,
              SourceLoc loc = {});
  // Declares an output; its dims (memory order) must equal the value's dimension set.
  void output(const std::string& name, DType type, const std::vector<std::string>& dims,
              Value v, SourceLoc loc = {});

  // Leaves --------------------------------------------------------------------------------------
  Value read(const std::string& param, SourceLoc loc = {});  // a declared parameter
  Value index(const std::string& dim, SourceLoc loc = {});
  Value size(const std::string& dim, SourceLoc loc = {});
  Value constant(double v, DType type = DType::f32, SourceLoc loc = {});
  Value inf(SourceLoc loc = {}) { return constant(1.0 / 0.0, DType::f32, loc); }

  // Element-wise ----------------------------------------------------------------------------------
  Value unary(Op op, Value a, SourceLoc loc = {});
  Value binary(Op op, Value a, Value b, SourceLoc loc = {});
  Value where(Value c, Value a, Value b, SourceLoc loc = {});
  Value clamp(Value x, Value lo, Value hi, SourceLoc loc = {});
  Value cast(Value a, DType to, SourceLoc loc = {});
  Value exp(Value a) { return unary(Op::Exp, a); }
  Value log(Value a) { return unary(Op::Log, a); }
  Value sqrt(Value a) { return unary(Op::Sqrt, a); }
  Value tanh(Value a) { return unary(Op::Tanh, a); }
  Value sigmoid(Value a) { return unary(Op::Sigmoid, a); }

  // Reductions and sugar ------------------------------------------------------------------------
  Value reduce(Op op, Value a, const std::vector<std::string>& dims, SourceLoc loc = {});
  Value sum(Value a, const std::vector<std::string>& dims) { return reduce(Op::Sum, a, dims); }
  Value max(Value a, const std::vector<std::string>& dims) { return reduce(Op::Max, a, dims); }
  Value min(Value a, const std::vector<std::string>& dims) { return reduce(Op::Min, a, dims); }
  Value mean(Value a, const std::vector<std::string>& dims) { return reduce(Op::Mean, a, dims); }
  Value softmax(Value a, const std::string& dim) { return reduce(Op::Softmax, a, {dim}); }
  Value logsumexp(Value a, const std::string& dim) { return reduce(Op::LogSumExp, a, {dim}); }

  // Indexing: param[idx...], one integer index expression per dimension of the parameter.
  Value gather(const std::string& param, const std::vector<Value>& idx, SourceLoc loc = {});

  // Low level, used by passes: adds a node whose dims/type the caller has computed (still
  // hash-consed; args must already exist). No checking.
  int add_node(Node n);
  const Node& node(int id) const { return prog_.nodes[id]; }
  const Program& program() const { return prog_; }
  // Starts from an existing program's declarations (dims, params) with no nodes/outputs.
  static ProgramBuilder with_declarations_of(const Program& p);

  // Finishes the program; checks it has at least one output.
  // final_ids (optional): for each node id of this builder, its id in the built program (-1
  // for a node no output needs).
  Program build(std::vector<int>* final_ids = nullptr);

 private:
  Value make(Node n);
  void own(Value v) const;  // throws unless v is a node of this builder
  int dim_or_throw(const std::string& name, SourceLoc loc) const;
  Program prog_;
  std::vector<int> depth_;  // per node: the longest chain of operations ending at it
  int depth_limit_ = kMaxValueDepth;
  std::map<std::tuple<int, int, int, int, std::vector<int>, std::vector<int>, uint64_t>, int>
      cse_;
};

// Operators on Values (same builder). Literals convert through the builder's constant().
Value operator+(Value a, Value b);
Value operator-(Value a, Value b);
Value operator*(Value a, Value b);
Value operator/(Value a, Value b);
Value operator%(Value a, Value b);
Value operator-(Value a);
Value operator==(Value a, Value b);
Value operator!=(Value a, Value b);
Value operator<(Value a, Value b);
Value operator<=(Value a, Value b);
Value operator>(Value a, Value b);
Value operator>=(Value a, Value b);
Value operator&&(Value a, Value b);
Value operator||(Value a, Value b);
Value operator!(Value a);
Value operator+(Value a, double b);
Value operator-(Value a, double b);
Value operator*(Value a, double b);
Value operator/(Value a, double b);
Value operator+(double a, Value b);
Value operator-(double a, Value b);
Value operator*(double a, Value b);
Value operator/(double a, Value b);

}  // namespace flashgen
