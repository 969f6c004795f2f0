// explain / explain_json: what the compiler did, for a user who does not read code: the
// kernels, the ops each contains, its grid and reduction loop, what it reads and writes in
// memory, estimated FLOPs and bytes (with sizes), and every materialized intermediate with
// the reason; for a CUDA target, each kernel's lowered path (lower/lower.h): the sm80
// template's launch shape, or the element path and why the template did not take it. Test: tests/plan/plan_test.cpp (text and JSON), tests/cuda (CUDA section).
#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "codegen/interval_code.h"
#include "lower/launch.h"
#include "compiler/pipeline.h"
#include "lower/tensor_core.h"
#include "plan/cost.h"
#include "flashgen/error.h"

namespace flashgen {

namespace {

std::vector<std::string> ops_of(const Plan& plan, const PlanKernel& k) {
  const Program& p = plan.program;
  std::vector<std::string> ops;
  for (const PlanValue& v : k.values) {
    const Node& n = p.nodes[v.node];
    if (n.op == Op::Param || n.op == Op::Const || n.op == Op::Index || n.op == Op::Size) continue;
    std::string s = op_name(n.op);
    if (v.load_buffer >= 0) {
      ops.push_back("load " + plan.buffers[v.load_buffer].name);
      continue;
    }
    if (!n.reduce.empty()) s += " over " + p.dim_list(n.reduce);
    if (n.op == Op::Gather) s += " " + p.params[n.param].name;
    if (v.contraction) s += " (contraction, tensor-core shaped)";
    for (const Accumulator& a : k.accs)
      if (a.node == v.node)
        s += a.rescale_by.empty() ? " (accumulator)" : " (online accumulator, rescaled by the "
                                                        "running max)";
    ops.push_back(s);
  }
  return ops;
}

std::string grid_text(const Program& p, const PlanKernel& k) {
  std::string g;
  for (int d : k.grid) {
    g += (g.empty() ? "" : ", ") + p.dims[d];
    if (d == k.row_dim) g += " (tiles of " + std::to_string(k.row_tile) + ")";
  }
  return "[" + g + "]";
}

// What the CUDA target makes of kernel i (its lowered description): the launch shape of the
// sm80 template, or the element path and why the template did not take the kernel.
struct CudaShape {
  bool fits = false;
  std::string why;  // when it does not fit
  Sm80Launch launch;
  int threads = 0;  // the element path's block
  bool thread_per_point = false;  // (ElementLaunch::thread_per_point)
  // A lanes kernel's lane dims (ElementLaunch::lane_dims) and its lanes a point at the given
  // sizes (0: an extent is not given).
  std::vector<std::string> lane_dims;
  int lanes = 0;
  // The element path's workspace per block at the given sizes (-1: an extent is not given),
  // and whether it stays in shared memory.
  int64_t workspace = -1;
  bool in_smem = false;
  // The tensor-core path's flash-decoding choice at the given sizes (split 0: an extent is not
  // given), for the target's SMs (target_sm_count).
  KeySplit split{false, 0};
  int sm_count = 0;
};

CudaShape cuda_shape(const Plan& plan, const LoweredKernel& lk, const Extents& sizes) {
  CudaShape s;
  s.fits = lk.path == LoweredKernel::Path::tensor_core;
  if (s.fits) {
    s.launch = lk.tensor_core.launch;
    const Sm80Launch& la = s.launch;
    const Program& p = plan.program;
    auto ext = [&](int d) -> int64_t {
      auto it = sizes.find(p.dims[d]);
      return it == sizes.end() ? -1 : it->second;
    };
    // Only for a grid the runtime launches: no zero extent, the parallel indices and rows
    // below 2^31 (larger calls are refused).
    int64_t par = 1;  // (times either kernel's value split: below 2^31)
    const int64_t vs = std::max(la.value_split, la.few_value_split);
    bool known = ext(la.row_dim) > 0 && ext(la.row_dim) <= INT32_MAX && ext(la.key_dim) >= 0;
    for (int d : la.par_dims) {
      known = known && ext(d) > 0 && par * vs <= INT32_MAX / ext(d);
      if (known) par *= ext(d);
    }
    if (known) {
      s.sm_count = target_sm_count(lk.tensor_core.target);
      s.split = choose_key_split(la, ext(la.row_dim), par, ext(la.key_dim), s.sm_count);
    }
    return s;
  }
  s.why = lk.why;
  s.threads = lk.element.threads;
  s.thread_per_point = lk.element.thread_per_point;
  std::vector<int64_t> extv;
  for (const std::string& d : plan.program.dims) {
    auto it = sizes.find(d);
    extv.push_back(it == sizes.end() ? -1 : it->second);
  }
  const PlanKernel& k = plan.kernels[lk.plan_kernel];
  bool known = true;
  for (const ElementArray& a : lk.element.arrays)
    for (int d : a.dims)
      known = known && (d == k.row_dim || d == k.red_dim || extv[d] >= 0);
  bool lanes_known = true;
  for (int d : lk.element.lane_dims) {
    s.lane_dims.push_back(plan.program.dims[d]);
    lanes_known = lanes_known && extv[d] >= 0;
  }
  known = known && lanes_known;  // (the workspace holds a block's points: threads / lanes)
  if (lanes_known) s.lanes = lanes_for(lk.element, extv);
  if (known) {
    s.workspace = element_workspace(k, lk.element, extv, nullptr);
    s.in_smem = s.workspace >= 0 && s.workspace <= lk.element.smem_limit;
  }
  return s;
}

// The parts of the mask that keep the interval rules from ever deciding a tile (node text);
// empty when some tile can be decided.
std::vector<std::string> mask_undecided(const Plan& plan, const PlanKernel& k) {
  std::vector<std::string> out;
  if (k.tiles.mask < 0) return out;
  std::set<int> ranged;
  for (const DataRange& r : k.tiles.data_ranges) ranged.insert(r.node);
  for (int id : interval_undecided(plan.program, k.tiles.mask, ranged))
    out.push_back(node_text(plan.program, id));
  return out;
}

// The mask's gathers that the tile classifiers bound by the data a tile reads (node text).
std::vector<std::string> data_bounded(const Plan& plan, const PlanKernel& k) {
  std::vector<std::string> out;
  for (const DataRange& r : deciding_data_ranges(plan.program, k.tiles))
    out.push_back(node_text(plan.program, r.node) +
                  (r.over < 0 ? std::string(" (one value per tile: read at grid indices only)")
                              : " (per tile of " + plan.program.dims[r.over] + ")"));
  return out;
}

std::string cuda_text(const CudaShape& s) {
  if (!s.fits) {
    std::string ws;
    if (s.workspace > 0 || (s.workspace == 0 && !s.thread_per_point))
      ws = "; a workspace of " + std::to_string(s.workspace) + " bytes per block in " +
           (s.in_smem ? "shared memory" : "device memory");
    std::string per_point =
        s.thread_per_point ? "one thread per grid point, values of one element in registers"
                           : "one block per grid point";
    if (!s.lane_dims.empty()) {
      std::string dims;
      for (const std::string& d : s.lane_dims) dims += (dims.empty() ? "" : ", ") + d;
      per_point = "lanes of a grid point over " + dims + " (" +
                  (s.lanes > 0 ? std::to_string(s.lanes) + " at these sizes"
                               : std::string("by the extents at the call")) +
                  "), its values in the workspace";
    }
    return "  cuda:      element path (" + std::to_string(s.threads) + " threads per block, " +
           per_point + ws + "): " + s.why + "\n";
  }
  const Sm80Launch& l = s.launch;
  std::ostringstream os;
  os << "  cuda:      "
     << (l.wgmma ? "sm90 kernel (wgmma, two warpgroups of 64 rows)" : "sm80 template (mma.sync)")
     << ": blocks of " << l.block_m << " query rows ("
     << l.warps - l.producer_warps << " warps x " << l.rows_per_warp
     << (l.warp_specialized ? ", a producer warpgroup loading each item's Q and filling " +
                                  std::to_string(l.stages) + " stages of key tiles" +
                                  (l.q_buffers > 1 ? ", the next item's Q during this one"
                                                   : "") +
                                  (l.tma.empty() ? "" : " (K/V by TMA where the tensors allow)")
                            : std::string())
     << "), key tiles of " << l.block_n << ", "
     << (l.smem_bytes + 1023) / 1024 << " KiB shared memory, " << l.min_blocks
     << (l.min_blocks == 1 ? " block" : " blocks") << " per SM";
  for (const auto& [d, e] : l.head_dims) os << ", " << d << " = " << e;
  os << "\n";
  if (!l.products_why.empty()) os << "             products by " << l.products_why << "\n";
  if (l.pipelined)
    os << "             each compute warpgroup issues the next tile's scores"
       << (l.num_acc > 0 ? " with this tile's P.V and runs the next softmax under it"
                         : " (no P.V: no accumulator)")
       << (l.ping_pong ? "; the two warpgroups take turns at the tensor cores" : "") << "\n";
  if (l.persistent)
    os << "             persistent grid "
       << (l.items_differ ? std::string("(items of unequal work: every call of more than ") +
                                  std::to_string(KeySplit::kFewRows) + " rows)"
                            : "for short key loops (at most " +
                                  std::to_string(KeySplit::kWalkTiles * l.block_n) +
                                  " keys a block)")
       << ": the blocks resident at once take the work items (row tiles x parallel indices) "
          "in order from a counter, the next item's K/V loading under the last one's epilogue"
       << (l.walk_entry.empty() ? std::string()
                                : " (a build of its own, " + l.walk_entry +
                                      (l.walk_pipelined ? ", pipelined with ping-pong" : "") + ")")
       << "\n";
  if (!l.split.empty()) {
    os << "             operands as " << l.pieces << " bf16 piece" << (l.pieces > 1 ? "s" : "")
       << " each (";
    for (size_t i = 0; i < l.split.size(); ++i)
      os << (i ? ", " : "") << l.split[i].name << " " << dtype_name(l.split[i].type);
    os << "; split on the device before the kernel): " << l.pieces * (l.pieces + 1) / 2
       << " tensor-core product" << (l.pieces > 1 ? "s" : "") << " per product"
       << (l.pieces == 3   ? ", f32 accuracy"
           : l.pieces == 2 ? ", 16 significant bits (f16's 11 held exactly)"
                           : " (f8 held exactly in bf16)")
       << "\n";
  }
  if (l.value_split > 1)
    os << "             value columns split in " << l.value_split << " chunks of "
       << l.value_dim / l.value_split << " (" << l.value_split_why << "); "
       << "scores recomputed per chunk\n";
  if (l.few_value_split != l.value_split)
    os << "             the few-rows kernel's value columns "
       << (l.few_value_split > 1 ? "split in " + std::to_string(l.few_value_split) +
                                       " chunks of " + std::to_string(l.few_value_cols) + " (" +
                                       l.few_value_split_why + ")"
                                 : std::string("in one chunk (at most 128 columns an accumulator and 128 registers of "
                                             "accumulators a thread)"))
       << "\n";
  if (s.split.split > 0)
    os << "             at these sizes (" << s.sm_count << " SMs): "
       << (s.split.few ? "the few-rows kernel (one warp of 16 rows per block, " +
                             std::to_string(l.few_blocks_per_sm) + " resident per SM)"
                       : std::string("the full kernel"))
       << (s.split.split > 1 ? ", the key loop split across " + std::to_string(s.split.split) +
                                   " blocks and merged (flash-decoding)"
                             : std::string(", no key split"))
       << (s.split.walk ? ", blocks walking the work items (persistent)" : "") << "\n";
  for (const auto& h : l.hoisted) os << "             once per block: " << h << "\n";
  for (const auto& h : l.staged)
    os << "             staged through shared memory with K/V: " << h << "\n";
  for (const auto& h : l.diagonal)
    os << "             once per diagonal of a tile (a function of n - m): " << h << "\n";
  for (const auto& h : l.key_values)
    os << "             once per key of a tile (a function of the key): " << h << "\n";
  for (const auto& c : l.range_condition_text)
    os << "             gathers proved in range when " << c
       << " (a call where it fails runs the build that checks every gather)\n";
  return os.str();
}

nlohmann::json cuda_json(const CudaShape& s) {
  nlohmann::json j;
  j["fits"] = s.fits;
  j["path"] = s.fits ? "tensor_core" : "element";
  if (!s.fits) {
    j["why"] = s.why;
    j["threads"] = s.threads;
    j["per_point"] = !s.lane_dims.empty() ? "lanes" : s.thread_per_point ? "thread" : "block";
    if (!s.lane_dims.empty()) {
      j["lane_dims"] = s.lane_dims;
      if (s.lanes > 0) j["lanes"] = s.lanes;
    }
    if (s.workspace >= 0) {
      j["workspace_bytes"] = s.workspace;
      j["workspace_in"] = s.in_smem ? "shared" : "device";
    }
    return j;
  }
  const Sm80Launch& l = s.launch;
  j["products"] = l.wgmma ? "wgmma" : "mma.sync";
  if (l.wgmma) j["wgmma_n"] = l.wgmma_n;
  if (!l.products_why.empty()) j["products_why"] = l.products_why;
  j["block_rows"] = l.block_m;
  j["warps"] = l.warps;
  j["warp_specialized"] = l.warp_specialized;
  j["stages"] = l.stages;
  if (l.warp_specialized) j["q_buffers"] = l.q_buffers;
  if (!l.diagonal.empty() || !l.key_values.empty()) j["diag_copies"] = l.diag_copies;
  j["tma"] = !l.tma.empty();
  j["pieces"] = l.pieces;
  nlohmann::json split = nlohmann::json::array();
  for (const Sm80Launch::SplitOperand& o : l.split) split.push_back(o.name);
  j["split_operands"] = split;
  j["persistent"] = l.persistent;
  j["items_differ"] = l.items_differ;
  j["walk_entry"] = l.walk_entry;
  j["walk_pipelined"] = l.walk_pipelined;
  j["pipelined"] = l.pipelined;
  j["ping_pong"] = l.ping_pong;
  j["scan_by_warps"] = l.scan_by_warps;
  j["checks_read_scores"] = l.checks_read_scores;
  j["clamp_keys"] = l.clamp_keys;
  j["keep_pass"] = l.keep_pass;
  j["key_tile"] = l.block_n;
  j["smem_bytes"] = l.smem_bytes;
  j["min_blocks_per_sm"] = l.min_blocks;
  j["few_rows_blocks_per_sm"] = l.few_blocks_per_sm;
  j["value_split"] = l.value_split;
  if (!l.value_split_why.empty()) j["value_split_why"] = l.value_split_why;
  j["few_rows_value_split"] = l.few_value_split;
  if (!l.few_value_split_why.empty()) j["few_rows_value_split_why"] = l.few_value_split_why;
  j["head_dims"] = nlohmann::json::object();
  for (const auto& [d, e] : l.head_dims) j["head_dims"][d] = e;
  if (s.split.split > 0) {
    j["few_rows"] = s.split.few;
    j["key_split"] = s.split.split;
    j["walk"] = s.split.walk;
    j["sm_count_assumed"] = s.sm_count;
  }
  j["once_per_block"] = l.hoisted;
  j["staged_gathers"] = l.staged;
  j["per_diagonal"] = l.diagonal;
  j["per_key"] = l.key_values;
  j["range_conditions"] = l.range_condition_text;
  return j;
}

}  // namespace

std::string explain(const Program& prog, const CompileOptions& opt) {
  Compiled c = compile_program(prog, opt, opt.target == Target::cpu ? "" : "lower");
  const Plan& plan = c.plan;
  const Program& p = plan.program;
  std::ostringstream os;
  os << "program " << prog.name << ": " << plan.kernel_count() << " kernel"
     << (plan.kernel_count() == 1 ? "" : "s");
  os << (plan.materialized().empty() ? ", nothing materialized\n"
                                     : ", " + std::to_string(plan.materialized().size()) +
                                           " intermediate(s) materialized\n");
  if (c.lowered.cluster_split.split_cost > 0)
    os << "a kernel per softmax cluster: "
       << cluster_split_text(c.lowered.cluster_split, plan, opt.target) << "\n";
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const PlanKernel& k = plan.kernels[i];
    os << "\nkernel " << i << " (" << k.name << ")\n";
    os << "  grid:      " << grid_text(p, k) << " in parallel\n";
    if (k.red_dim >= 0)
      os << "  loop:      over " << p.dims[k.red_dim] << " in tiles of " << k.red_tile << "\n";
    else
      os << "  loop:      none\n";
    if (!k.elim.empty()) os << "  whole:     " << p.dim_list(k.elim) << " held in each tile\n";
    auto join = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
      return s;
    };
    os << "  reads:     " << join(plan.reads(static_cast<int>(i))) << "\n";
    os << "  writes:    " << join(plan.writes(static_cast<int>(i))) << "\n";
    os << "  ops:\n";
    for (const auto& o : ops_of(plan, k)) os << "    " << o << "\n";
    const std::vector<std::string> undecided = mask_undecided(plan, k);
    if (k.tiles.mask >= 0 && !undecided.empty()) {
      os << "  tiles:     mask " << node_text(p, k.tiles.mask)
         << "\n             every tile computed with the mask: the interval rules bound no "
            "part of it that decides a tile (";
      for (size_t u = 0; u < undecided.size(); ++u) os << (u ? "; " : "") << undecided[u];
      os << ")\n";
    } else if (k.tiles.mask >= 0) {
      os << "  tiles:     mask " << node_text(p, k.tiles.mask)
         << "\n             empty tiles skipped, full tiles unmasked (decided per tile by "
            "interval arithmetic)\n";
      for (const std::string& g : data_bounded(plan, k))
        os << "             bounded by the data each tile reads: " << g << "\n";
    }
    else if (!k.tiles.note.empty())
      os << "  tiles:     " << k.tiles.note << "\n";
    KernelCost kc = kernel_cost(plan, k, opt.sizes);
    if (kc.known)
      os << "  estimate:  " << kc.flops / 1e9 << " GFLOP, " << kc.bytes / 1e6
         << " MB of memory traffic\n";
    for (const auto& n : k.notes) os << "  note:      " << n << "\n";
    if (opt.target != Target::cpu) os << cuda_text(cuda_shape(plan, c.lowered.kernels[i], opt.sizes));
  }
  if (!plan.materialized().empty()) {
    os << "\nmaterialized intermediates:\n";
    for (int b : plan.materialized())
      os << "  " << plan.buffers[b].name << " " << p.dim_list(plan.buffers[b].dims) << ": "
         << plan.buffers[b].reason << "\n";
  }
  for (const PlanBuffer& b : plan.buffers)  // outputs a kernel of their own stores
    if (b.kind == PlanBuffer::Output && !b.reason.empty())
      os << "output " << b.name << " " << p.dim_list(b.dims) << ": " << b.reason << "\n";
  return os.str();
}

