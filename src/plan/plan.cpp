// The plan's text form (--dump-after=plan) and its query API (tests/plan/plan_test.cpp).
#include "plan/plan.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace flashgen {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Prologue: return "prologue";
    case Phase::Body: return "body";
    case Phase::Epilogue: return "epilogue";
  }
  return "?";
}

std::string node_text(const Program& p, int id) {
  const Node& n = p.nodes[id];
  std::ostringstream os;
  os << "%" << id << " = " << op_name(n.op);
  switch (n.op) {
    case Op::Param: os << " " << p.params[n.param].name; break;
    case Op::Const: {
      if (std::isinf(n.value)) {
        os << (n.value > 0 ? " inf" : " -inf");
      } else {
        char buf[64];
        std::snprintf(buf, sizeof buf, " %.9g", n.value);
        os << buf;
      }
      break;
    }
    case Op::Index:
    case Op::Size: os << " " << p.dims[n.dim]; break;
    case Op::Gather:
      os << " " << p.params[n.param].name << "[";
      for (size_t i = 0; i < n.args.size(); ++i) os << (i ? ", %" : "%") << n.args[i];
      os << "]";
      break;
    default:
      for (size_t i = 0; i < n.args.size(); ++i) os << (i ? ", %" : " %") << n.args[i];
      if (!n.reduce.empty()) os << " over " << p.dim_list(n.reduce);
  }
  os << " : " << dtype_name(n.type) << p.dim_list(n.dims);
  return os.str();
}

std::vector<std::string> Plan::reads(int k) const {
  std::vector<std::string> out;
  for (int b : kernels[k].reads) out.push_back(buffers[b].name);
  return out;
}

std::vector<std::string> Plan::writes(int k) const {
  std::vector<std::string> out;
  for (int b : kernels[k].writes) out.push_back(buffers[b].name);
  return out;
}

std::vector<int> Plan::materialized() const {
  std::vector<int> out;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].kind == PlanBuffer::Intermediate) out.push_back(static_cast<int>(i));
  return out;
}

std::string Plan::str() const {
  const Program& p = program;
  std::ostringstream os;
  os << "plan " << p.name << ": " << kernels.size() << " kernel" << (kernels.size() == 1 ? "" : "s")
     << "\n";
  for (const PlanBuffer& b : buffers) {
    const char* kind = b.kind == PlanBuffer::Input ? "in " : b.kind == PlanBuffer::Output ? "out" : "tmp";
    os << "  " << kind << " " << b.name << ": " << dtype_name(b.type) << p.dim_list(b.dims);
    if (b.node >= 0) os << " = %" << b.node;
    if (!b.reason.empty()) os << "  # " << b.reason;
    os << "\n";
  }
  for (const PlanKernel& k : kernels) {
    os << "kernel " << k.name << "\n  grid [";
    for (size_t i = 0; i < k.grid.size(); ++i) {
      os << (i ? ", " : "") << p.dims[k.grid[i]];
      if (k.grid[i] == k.row_dim) os << "/" << k.row_tile;
    }
    os << "]";
    if (k.red_dim >= 0) os << "  loop " << p.dims[k.red_dim] << "/" << k.red_tile;
    os << "  eliminated " << p.dim_list(k.elim) << "\n";
    os << "  reads";
    for (int b : k.reads) os << " " << buffers[b].name;
    os << "  writes";
    for (int b : k.writes) os << " " << buffers[b].name;
    os << "\n";
    if (k.tiles.mask >= 0) {
      os << "  tiles: mask %" << k.tiles.mask << (k.tiles.skip_empty ? " skip-empty" : "")
         << (k.tiles.unmasked_full ? " unmasked-full" : "");
      for (const DataRange& r : k.tiles.data_ranges)
        os << " data-bounded %" << r.node
           << (r.over >= 0 ? " over " + program.dims[r.over] : std::string(" per block"));
      os << "\n";
    } else if (!k.tiles.note.empty()) {
      os << "  tiles: " << k.tiles.note << "\n";
    }
    for (Phase ph : {Phase::Prologue, Phase::Body, Phase::Epilogue}) {
      bool any = false;
      for (const PlanValue& v : k.values) {
        if (v.phase != ph) continue;
        bool acc = false;
        for (const Accumulator& a : k.accs) acc = acc || a.node == v.node;
        if (acc) continue;
        if (!any) os << "  " << phase_name(ph) << ":\n";
        any = true;
        os << "    " << node_text(p, v.node) << "  local" << p.dim_list(v.local_dims);
        if (v.inlined) os << " inline";
        if (v.load_buffer >= 0) os << " load " << buffers[v.load_buffer].name;
        if (v.contraction) os << " contraction";
        if (v.online) os << " online";
        os << "\n";
      }
      if (ph == Phase::Body && !k.accs.empty()) {
        os << "  update:\n";
        for (const Accumulator& a : k.accs) {
          os << "    " << node_text(p, a.node);
          if (!a.rescale_by.empty()) {
            os << "  rescale by";
            for (int m : a.rescale_by) os << " %" << m;
            os << " (factor";
            for (int e : a.exp_factors) os << " %" << e;
            os << ")";
          }
          os << "\n";
        }
      }
    }
    for (const std::string& n : k.notes) os << "  # " << n << "\n";
  }
  return os.str();
}

}  // namespace flashgen
