// split_clusters: lowering's one plan-level decision. A tensor-core kernel whose softmax groups
// fall into independent clusters (a group, the score contractions it reads and the accumulators
// it rescales or feeds; groups sharing a score or an accumulator are one cluster) may run as a
// kernel per cluster, where its accumulators do not fit one kernel together: its value columns
// split (diff_attn at d = 128, e = 256: 4 chunks of 64 columns, each recomputing both scores),
// or it stays on mma.sync where each cluster alone would take wgmma (diff_attn d = 64, e = 128
// on Hopper).
// cluster_cuts names the epilogue values that carry every cluster but the last into the rest
// of the kernel (diff_attn: p1·v, normalized); materialized, they make fusion put that cluster
// in a kernel of its own, which writes them, and leave the last cluster's kernel to read them in
// its epilogue. compile_program (compiler/pipeline.cpp) plans and lowers the program again with
// them and keeps the kernels per cluster where cluster_split_pays (their product_cost at most
// kClusterSplitPays of the one kernel's, no kernel more on the element path).
// Preconditions: a lowered plan (lower_cuda). Test: tests/lower/lower_test.cpp
// (Lower.ClustersWhoseAccumulatorsDoNotFitTogetherRunAsKernelsOfTheirOwn), on the GPU
// tests/gpu/cuda_examples_test.cpp (every example, diff_attn at e = 2d among them).
#include <algorithm>
#include <functional>
#include <numeric>
#include <set>

#include "lower/lower.h"

