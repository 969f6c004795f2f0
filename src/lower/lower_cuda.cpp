// lower_cuda: each plan kernel to its lowered description (lower/lower.h): which path prints it
// and why, the tensor-core template's launch, or the element kernel's threads and workspace.
// Preconditions: a classified plan (compiler/pipeline.cpp runs this as the stage "lower").
// Test: tests/lower/lower_test.cpp.
#include "lower/lower.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "codegen/element_code.h"
#include "codegen/target.h"
#include "flashgen/error.h"

namespace flashgen {

const char* path_name(LoweredKernel::Path p) {
  return p == LoweredKernel::Path::tensor_core ? "tensor_core" : "element";
}

namespace {

// Parameters to store with the reduction dim innermost (ElementArray::layout): operands,
// through inlined casts, of a Mul summed over eliminated dims only into a value whose last
// local dim is the reduction dim.
std::set<int> transposed_loads(const Program& p, const PlanKernel& k) {
  std::set<int> out;
  if (k.red_dim < 0) return out;
  for (const PlanValue& v : k.values) {
    const Node& n = p.nodes[v.node];
    if (v.inlined || n.op != Op::Sum || dimset_contains(n.reduce, k.red_dim)) continue;
    if (v.local_dims.empty() || v.local_dims.back() != k.red_dim) continue;
    if (!dimset_subset(n.reduce, k.elim)) continue;
    const Node& m = p.nodes[n.args[0]];
    if (m.op != Op::Mul) continue;
    for (int a : m.args) {
      while (p.nodes[a].op == Op::Cast && k.value(a) && k.value(a)->inlined) a = p.nodes[a].args[0];
      const PlanValue* pv = k.value(a);
      if (!pv || pv->inlined || p.nodes[a].op != Op::Param || pv->load_buffer >= 0) continue;
      bool has_red = false, has_elim = false;
      for (int d : pv->local_dims) {
        has_red = has_red || d == k.red_dim;
        has_elim = has_elim || dimset_contains(k.elim, d);
      }
      if (has_red && has_elim) out.insert(a);
    }
  }
  return out;
}

}  // namespace

std::vector<ElementArray> element_arrays(const Plan& plan, const PlanKernel& k) {
  const TargetTable& T = target_table(Target::cuda_sm80);
  ElementEmitter em(plan, k, T);
  auto bytes = [](DType t) {
    if (t == DType::boolean) return 1;
    return is_integer(t) || t == DType::f64 ? 8 : 4;
  };
  const std::set<int> transposed = transposed_loads(plan.program, k);
  std::vector<ElementArray> out;
  for (const PlanValue& v : k.values) {
    if (v.inlined) continue;
    const DType t = plan.program.nodes[v.node].type;
    std::vector<int> layout = v.local_dims;
    if (transposed.count(v.node)) {
      layout.clear();
      for (int d : v.local_dims)
        if (d != k.red_dim) layout.push_back(d);
      layout.push_back(k.red_dim);
    }
    out.push_back({v.node, false, em.ctype(t), bytes(t), v.local_dims, layout});
  }
  for (const Accumulator& a : k.accs)
    for (int m : a.rescale_by) {
      bool seen = false;
      for (const ElementArray& e : out) seen = seen || (e.old_max && e.node == m);
      const std::vector<int>& dims = k.value(m)->local_dims;
      if (!seen) out.push_back({m, true, "float", 4, dims, dims});
    }
  return out;
}

std::vector<int> element_stored_direct(const Plan& plan, const PlanKernel& k) {
  const Program& p = plan.program;
  std::map<int, int> writes, reads;
  for (int b : k.writes) ++writes[plan.buffers[b].node];
  for (const PlanValue& v : k.values)
    for (int a : p.nodes[v.node].args) ++reads[a];
  if (k.tiles.mask >= 0) ++reads[k.tiles.mask];
  std::vector<int> out;
  for (const auto& [node, count] : writes) {
    const PlanValue* v = k.value(node);
    if (count != 1 || reads.count(node) || !v || v->inlined || v->load_buffer >= 0 ||
        v->phase == Phase::Body || is_reduction(p.nodes[node].op))
      continue;
    bool acc = false;
    for (const Accumulator& a : k.accs)
      acc = acc || a.node == node || std::find(a.rescale_by.begin(), a.rescale_by.end(), node) !=
                                         a.rescale_by.end();
    if (!acc) out.push_back(node);
  }
  return out;
}

int64_t element_workspace(const PlanKernel& k, const ElementLaunch& e,
                          const std::vector<int64_t>& extv, std::vector<int64_t>* offsets) {
  constexpr int64_t kLimit = int64_t{1} << 62;
  int64_t total = 0;
  if (offsets) offsets->clear();
  for (const ElementArray& a : e.arrays) {
    total = (total + 15) / 16 * 16;
    if (offsets) offsets->push_back(total);
    // (a point per thread: one element a point in registers; an array over local dims has
    // each thread's elements, element-major; a lanes kernel has every array there, a point's
    // slot each)
    if (e.thread_per_point && e.lane_dims.empty() && a.dims.empty()) continue;
    int64_t n = a.elem_bytes * (e.thread_per_point ? e.threads / lanes_for(e, extv) : 1);
    for (int d : a.dims) {
      const int64_t x = d == k.row_dim ? k.row_tile : d == k.red_dim ? k.red_tile : extv[d];
      if (x != 0 && n > kLimit / x) return -1;
      n *= x;
    }
    if (n > kLimit - total) return -1;
    total += n;
  }
  if (!e.thread_per_point || !e.lane_dims.empty()) {  // the block's reduction slots: one
                                                       // 8-byte partial a thread
    total = (total + 15) / 16 * 16;
    if (offsets) offsets->push_back(total);
    total += int64_t{8} * e.threads;
  }
  return (total + 15) / 16 * 16;
}

namespace {

// Why the tensor-core template cannot print kernel `ki`, or "" when it may try.
std::string template_precondition(const Plan& plan, int ki, const Extents& heads) {
  const PlanKernel& k = plan.kernels[ki];
  std::string missing;
  for (int d : k.elim)
    if (!heads.count(plan.program.dims[d]))
      missing += (missing.empty() ? "" : ", ") + plan.program.dims[d];
  if (!missing.empty())
    return "the extents of its head dims (" + missing +
           ") are not given, and the tensor-core template compiles them in";
  return "";
}

}  // namespace

LoweredCuda lower_cuda(const Plan& plan, Target target, const Extents& heads,
                       const SmemBudget& budget) {
  if (target == Target::cpu) throw BackendError("lower_cuda: target cpu is not a CUDA target");
  LoweredCuda out;
  out.target = target;
  for (int ki = 0; ki < plan.kernel_count(); ++ki) {
    const PlanKernel& k = plan.kernels[ki];
    LoweredKernel lk;
    lk.plan_kernel = ki;
    lk.entry = k.name;
    std::string why = template_precondition(plan, ki, heads);
    if (why.empty()) {
      try {
        TensorCoreKernel tc = lower_tensor_core(plan, ki, target, heads, budget);
        if (tc.launch.smem_bytes > budget.per_block) {
          why = "the tensor-core template needs " + std::to_string(tc.launch.smem_bytes) +
                " bytes of shared memory per block; the budget is " +
                std::to_string(budget.per_block);
        } else if (tc.launch.few_smem_bytes > budget.per_block) {  // (at its narrowest chunk)
          why = "the tensor-core template's few-rows kernel needs " +
                std::to_string(tc.launch.few_smem_bytes) +
                " bytes of shared memory per block; the budget is " +
                std::to_string(budget.per_block);
        } else {
          lk.path = LoweredKernel::Path::tensor_core;
          lk.entry = tc.launch.entry;
          lk.why = "the sm80 tensor-core template takes it";
          lk.tensor_core = std::move(tc);
        }
      } catch (const BackendError& e) {
        why = e.what();
      }
    }
    if (lk.path == LoweredKernel::Path::element) {
      lk.why = why;
      ElementLaunch& e = lk.element;
      e.arrays = element_arrays(plan, k);
      // A block spreads each value's elements over its threads: 256 when some array spans a
      // key tile or a head dim (hundreds of elements), else 64 (a row tile's 16 elements).
      // A kernel computes a point per thread where its arrays and stored values are all one
      // element per point, or where it has no key loop or row tile and every buffer it
      // stores has a grid dim innermost: a warp's threads then take adjacent points, and
      // their loads and stores of a point's whole dims (a norm's query heads r in
      // [b, g, r, m, e]) coalesce, where a block per point would read them a sector apart.
      bool wide = false, scalars = true;
      for (const ElementArray& a : e.arrays) {
        for (int d : a.dims) wide = wide || d == k.red_dim || dimset_contains(k.elim, d);
        scalars = scalars && a.dims.empty();
      }
      for (int b : k.writes) scalars = scalars && k.value(plan.buffers[b].node)->local_dims.empty();
      bool points_inner = k.red_dim < 0 && k.row_dim < 0 && !k.writes.empty();
      for (int b : k.writes) {
        const std::vector<int>& dims = plan.buffers[b].dims;
        points_inner = points_inner && !dims.empty() && dimset_contains(k.grid, dims.back());
      }
      e.thread_per_point = scalars || points_inner;
      e.threads = e.thread_per_point ? 128 : wide ? 256 : 64;
      // Lanes: a value of one element reduced over the point's whole dims (a mean over the
      // rows: thousands of terms a point, where the points alone are too few threads to
      // hide the loads' latency).
      if (points_inner) {
        for (const PlanValue& v : k.values) {
          const Node& n = plan.program.nodes[v.node];
          if (v.inlined || !v.local_dims.empty() || !is_reduction(n.op)) continue;
          e.lane_dims = dimset_union(e.lane_dims, n.reduce);
        }
        if (!e.lane_dims.empty()) e.threads = 256;
      }
      // (an output computed where it is stored needs no array; the shape above counts it)
      e.stored_direct = element_stored_direct(plan, k);
      std::erase_if(e.arrays, [&](const ElementArray& a) {
        return !a.old_max && std::find(e.stored_direct.begin(), e.stored_direct.end(), a.node) !=
                                 e.stored_direct.end();
      });
      e.blocks_per_sm = 2048 / e.threads;  // a full SM of threads, for the grid-stride loop
      e.smem_limit = budget.per_block;
    }
    out.kernels.push_back(std::move(lk));
  }
  out.storage = device_storage(plan, out.kernels);
  return out;
}

int lanes_for(const ElementLaunch& e, const std::vector<int64_t>& extv) {
  if (e.lane_dims.empty()) return 1;
  int64_t terms = 1;
  // (each factor and the product capped at 2^20: no overflow, and lanes stop at 32 long before)
  for (int d : e.lane_dims)
    terms = std::min<int64_t>(terms * std::min<int64_t>(std::max<int64_t>(extv[d], 1), 1 << 20),
                              1 << 20);
  int lanes = 1;
  while (lanes < 32 && 2 * lanes * 8 <= e.threads && 2 * lanes * kLaneTerms <= terms) lanes *= 2;
  return lanes;
}

int kernels_on_path(const LoweredCuda& lowered, LoweredKernel::Path path) {
  return static_cast<int>(std::count_if(lowered.kernels.begin(), lowered.kernels.end(),
                                        [path](const LoweredKernel& k) { return k.path == path; }));
}

DType intermediate_storage(DType t, bool tensor_core) {
  if (is_integer(t)) return DType::i64;
  return tensor_core && is_float(t) && dtype_bytes(t) <= 4 ? DType::f32 : DType::f64;
}

std::vector<DType> device_storage(const Plan& plan, const std::vector<LoweredKernel>& kernels) {
  std::vector<DType> storage;
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const PlanBuffer& B = plan.buffers[b];
    if (B.kind != PlanBuffer::Intermediate) {
      storage.push_back(B.type);
      continue;
    }
    bool tensor_core = false;  // a tensor-core kernel writes or reads it
    for (const LoweredKernel& lk : kernels) {
      const PlanKernel& k = plan.kernels[lk.plan_kernel];
      const bool uses = std::count(k.writes.begin(), k.writes.end(), static_cast<int>(b)) +
                        std::count(k.reads.begin(), k.reads.end(), static_cast<int>(b));
      tensor_core = tensor_core || (uses && lk.path == LoweredKernel::Path::tensor_core);
    }
    storage.push_back(intermediate_storage(B.type, tensor_core));
  }
  return storage;
}

