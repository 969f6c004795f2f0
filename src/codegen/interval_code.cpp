// Interval arithmetic of mask expressions, emitted as code: see interval_code.h.
#include "codegen/interval_code.h"

#include <set>
#include <sstream>
#include <vector>

namespace flashgen {

std::string interval_lo(int node) { return "l" + std::to_string(node); }
std::string interval_hi(int node) { return "h" + std::to_string(node); }

std::string emit_interval_bounds(const Program& p, int mask, const IntervalTarget& t) {
  std::set<int> nodes;  // ordered by id = topological
  std::vector<int> stack = {mask};
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (!nodes.insert(id).second) continue;
    for (int a : p.nodes[id].args) stack.push_back(a);
  }
  auto lo = interval_lo;
  auto hi = interval_hi;
  auto call = [](const std::string& f, const std::string& x, const std::string& y) {
    return f + "(" + x + ", " + y + ")";
  };
  std::ostringstream os;
  for (int id : nodes) {
    const Node& n = p.nodes[id];
    auto a = [&](int i) { return n.args[i]; };
    bool boolean = n.type == DType::boolean;
    std::string uL = boolean ? "0.0" : t.unknown_lo, uH = boolean ? "1.0" : t.unknown_hi;
    std::string L = uL, H = uH;
    if (auto leaf = t.leaf(id)) {
      std::tie(L, H) = *leaf;
    } else switch (n.op) {
      case Op::Add: L = lo(a(0)) + " + " + lo(a(1)); H = hi(a(0)) + " + " + hi(a(1)); break;
      case Op::Sub: L = lo(a(0)) + " - " + hi(a(1)); H = hi(a(0)) + " - " + lo(a(1)); break;
      case Op::Neg: L = "-" + hi(a(0)); H = "-" + lo(a(0)); break;
      case Op::Cast:  // to a float: the same range; to an integer: truncation, left unknown
        if (!is_integer(n.type) && !boolean) { L = lo(a(0)); H = hi(a(0)); }
        break;
      case Op::Maximum: L = call(t.max_fn, lo(a(0)), lo(a(1))); H = call(t.max_fn, hi(a(0)), hi(a(1))); break;
      case Op::Minimum: L = call(t.min_fn, lo(a(0)), lo(a(1))); H = call(t.min_fn, hi(a(0)), hi(a(1))); break;
      case Op::Clamp:
        L = call(t.min_fn, call(t.max_fn, lo(a(0)), lo(a(1))), lo(a(2)));
        H = call(t.min_fn, call(t.max_fn, hi(a(0)), hi(a(1))), hi(a(2)));
        break;
      case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: {
        // x < y: true if hi(x) < lo(y), false if lo(x) >= hi(y).
        int x = a(0), y = a(1);
        bool strict = n.op == Op::Lt || n.op == Op::Gt;
        if (n.op == Op::Gt || n.op == Op::Ge) std::swap(x, y);
        std::string tr = strict ? hi(x) + " < " + lo(y) : hi(x) + " <= " + lo(y);
        std::string fa = strict ? lo(x) + " >= " + hi(y) : lo(x) + " > " + hi(y);
        L = "((" + tr + ") ? 1.0 : 0.0)";
        H = "((" + fa + ") ? 0.0 : 1.0)";
        break;
      }
      case Op::Eq: case Op::Ne: {
        std::string tr = "(" + lo(a(0)) + " == " + hi(a(0)) + " && " + lo(a(1)) + " == " +
                         hi(a(1)) + " && " + lo(a(0)) + " == " + lo(a(1)) + ")";
        std::string fa = "(" + hi(a(0)) + " < " + lo(a(1)) + " || " + hi(a(1)) + " < " +
                         lo(a(0)) + ")";
        if (n.op == Op::Eq) { L = "(" + tr + " ? 1.0 : 0.0)"; H = "(" + fa + " ? 0.0 : 1.0)"; }
        else { L = "(" + fa + " ? 1.0 : 0.0)"; H = "(" + tr + " ? 0.0 : 1.0)"; }
        break;
      }
      case Op::And: L = call(t.min_fn, lo(a(0)), lo(a(1))); H = call(t.min_fn, hi(a(0)), hi(a(1))); break;
      case Op::Or: L = call(t.max_fn, lo(a(0)), lo(a(1))); H = call(t.max_fn, hi(a(0)), hi(a(1))); break;
      case Op::Not: L = "1.0 - " + hi(a(0)); H = "1.0 - " + lo(a(0)); break;
      default: break;  // data (gathers, parameters), products, ...: unknown
    }
    os << t.indent << "const double " << lo(id) << " = " << L << ", " << hi(id) << " = " << H
       << "; (void)" << lo(id) << "; (void)" << hi(id) << ";\n";
  }
  return os.str();
}

}  // namespace flashgen