namespace flashgen {

namespace {

std::string S(int64_t v) { return std::to_string(v); }

// Union-find over cluster members (small: a kernel's groups, scores and accumulators).
struct Clusters {
  std::map<int, int> parent;
  int find(int x) {
    auto it = parent.find(x);
    if (it == parent.end()) return parent[x] = x;
    return it->second == x ? x : it->second = find(it->second);
  }
  void join(int a, int b) { parent[find(a)] = find(b); }
};

}  // namespace

std::vector<Materialize> cluster_cuts(const Plan& plan, const LoweredCuda& lowered) {
  std::vector<Materialize> cuts;
  const Program& p = plan.program;
  for (const LoweredKernel& lk : lowered.kernels) {
    if (lk.path != LoweredKernel::Path::tensor_core) continue;
    const TensorCoreKernel& tc = lk.tensor_core;
    const Sm80Launch& la = tc.launch;
    if (tc.groups.size() < 2) continue;
    const PlanKernel& k = plan.kernels[lk.plan_kernel];
    // Members, by node id; group g by its own key, -1 - g (a plain group has no max node, and
    // may have no row sum).
    Clusters uf;
    std::vector<int> group_key;
    for (size_t gi = 0; gi < tc.groups.size(); ++gi) {
      const TensorCoreKernel::Group& g = tc.groups[gi];
      const int key = -1 - static_cast<int>(gi);
      group_key.push_back(key);
      if (g.max_node >= 0) uf.join(g.max_node, key);
      uf.find(key);
      for (int s : g.sums) uf.join(s, key);
      // the scores its argument reads
      std::set<int> seen;
      std::function<void(int)> walk = [&](int id) {
        if (!seen.insert(id).second) return;
        for (const TensorCoreKernel::Score& sc : tc.scores)
          if (sc.node == id) uf.join(id, key);
        for (int a : p.nodes[id].args) walk(a);
      };
      walk(g.arg);
    }
    for (const TensorCoreKernel::Acc& a : tc.pv) uf.join(a.node, group_key.at(a.group));
    for (const Accumulator& acc : k.accs)
      for (int m : acc.rescale_by) uf.join(acc.node, m);
    std::vector<int> roots;  // clusters in group order
    for (int key : group_key)
      if (std::find(roots.begin(), roots.end(), uf.find(key)) == roots.end())
        roots.push_back(uf.find(key));
    if (roots.size() < 2) continue;
    const int keep = roots.back();
    // The clusters each epilogue value depends on (accumulators: their own).
    std::map<int, std::set<int>> deps;
    std::set<int> acc_nodes;
    for (const Accumulator& acc : k.accs) {
      acc_nodes.insert(acc.node);
      deps[acc.node] = {uf.find(acc.node)};
    }
    std::vector<int> epilogue;
    for (const PlanValue& v : k.values) {
      if (v.phase != Phase::Epilogue || acc_nodes.count(v.node)) continue;
      epilogue.push_back(v.node);
      std::set<int>& d = deps[v.node];
      if (v.load_buffer >= 0) continue;
      for (int a : p.nodes[v.node].args) {
        auto it = deps.find(a);
        if (it != deps.end()) d.insert(it->second.begin(), it->second.end());
      }
    }
    std::set<int> outputs;
    for (int b : k.writes) outputs.insert(plan.buffers[b].node);
    // A cut: a value of one cluster other than the last that an output is, or that a value of
    // other clusters reads (an accumulator itself too: its value is defined by its own max).
    std::map<int, std::set<int>> kernel_cuts;  // cluster -> its cuts
    auto single = [&](int id) {
      const std::set<int>& d = deps[id];
      return d.size() == 1 && *d.begin() != keep;
    };
    auto cut = [&](int id) { kernel_cuts[*deps[id].begin()].insert(id); };
    for (int id : epilogue) {
      if (single(id) && outputs.count(id)) cut(id);
      if (deps[id].size() < 2) continue;
      for (int a : p.nodes[id].args)
        if (deps.count(a) && single(a)) cut(a);
    }
    for (int id : acc_nodes)
      if (single(id) && outputs.count(id)) cut(id);
    // a group by its max node, or a plain group by its weights
    auto name = [&](size_t g) {
      return "%" + S(tc.groups[g].max_node >= 0 ? tc.groups[g].max_node : tc.groups[g].arg);
    };
    // what keeping them together costs
    const std::string together =
        la.value_split > 1
            ? "the value columns split in " + S(la.value_split) + " chunks of " +
                  S(la.value_cols) + " (" + la.value_split_why +
                  "), each computing every score again"
            : "the kernel runs " + la.products_why;
    // one kernel per moved cluster, whatever the dims of its cuts (an output per row beside
    // values per row and value column)
    for (const auto& [cluster, ids] : kernel_cuts) {
      std::string groups;
      int moved = 0;
      for (size_t g = 0; g < tc.groups.size(); ++g)
        if (uf.find(group_key[g]) == cluster) {
          groups += (groups.empty() ? "" : ", ") + name(g);
          ++moved;
        }
      cuts.push_back(
          {std::vector<int>(ids.begin(), ids.end()),
           std::string(moved > 1 ? "the groups " : "the group ") + groups +
               " and the accumulators they feed run apart from group " +
               name(tc.groups.size() - 1) +
               " (a kernel per cluster): together " + together});
    }
  }
  return cuts;
}

double product_cost(const LoweredCuda& lowered) {
  double cost = 0;
  for (const LoweredKernel& lk : lowered.kernels) {
    if (lk.path != LoweredKernel::Path::tensor_core) continue;
    const Sm80Launch& la = lk.tensor_core.launch;
    const double macs = static_cast<double>(la.value_split) * la.num_scores * la.head_dim +
                        static_cast<double>(la.num_acc) * la.value_dim;
    cost += macs / (lowered.target == Target::cuda_sm90 && !la.wgmma ? kMmaSyncRateOnSm90 : 1.0);
  }
  return cost;
}

int64_t few_key_reads(const LoweredCuda& lowered) {
  int64_t reads = 0;
  for (const LoweredKernel& lk : lowered.kernels) {
    if (lk.path != LoweredKernel::Path::tensor_core) continue;
    const TensorCoreKernel& tc = lk.tensor_core;
    reads += tc.launch.few_value_split * static_cast<int64_t>(tc.scores.size()) * tc.D +
             static_cast<int64_t>(tc.vbufs.size()) * tc.DV;
  }
  return reads;
}

bool decode_runs_one_kernel(const LoweredCuda::ClusterSplit& split, int64_t rows) {
  return split.split_cost > 0 && rows <= KeySplit::kFewRows &&
         split.fused_few_reads < split.split_few_reads;
}

bool cluster_split_pays(const LoweredCuda& fused, const LoweredCuda& split) {
  auto elements = [](const LoweredCuda& l) {
    return std::count_if(l.kernels.begin(), l.kernels.end(), [](const LoweredKernel& k) {
      return k.path == LoweredKernel::Path::element;
    });
  };
  // (a relative tolerance: the bound may hold with equality, as at diff_attn d = e = 128)
  return elements(split) <= elements(fused) &&
         product_cost(split) <= kClusterSplitPays * product_cost(fused) * (1 + 1e-9);
}

}  // namespace flashgen