namespace {
// The wgmma shapes of P.V: 128 value columns an instruction while they last (kWgmmaN = 128),
// then 64 (fg_attn_sm80.cuh, pv_step).
std::string pv_shapes(const Sm80Launch& la) {
  if (la.num_acc == 0) return "none (no accumulator)";
  if (la.wgmma_n != 128 || la.value_cols < 128) return "m64n64k16";
  return la.value_cols % 128 == 0 ? "m64n128k16" : "m64n128k16 and m64n64k16";
}
// " (score: masks %c, scale / %f, of %x)": a softmax group's score form, where it has steps.
std::string score_form_text(const Sm80Structure::Group& g) {
  if (g.score_steps.empty()) return "";
  std::string masks, scale;
  for (const Sm80Structure::ScoreStep& s : g.score_steps) {
    std::string n = "%";  // (appending: GCC 12's -Wrestrict misfires on "%" + a string)
    n += std::to_string(s.node);
    if (s.kind == Sm80Structure::ScoreStep::mask) masks += (masks.empty() ? "" : " ") + n;
    else scale += (s.kind == Sm80Structure::ScoreStep::divide ? " / " : " * ") + n;
  }
  return " (score:" + (masks.empty() ? "" : " masks " + masks + ",") +
         (scale.empty() ? "" : " scale" + scale + ",") + " of %" + std::to_string(g.score_rest) +
         ")";
}
}  // namespace

