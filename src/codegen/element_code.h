// The C-like element emitter shared by every target: turns the program's element code (score
// expressions, masks, gathers, epilogues) into C expressions, given a context that says how a
// kernel skeleton names indices, local arrays, parameter reads and loads. Targets differ only
// through TargetTable entries and the context callbacks.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "plan/plan.h"

namespace flashgen {

struct ElementContext {
  // C expression of the global index of `dim` at the current element.
  std::function<std::string(int dim)> index;
  // C expression of the extent of `dim`.
  std::function<std::string(int dim)> extent;
  // C expression reading the local array of a (non-inlined) value at the current element.
  std::function<std::string(int node)> local;
  // C expression reading parameter `param` at the given index expressions (already checked).
  std::function<std::string(int param, const std::vector<std::string>& idx)> param;
  // C expression of a checked gather of `param` at index expressions (reports out of range).
  std::function<std::string(int param, const std::vector<std::string>& idx)> gather;
  // C expression reading a materialized intermediate (buffer) for `node`.
  std::function<std::string(int buffer, int node)> load;
  int assume_true = -1;  // a bool node known to be true here (full tiles)
};

class ElementEmitter {
 public:
  ElementEmitter(const Plan& plan, const PlanKernel& k, const TargetTable& t)
      : plan_(plan), k_(k), t_(t) {}
  // The value of `node` at the current element (a local array read or an inline expansion).
  std::string value(int node, const ElementContext& c) const;
  // The node's own operation applied to its args' values (for computing a local array).
  std::string compute(int node, const ElementContext& c) const;
  // The C type of a node's values.
  std::string ctype(DType t) const;
  std::string literal(double v, DType t) const;

 private:
  const Plan& plan_;
  const PlanKernel& k_;
  const TargetTable& t_;
};

}  // namespace flashgen
