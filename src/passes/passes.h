// The program-to-program passes of the compiler (each in its own file; see the file headers).
//
//   canonicalize     lower_sugar.cpp + fold_constants.cpp: sugar -> primitives, constant folding
//   online_rewrite   online_rewrite.cpp: every exp(a*(y - max(y)) + c) / exp2(...) brought to
//                    exp(c) * exp(z - safe(max(z))), then reductions over a dim split over +/-
//                    (only where that reaches an exp factor) and freed of factors invariant in
//                    that dim, so dependent reductions take the one-pass form
//                    sum(f * exp(x - max(x))) that the planner streams online
//
// Every pass returns a new Program equal in meaning (the reference evaluator gives the same
// results on it; tests/passes/passes_test.cpp checks that on random inputs).
#pragma once

#include <functional>
#include <set>

#include "flashgen/builder.h"
#include "flashgen/ir.h"

namespace flashgen {

Program lower_sugar(const Program& p);
Program fold_constants(const Program& p);
// lower_sugar then fold_constants.
Program canonicalize(const Program& p);
// distribute_values: also split a float + or - of values computed per key under the exp,
// sum(e * (v + c)) = sum(e * v) + sum(e * c), for targets whose fast kernels take plain values
// only (CUDA's tensor cores); the CPU computes such a value per key as written.
Program online_rewrite(const Program& p, bool distribute_values = true);

// partial_reductions.cpp: each Sum, Max or Min X over dims H of the grid of a kernel
// of outputs or of materialized values (`kernels`: the program fused as it is), cut in two where
// the partial P (X over the rest: the kernel's streamed dim, or nothing) lies on that grid (and
// dims the kernel stores whole, as o's e), the kernel can compute it and none of its roots needs
// X: P, and X = the same reduction of P over H. `partials`: the partials' node ids in
// `program`, to store with that kernel's roots (`kernel`: its index in `kernels`; `fresh`: P
// is a fresh accumulator, see below); `why`: each one's reason; `ids`: each node of `p` in
// `program` (-1 where gone). At a kernel of materialized values only fresh partials are cut.
struct OutputKernel {
  std::vector<int> roots;  // the nodes it stores
  DimSet grid;             // its grid (sorted)
  DimSet stored_whole;     // dims it holds whole that its roots are over (o's value dim e)
  int red = -1, row = -1;  // its streamed dim and row dim
  std::string what;        // what it stores, for the reasons ("output 'o'")
  bool values = false;     // its roots are values fusion materializes, not outputs
};
struct PartialReductions {
  Program program;
  std::vector<int> partials;
  std::vector<int> kernel;
  std::vector<bool> fresh;  // P reduces over R values that need nothing reduced over R
  std::vector<std::string> why;
  std::vector<int> ids;
};
PartialReductions partial_reductions(const Program& p, const std::vector<OutputKernel>& kernels);

// Rebuilds `p` node by node through a fresh builder. `fn(b, old_id, args)` returns the new node
// id for old node `old_id` given its already-mapped args, or -1 to copy the node unchanged.
// final_ids (optional): the id in the result of each node id of the builder that `fn` was given
// (-1 for a node no output needs); old_ids (optional): the id in the result of each node of `p`
// (-1 likewise).
using RewriteFn = std::function<int(ProgramBuilder& b, int old_id, const std::vector<int>& args)>;
Program rebuild(const Program& p, const RewriteFn& fn, std::vector<int>* final_ids = nullptr,
                std::vector<int>* old_ids = nullptr);

// Helpers for passes: the node "where(M == -inf, 0, M)" that makes exp(x - M) safe when every
// x is -inf (the canonical softmax/logsumexp form), and its recognizer.
int make_safe_max(ProgramBuilder& b, int max_node);
// If `id` is where(eq(M, -inf), 0, M), returns M; else -1.
int match_safe_max(const Program& p, int id);
bool is_const(const Program& p, int id, double v);
// `id` and every node it depends on, ordered by id (a topological order).
// `stop(n)` true: n is in the closure, what it is computed from is not.
std::set<int> closure_of(const Program& p, int id,
                         const std::function<bool(int)>& stop = nullptr);
// The dim each index of a data read stands at: a parameter read by name, its dims; a gather, the
// dim of each index that is a plain dim index (doc[n]: n) and -1 for any other index.
std::vector<int> read_dims(const Program& p, int id);

}  // namespace flashgen