std::string explain_json(const Program& prog, const CompileOptions& opt) {
  Compiled c = compile_program(prog, opt, opt.target == Target::cpu ? "" : "lower");
  const Plan& plan = c.plan;
  const Program& p = plan.program;
  nlohmann::json j;
  j["program"] = prog.name;
  j["kernels"] = nlohmann::json::array();
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const PlanKernel& k = plan.kernels[i];
    nlohmann::json kj;
    kj["name"] = k.name;
    kj["reads"] = plan.reads(static_cast<int>(i));
    kj["writes"] = plan.writes(static_cast<int>(i));
    std::vector<std::string> grid;
    for (int d : k.grid) grid.push_back(p.dims[d]);
    kj["grid"] = grid;
    kj["row_dim"] = k.row_dim >= 0 ? nlohmann::json(p.dims[k.row_dim]) : nlohmann::json(nullptr);
    kj["reduction_dim"] =
        k.red_dim >= 0 ? nlohmann::json(p.dims[k.red_dim]) : nlohmann::json(nullptr);
    std::vector<std::string> elim;
    for (int d : k.elim) elim.push_back(p.dims[d]);
    kj["eliminated"] = elim;
    kj["ops"] = ops_of(plan, k);
    kj["mask"] = k.tiles.mask >= 0 ? nlohmann::json(node_text(p, k.tiles.mask))
                                   : nlohmann::json(nullptr);
    kj["mask_data_bounded_per_tile"] = data_bounded(plan, k);
    kj["mask_undecided_by"] = mask_undecided(plan, k);
    KernelCost kc = kernel_cost(plan, k, opt.sizes);
    if (kc.known) {
      kj["flops"] = kc.flops;
      kj["bytes"] = kc.bytes;
    }
    kj["notes"] = k.notes;
    if (opt.target != Target::cpu) kj["cuda"] = cuda_json(cuda_shape(plan, c.lowered.kernels[i], opt.sizes));
    j["kernels"].push_back(kj);
  }
  const LoweredCuda::ClusterSplit& cs = c.lowered.cluster_split;
  if (cs.split_cost > 0)
    j["cluster_split"] = {{"fused_cost", cs.fused_cost},
                          {"split_cost", cs.split_cost},
                          {"fused_few_reads", cs.fused_few_reads},
                          {"split_few_reads", cs.split_few_reads},
                          {"fused_element_kernels", cs.fused_element_kernels},
                          {"split_element_kernels", cs.split_element_kernels},
                          {"decode_runs_one_kernel", decode_runs_one_kernel(cs, 1)}};
  j["materialized"] = nlohmann::json::array();
  for (int b : plan.materialized()) {
    nlohmann::json m;
    m["name"] = plan.buffers[b].name;
    m["node"] = node_text(p, plan.buffers[b].node);
    m["reason"] = plan.buffers[b].reason;
    j["materialized"].push_back(m);
  }
  j["outputs_stored_apart"] = nlohmann::json::array();  // by the kernel materializing their node
  for (const PlanBuffer& b : plan.buffers)
    if (b.kind == PlanBuffer::Output && !b.reason.empty())
      j["outputs_stored_apart"].push_back({{"name", b.name}, {"reason", b.reason}});
  return j.dump(2);
}

}  // namespace flashgen
