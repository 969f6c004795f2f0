// The stable text form of a Program (golden tests compare it; Program::hash() hashes it).
//
//   program NAME(p: dtype[dims], ...) {
//     %ID = OP ARGS : TYPE[DIMS]        one line per node, in topological order
//     out NAME: dtype[dims] = %ID
//   }
//
// ARGS: `%a, %b` for element-wise ops; `param NAME`; `const VALUE`; `index DIM`; `size DIM`;
// `sum %a over [DIMS]` for reductions and sugar; `gather NAME[%i, %j]`; `cast %a`.
// Dims of a node are printed in the program's dim order (a set); params and outputs in memory
// order. Source locations are not printed.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "flashgen/ir.h"

namespace flashgen {

namespace {
std::string format_value(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
}  // namespace

std::string Program::str() const {
  std::ostringstream os;
  os << "program " << name << "(";
  for (size_t i = 0; i < params.size(); ++i) {
    if (i) os << ", ";
    os << params[i].name << ": " << dtype_name(params[i].type) << dim_list(params[i].dims);
  }
  os << ") {\n";
  for (size_t id = 0; id < nodes.size(); ++id) {
    const Node& n = nodes[id];
    os << "  %" << id << " = " << op_name(n.op);
    switch (n.op) {
      case Op::Param: os << " " << params[n.param].name; break;
      case Op::Const: os << " " << format_value(n.value); break;
      case Op::Index:
      case Op::Size: os << " " << dims[n.dim]; break;
      case Op::Gather: {
        os << " " << params[n.param].name << "[";
        for (size_t i = 0; i < n.args.size(); ++i) os << (i ? ", %" : "%") << n.args[i];
        os << "]";
        break;
      }
      default:
        for (size_t i = 0; i < n.args.size(); ++i) os << (i ? ", %" : " %") << n.args[i];
        if (!n.reduce.empty()) os << " over " << dim_list(n.reduce);
        break;
    }
    os << " : " << dtype_name(n.type) << dim_list(n.dims) << "\n";
  }
  for (const Output& o : outputs)
    os << "  out " << o.name << ": " << dtype_name(o.type) << dim_list(o.dims) << " = %" << o.node
       << "\n";
  os << "}\n";
  return os.str();
}

}  // namespace flashgen
