// The result of the fusion decision (passes/fuse.cpp): which nodes each kernel computes, its
// reduction dim, grid and eliminated dims, and which nodes must be materialized (and why).
// plan/build_plan.cpp turns it into PlanKernels.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "flashgen/ir.h"
#include "plan/plan.h"

namespace flashgen {

struct KernelGroup {
  std::vector<int> roots;        // nodes stored by this kernel
  std::vector<int> members;      // nodes computed (or loaded) here, topological
  std::vector<int> loads;        // materialized nodes read from memory
  int red = -1;                  // streamed reduction dim
  int row = -1;                  // tiled grid dim
  DimSet grid, elim;
  std::vector<Accumulator> accs;
  std::vector<int> online;       // body nodes that use a running max (computed after it)
  std::vector<std::string> notes;
};

struct Fusion {
  std::vector<KernelGroup> groups;        // in execution order
  std::map<int, std::string> materialized;  // node -> why it goes through memory
};

// Decides the kernels of a canonical, online-rewritten program. `materialize`: sets of nodes
// to materialize from the start, each set the roots of one kernel (whatever their dims),
// beside those fusion finds it must (grouped by dims). `one_kernel` (--strict): hold dims whole
// rather than materialize where both are possible (a reduction over heads of the attention's
// o, a softmax over keys inside a reduction over heads).
Fusion fuse(const Program& p, const std::vector<Materialize>& materialize = {},
            bool one_kernel = false);

}  // namespace flashgen
