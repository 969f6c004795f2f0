// Shared machinery of the program passes: rebuilding a program node by node, and the safe-max
// form used by the lowered softmax. Tests: tests/passes/passes_test.cpp.
#include <cmath>

#include "passes/passes.h"

namespace flashgen {

Program rebuild(const Program& p, const RewriteFn& fn, std::vector<int>* final_ids,
                std::vector<int>* old_ids) {
  ProgramBuilder b = ProgramBuilder::with_declarations_of(p);
  std::vector<int> map(p.nodes.size(), -1);
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const Node& old = p.nodes[i];
    std::vector<int> args;
    for (int a : old.args) args.push_back(map[a]);
    int id = fn ? fn(b, static_cast<int>(i), args) : -1;
    if (id < 0) {
      Node n = old;
      n.args = args;
      id = b.add_node(n);
    }
    map[i] = id;
  }
  for (const Output& o : p.outputs) {
    std::vector<std::string> dims;
    for (int d : o.dims) dims.push_back(p.dims[d]);
    b.output(o.name, o.type, dims, Value{&b, map[o.node]}, o.loc);
  }
  std::vector<int> ids;
  Program out = b.build(&ids);
  if (old_ids) {
    old_ids->assign(p.nodes.size(), -1);
    for (size_t i = 0; i < p.nodes.size(); ++i)
      if (map[i] >= 0 && map[i] < static_cast<int>(ids.size())) (*old_ids)[i] = ids[map[i]];
  }
  if (final_ids) *final_ids = std::move(ids);
  return out;
}

std::set<int> closure_of(const Program& p, int id, const std::function<bool(int)>& stop) {
  std::set<int> nodes;
  std::vector<int> stack = {id};
  while (!stack.empty()) {
    const int n = stack.back();
    stack.pop_back();
    if (!nodes.insert(n).second || (stop && stop(n))) continue;
    for (int a : p.nodes[n].args) stack.push_back(a);
  }
  return nodes;
}

std::vector<int> read_dims(const Program& p, int id) {
  const Node& n = p.nodes[id];
  if (n.op == Op::Param) return p.params[n.param].dims;
  std::vector<int> dims;
  if (n.op == Op::Gather)
    for (int a : n.args) dims.push_back(p.nodes[a].op == Op::Index ? p.nodes[a].dim : -1);
  return dims;
}

bool is_const(const Program& p, int id, double v) {
  const Node& n = p.nodes[id];
  return n.op == Op::Const && (n.value == v || (std::isnan(v) && std::isnan(n.value)));
}

int make_safe_max(ProgramBuilder& b, int max_node) {
  Value m{&b, max_node};
  Value is_empty = b.binary(Op::Eq, m, b.constant(-INFINITY, DType::f32));
  return b.where(is_empty, b.constant(0.0, DType::f32), m).id;
}

int match_safe_max(const Program& p, int id) {
  const Node& n = p.nodes[id];
  if (n.op != Op::Where) return -1;
  const Node& c = p.nodes[n.args[0]];
  if (c.op != Op::Eq || !is_const(p, n.args[1], 0.0)) return -1;
  int m = n.args[2];
  if (c.args[0] != m || !is_const(p, c.args[1], -INFINITY)) return -1;
  return m;
}

}  // namespace flashgen
