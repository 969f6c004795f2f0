// The C-like element emitter shared by every target: turns the program's element code (score
// expressions, masks, gathers, epilogues) into C expressions, given a context that says how a
// kernel skeleton names indices, local arrays, parameter reads and loads. Targets differ only
// through TargetTable entries and the context callbacks.
#pragma once

#include <functional>
#include <map>
#include <optional>
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
  // C expression of a checked gather (node `node`) of `param` at index expressions (reports
  // out of range).
  std::function<std::string(int node, int param, const std::vector<std::string>& idx)> gather;
  // C expression reading a materialized intermediate (buffer) for `node`.
  std::function<std::string(int buffer, int node)> load;
  int assume_true = -1;  // a bool node known to be true here (full tiles)
  // Optional: a C expression holding `node`'s value computed once outside the element loop
  // (loop-invariant code), or "" to compute it here.
  std::function<std::string(int node)> hoisted;
  // Optional: a C expression holding 1.f / `node` computed once outside the element loop (the
  // reciprocal `x / node` multiplies by under fast math), or "": divisions by it multiply
  // (fg_div0_r: an infinite reciprocal there means `node` is 0).
  std::function<std::string(int node)> reciprocal;
  // C expression of the kernel's int64 error slot: `x % 0` is reported there as {2, 0, 0, node}
  // (fg_mod_e; the runtime raises the CallError).
  std::string err = "err";
};

// The C type a buffer of dtype `t` is stored as (bf16/f16 as raw uint16_t, f8 and bool as
// uint8_t, i32 as int: 32 bits on every target), and the element expression that reads one
// stored value `e` as the element code's type (float, int64_t or bool).
std::string storage_ctype(DType t);
// Outputs and intermediates the CPU kernels write, and intermediates CUDA element kernels write
// (lower/lower.h, device_storage; a tensor-core kernel's float ones are f32): int64 for integers
// (all 64 bits exact), double for everything else (run_cpu rounds outputs to the declared dtype;
// CUDA kernels store outputs in it: store_element).
std::string wide_storage(DType t);
std::string load_element(DType t, const std::string& e);

// The index positions of parameter `param` its gathers must range-check: all but those that
// every gather of it indexes with a plain index of the parameter's own dim there (`t[h, ...]`
// for `t: [h, r]`: the binding gives both the same extent, so that index is always in range).
// Both gather printers read it (codegen/loop_kernel.cpp, codegen/cuda/emit_sm80.cpp).
std::vector<bool> gather_checked_positions(const Program& p, int param);

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
  // Static bounds [lo, hi] of an integer node's values (indices lie in [0, max_extent)), or
  // nothing when unbounded in 64 bits. Computes the exact result range, before any i32 wrap.
  std::optional<std::pair<int64_t, int64_t>> int_range(int node) const;
  // An integer node whose own and operands' values provably fit 32 bits: computed in `int`.
  bool fits32(int node) const;

 private:
  const Plan& plan_;
  const PlanKernel& k_;
  const TargetTable& t_;
  mutable std::map<int, std::optional<std::pair<int64_t, int64_t>>> ranges_, exact_;
};

}  // namespace flashgen
