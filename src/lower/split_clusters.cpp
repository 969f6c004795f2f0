// split_clusters: lowering's plan-level decision for clusters of accumulators. A kernel whose
// accumulators fall into independent clusters (online sums with the maxima that rescale them,
// and accumulators whose arguments read one score contraction: a softmax group with its P.V
// sums, or a plain group) may run as a kernel per cluster, where they do not fit one kernel
// together: the template does not take them all (three softmaxes: the element path), its value
// columns split (diff_attn at d = 128, e = 256: 4 chunks of 64 columns, each recomputing both
// scores), or it stays on mma.sync where each cluster alone would take wgmma (diff_attn d = 64,
// e = 128 on Hopper).
// cluster_cuts names the epilogue values that carry every cluster but the last into the rest
// of the kernel (diff_attn: p1·v, normalized); materialized, they make fusion put that cluster
// in a kernel of its own, which writes them, and leave the last cluster's kernel to read them in
// its epilogue. compile_program (compiler/pipeline.cpp) plans and lowers the program again with
// them and keeps the kernels per cluster where cluster_split_pays (fewer kernels on the element
// path, or as many and their product_cost at most kClusterSplitPays of the one kernel's).
// Preconditions: a lowered plan (lower_cuda). Test: tests/lower/lower_test.cpp
// (Lower.ClustersWhoseAccumulatorsDoNotFitTogetherRunAsKernelsOfTheirOwn), on the GPU
// tests/gpu/cuda_examples_test.cpp (every example, diff_attn at e = 2d among them).
#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

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
    const PlanKernel& k = plan.kernels[lk.plan_kernel];
    if (k.red_dim < 0 || k.accs.size() < 2) continue;
    // Clusters of the kernel's accumulators: an online sum joins the maxima it is rescaled by,
    // and accumulators whose arguments read one score contraction (a sum over eliminated dims
    // of a product of two loads: PlanValue::contraction) join through it.
    Clusters uf;
    std::set<int> acc_nodes, with_score;
    for (const Accumulator& acc : k.accs) acc_nodes.insert(acc.node);
    for (const Accumulator& acc : k.accs) {
      uf.find(acc.node);
      for (int m : acc.rescale_by) uf.join(acc.node, m);
      std::set<int> seen;
      std::function<void(int)> walk = [&](int id) {
        if (!seen.insert(id).second) return;
        const PlanValue* v = k.value(id);
        if (!v || v->load_buffer >= 0) return;
        if (v->contraction) {
          uf.join(acc.node, id);
          with_score.insert(acc.node);
          return;
        }
        for (int a : p.nodes[id].args)
          if (!acc_nodes.count(a)) walk(a);
      };
      for (int a : p.nodes[acc.node].args) walk(a);
    }
    // the clusters that read a score, in the order of their first accumulator; accumulators of
    // no score (a count of keys) stay with the last, whose kernel reads the cuts
    std::vector<int> roots;
    for (const Accumulator& acc : k.accs) {
      const int r = uf.find(acc.node);
      bool scored = false;
      for (int x : with_score) scored = scored || uf.find(x) == r;
      if (scored && std::find(roots.begin(), roots.end(), r) == roots.end()) roots.push_back(r);
    }
    if (roots.size() < 2) continue;
    const int keep = roots.back();
    auto cluster_of = [&](int acc) {
      const int r = uf.find(acc);
      return std::find(roots.begin(), roots.end(), r) == roots.end() ? keep : r;
    };
    // The clusters each epilogue value depends on (accumulators: their own).
    std::map<int, std::set<int>> deps;
    for (int id : acc_nodes) deps[id] = {cluster_of(id)};
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
    // (a bool or integer value read by another cluster is cut at its float arguments of the
    // same cluster instead: the tensor-core path stores float intermediates only)
    std::function<void(int)> cut = [&](int id) {
      const int c = *deps[id].begin();
      if (is_float(p.nodes[id].type) || acc_nodes.count(id) || outputs.count(id)) {
        kernel_cuts[c].insert(id);
        return;
      }
      for (int a : p.nodes[id].args)
        if (deps.count(a) && deps[a] == std::set<int>{c}) cut(a);
    };
    for (int id : epilogue) {
      if (single(id) && outputs.count(id)) cut(id);
      if (deps[id].size() < 2) continue;
      for (int a : p.nodes[id].args)
        if (deps.count(a) && single(a)) cut(a);
    }
    for (int id : acc_nodes)
      if (single(id) && outputs.count(id)) cut(id);
    // a cluster by its running maxima (softmax groups), or its first accumulator
    auto name = [&](int cluster) {
      std::string s;
      for (const Accumulator& acc : k.accs)
        if (acc.op == Op::Max && cluster_of(acc.node) == cluster)
          s += (s.empty() ? "%" : ", %") + S(acc.node);
      if (!s.empty()) return s;
      for (const Accumulator& acc : k.accs)
        if (cluster_of(acc.node) == cluster) return "%" + S(acc.node);
      return s;
    };
    // what keeping them together costs
    std::string together = "the kernel takes the element path (" + lk.why + ")";
    if (lk.path == LoweredKernel::Path::tensor_core) {
      const Sm80Launch& la = lk.tensor_core.launch;
      together = la.value_split > 1
                     ? "the value columns split in " + S(la.value_split) + " chunks of " +
                           S(la.value_cols) + " (" + la.value_split_why +
                           "), each computing every score again"
                     : la.products_why.empty() ? "the kernel holds every accumulator"
                                               : "the kernel runs " + la.products_why;
    }
    // one kernel per moved cluster, whatever the dims of its cuts (an output per row beside
    // values per row and value column)
    for (const auto& [cluster, ids] : kernel_cuts)
      cuts.push_back({std::vector<int>(ids.begin(), ids.end()),
                      "the accumulators of " + name(cluster) + " run apart from those of " +
                          name(keep) + " (a kernel per cluster): together " + together});
  }
  return cuts;
}