std::string LoweredCuda::str(const Plan& plan) const {
  const Program& p = plan.program;
  std::ostringstream os;
  os << "lowered for " << target_name(target) << "\n";
  if (cluster_split.split_cost > 0)
    os << "kernels per softmax cluster: " << cluster_split_text(cluster_split, plan, target)
       << "\n";
  std::string held;  // intermediates (device_storage)
  for (size_t b = 0; b < plan.buffers.size() && b < storage.size(); ++b)
    if (plan.buffers[b].kind == PlanBuffer::Intermediate)
      held += (held.empty() ? "" : ", ") + plan.buffers[b].name + " " + dtype_name(storage[b]);
  if (!held.empty()) os << "intermediates in device memory: " << held << "\n";
  auto dims_text = [&](const std::vector<int>& ds) {
    std::string s;
    for (int d : ds) s += (s.empty() ? "" : " * ") + p.dims[d];
    return s.empty() ? std::string("1") : s;
  };
  for (const LoweredKernel& lk : kernels) {
    const PlanKernel& k = plan.kernels[lk.plan_kernel];
    os << "kernel " << k.name << ": path " << path_name(lk.path) << ", entry " << lk.entry
       << "\n  why: " << lk.why << "\n";
    if (lk.path == LoweredKernel::Path::tensor_core) {
      const Sm80Launch& la = lk.tensor_core.launch;
      os << "  grid: x = ceil(" << p.dims[la.row_dim] << " / " << la.block_m << "), y*z = "
         << dims_text(la.par_dims);
      if (la.value_split > 1)
        os << " * " << la.value_split << " value-column chunks (" << la.value_split_why << ")";
      if (la.persistent)
        os << (la.items_differ
                   ? "; calls of more than " + std::to_string(KeySplit::kFewRows) + " rows: "
                   : std::string("; calls of short key loops: "))
           << (la.walk_entry.empty() ? la.walk_pipelined ? "the main build, pipelined, ping-pong"
                                                         : "the main build"
               : la.walk_entry + (la.walk_pipelined ? ", pipelined, ping-pong" : ""))
           << ", min(that, SMs * " << la.min_blocks
           << ") blocks, block b computing item b and then those it takes in order from a counter";
      os << "\n  products: "
         << (la.wgmma ? "wgmma (sm_90a), Q.K^T m64n" + std::to_string(la.wgmma_n) +
                            "k16, P.V " + pv_shapes(la) +
                            ", two warpgroups of 64 rows; the careful build by mma.sync"
                      : std::string("mma.sync m16n8k16"))
         << (la.products_why.empty() ? "" : "; " + la.products_why)
         << "\n  block: " << la.warps << " warps, " << la.rows_per_warp << " rows per warp, "
         << la.block_n << " keys per tile, " << la.smem_bytes << " bytes of shared memory, "
         << la.min_blocks << " blocks per SM at least\n";
      if (la.warp_specialized)
        os << "  warp specialized: " << la.warps - la.producer_warps
           << " compute warps, a producer warpgroup (each item's Q, then the key tiles), "
           << la.stages << " stages"
           << (la.q_buffers > 1 ? ", Q in " + std::to_string(la.q_buffers) +
                                      " buffers (the next item's loads during this one)"
                                : "")
           << (la.diag_copies > 1 && (!la.diagonal.empty() || !la.key_values.empty())
                   ? ", " + std::to_string(la.diag_copies) + " copies of the values per tile line"
                   : "")
           << (la.pipelined ? la.ping_pong ? "; pipelined, ping-pong" : "; pipelined" : "")
           << (la.scan_by_warps ? "; tile scan by warps, a span each" : "")
           << (la.producer_regs != Sm80Launch::kProducerRegsDefault
                   ? "; producer " + std::to_string(la.producer_regs) + " registers"
                   : "")
           << "\n";
      if (la.checks_read_scores)
        os << "  checks read the scores: a partial tile's score code only at real keys (" << p.dims[k.red_dim]
           << " below its extent)\n";
      if (la.clamp_keys)
        os << "  keys clamped: a padded key's score code runs at the last key, size("
           << p.dims[k.red_dim] << ") - 1 (it reads device memory by the key, or divides by a "
              "value over the key dim)\n";
      if (la.keep_pass)
        os << "  mask as a pass: the score code without the tile mask, the mask on a partial "
              "tile's elements after it\n";
      if (!la.tma.empty()) {
        os << "  tma:";
        for (size_t i = 0; i < la.tma.size(); ++i) {
          const Sm80Launch::TmaOperand& t = la.tma[i];
          os << (i ? "; " : " ") << plan.buffers[t.buffer].name << " [";
          for (size_t j = 0; j < t.dims.size(); ++j) os << (j ? ", " : "") << p.dims[t.dims[j]];
          os << "]" << (t.value_chunk ? " from the block's value chunk" : "");
        }
        os << " (5-dim maps, innermost first; cp.async for calls no map describes)\n";
      }
      os << "  head dims:";
      for (const auto& [n, e] : la.head_dims) os << " " << n << "=" << e;
      const TensorCoreKernel& tc = lk.tensor_core;
      if (tc.Dt != tc.D || tc.DVt != tc.DV)
        os << " (tiles padded to " << tc.Dt
           << (tc.vdim >= 0 ? " and " + std::to_string(tc.DVt) : std::string()) << " columns)";
      os << "; operands " << dtype_name(tc.elem) << "\n";
      if (!la.split.empty()) {
        os << "  pieces: " << la.pieces << " bf16 pieces of";
        for (const Sm80Launch::SplitOperand& o : la.split)
          os << " " << o.name << " (" << dtype_name(o.type) << ", Params buffer " << o.slot << ")";
        os << ", written by " << la.split_entry << " before the kernel; "
           << la.pieces * (la.pieces + 1) / 2 << " mma per product\n";
      }
      const Sm80Structure& st = la.structure;
      for (const Sm80Structure::Score& s : st.scores)
        os << "  score %" << s.node << " = " << plan.buffers[s.q_buffer].name << " . "
           << plan.buffers[s.k_buffer].name << " over " << p.dims[s.dim] << "\n";
      for (size_t g = 0; g < st.groups.size(); ++g) {
        if (st.groups[g].max_node < 0)
          os << "  group " << g << ": plain weights %" << st.groups[g].arg << " (no max), row sums";
        else
          os << "  group " << g << ": running " << (st.groups[g].negate ? "min" : "max") << " %"
             << st.groups[g].max_node << " of %"
             << st.groups[g].arg << score_form_text(st.groups[g])
             << (st.groups[g].bare ? " alone (no exponentials)" : "") << ", row sums";
        for (int s : st.groups[g].sums) os << " %" << s;
        if (st.groups[g].sums.empty()) os << " none";
        if (!st.groups[g].pv_weight.empty()) {
          os << (st.groups[g].weigh_sums ? ", P.V and row-sum weights" : ", P.V weights");
          for (int w : st.groups[g].pv_weight) os << " %" << w;
          if (st.groups[g].weight_reads_scores) os << " (read with the scores)";
        }
        os << "\n";
      }
      for (const Sm80Structure::PV& a : st.pv)
        os << "  P.V %" << a.node << ": group " << a.group << " times "
           << plan.buffers[a.v_buffer].name << " over " << p.dims[st.value_dim] << "\n";
      os << "  calls of at most 16 rows: " << la.few_entry << " (one warp of 16 rows per block, "
         << la.few_blocks_per_sm << " per SM by " << la.few_smem_bytes
         << " bytes of shared memory";
      if (la.few_value_split > 1)
        os << ", " << la.few_value_split << " value-column chunks of " << la.few_value_cols
           << " (" << la.few_value_split_why << ")";
      os << "); key loops split across blocks when the grid is small, merged by "
         << la.combine_entry << " (" << la.few_combine_entry << " after " << la.few_entry
         << ")\n";
      for (const Sm80Launch::GatherCheck& g : la.gather_checks)
        os << "  gather " << p.params[g.param].name << " position " << g.pos << ": index of "
           << p.dims[g.index_dim] << ", checked on the host\n";
      for (const auto& [param, pos] : tc.proved)
        os << "  gather " << p.params[param].name << " position " << pos
           << ": proved in range, unchecked on the device\n";
      for (const ExtentCondition& c : la.range_conditions)
        os << "  range condition: " << c.str(p) << " (else the build that checks gathers)\n";
      for (const std::string& s : la.staged) os << "  staged: " << s << "\n";
      for (const std::string& s : la.diagonal)
        os << "  per diagonal: " << s << " (a function of n - m: block_m + block_n - 1 values a "
           << "tile, computed into shared memory)\n";
      for (const std::string& s : la.key_values)
        os << "  per key: " << s << " (a function of the key: block_n values a tile, computed "
           << "into shared memory)\n";
      for (const std::string& s : la.hoisted) os << "  once per block: " << s << "\n";
      continue;
    }
    const ElementLaunch& e = lk.element;
    std::vector<int> points;
    for (int d : k.grid) points.push_back(d);
    os << "  grid: one " << (e.thread_per_point ? "thread" : "block") << " per point of "
       << dims_text(points);
    if (k.row_dim >= 0) os << " (" << p.dims[k.row_dim] << " in tiles of " << k.row_tile << ")";
    os << ", grid-stride, at most " << e.blocks_per_sm << " blocks per SM\n";
    if (e.thread_per_point && !e.lane_dims.empty())
      os << "  block: " << e.threads << " threads, lanes of a point by the extents of "
         << dims_text(e.lane_dims) << " at the call (at most 32; each at least " << kLaneTerms
         << " terms of its reductions), the block's points adjacent (every array in the "
         << "workspace, point-major within an element; a reduction's partials in a tree)\n";
    else if (e.thread_per_point)
      os << "  block: " << e.threads << " threads, a point each (values of one element in "
         << "registers, arrays over whole dims in the workspace, element-major)\n";
    else
      os << "  block: " << e.threads << " threads, each value's elements spread over them\n";
    if (k.red_dim >= 0) {
      os << "  loop: " << p.dims[k.red_dim] << " in tiles of " << k.red_tile;
      if (k.tiles.mask >= 0 && k.tiles.skip_empty)
        os << "; tiles classified by " << node_text(p, k.tiles.mask)
           << (k.tiles.unmasked_full ? " (empty skipped, full unmasked)" : " (empty skipped)");
      os << "\n";
    }
    os << (e.thread_per_point ? "  arrays of each thread (one element: a register; else in "
                                "the workspace, "
                              : "  workspace (")
       << "shared memory up to " << e.smem_limit << " bytes, else device memory):\n";
    for (const ElementArray& a : e.arrays) {
      os << "    " << (a.old_max ? "O" : "A") << a.node << " " << a.ctype << "[";
      for (size_t i = 0; i < a.dims.size(); ++i) {
        const int d = a.dims[i];
        os << (i ? ", " : "") << p.dims[d];
        if (d == k.row_dim) os << ":" << k.row_tile;
        if (d == k.red_dim) os << ":" << k.red_tile;
      }
      os << "]";
      if (a.layout != a.dims) {
        os << " stored [";
        for (size_t i = 0; i < a.layout.size(); ++i) os << (i ? ", " : "") << p.dims[a.layout[i]];
        os << "]";
      }
      os << (a.old_max ? "  (previous running max)" : "") << "\n";
    }
  }
  return os.str();
}

SmemBudget smem_budget(Target target) {
  if (target == Target::cuda_sm90) return {228 * 1024, 227 * 1024};
  return {164 * 1024, 163 * 1024};
}

int target_sm_count(Target target) { return target == Target::cuda_sm90 ? 132 : 108; }

std::vector<std::string> cuda_head_dims(const Plan& plan) {
  std::vector<std::string> out;
  for (const PlanKernel& k : plan.kernels)
    for (int d : k.elim)
      if (std::find(out.begin(), out.end(), plan.program.dims[d]) == out.end())
        out.push_back(plan.program.dims[d]);
  return out;
}

}  // namespace flashgen