double product_cost(const LoweredCuda& lowered) {
  double cost = 0;
  for (const LoweredKernel& lk : lowered.kernels) {
    if (lk.path != LoweredKernel::Path::tensor_core) continue;
    const Sm80Launch& la = lk.tensor_core.launch;
    const double macs = static_cast<double>(la.value_split) * la.score_dims +
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
         split.fused_element_kernels <= split.split_element_kernels &&
         split.fused_few_reads < split.split_few_reads;
}

namespace {
int elements(const LoweredCuda& l) { return kernels_on_path(l, LoweredKernel::Path::element); }
}  // namespace

LoweredCuda::ClusterSplit cluster_split_of(const Plan& split_plan, const LoweredCuda& fused,
                                           const LoweredCuda& split) {
  LoweredCuda::ClusterSplit s{product_cost(fused), product_cost(split), few_key_reads(fused),
                              few_key_reads(split), elements(fused), elements(split), -1};
  for (const LoweredKernel& lk : split.kernels)
    if (lk.path == LoweredKernel::Path::tensor_core)
      s.row_dim = split_plan.kernels[lk.plan_kernel].row_dim;
  return s;
}

std::string cluster_split_text(const LoweredCuda::ClusterSplit& cs, const Plan& plan,
                               Target target) {
  std::ostringstream os;
  if (cs.split_cost <= 0) return "";
  if (cs.fused_element_kernels > cs.split_element_kernels) {
    os << cs.fused_element_kernels - cs.split_element_kernels
       << " kernel(s) fewer on the element path than in one kernel (the tensor-core template "
          "takes each cluster)";
    return os.str();
  }
  os << cs.split_cost << " multiply-adds a (row, key) pair (product_cost) against "
     << cs.fused_cost << " in one kernel"
     << (target == Target::cuda_sm90 ? " (mma.sync counted at its rate against wgmma's)" : "")
     << "; decode calls (at most " << KeySplit::kFewRows << " rows of "
     << plan.program.dims.at(cs.row_dim) << ") read " << cs.split_few_reads
     << " K and V elements a key against " << cs.fused_few_reads << " in one kernel"
     << (decode_runs_one_kernel(cs, 1) ? ", and run the one kernel" : "");
  return os.str();
}

bool cluster_split_pays(const LoweredCuda& fused, const LoweredCuda& split) {
  // fewer kernels on the element path (a kernel of three softmaxes, two per cluster at most)
  if (elements(split) != elements(fused)) return elements(split) < elements(fused);
  // (a relative tolerance: the bound may hold with equality, as at diff_attn d = e = 128)
  return product_cost(split) <= kClusterSplitPays * product_cost(fused) * (1 + 1e-9);
}

}  // namespace flashgen
