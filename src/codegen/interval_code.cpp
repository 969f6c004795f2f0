// Interval arithmetic of mask expressions, emitted as code: see interval_code.h.
#include "codegen/interval_code.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <vector>

#include "passes/passes.h"

namespace flashgen {

// (appended, not `"l" + to_string`: GCC 12 warns falsely on that with -Wrestrict)
std::string interval_lo(int node) { return std::string("l").append(std::to_string(node)); }
std::string interval_hi(int node) { return std::string("h").append(std::to_string(node)); }

namespace {

// NaN-propagating max / min of two bound expressions (fmax and std::max drop or keep a NaN
// depending on its position).
std::string imax(const std::string& x, const std::string& y) {
  return "(" + x + " != " + x + " || " + y + " != " + y + " ? NAN : (" + x + " > " + y + " ? " +
         x + " : " + y + "))";
}
std::string imin(const std::string& x, const std::string& y) {
  return "(" + x + " != " + x + " || " + y + " != " + y + " ? NAN : (" + x + " < " + y + " ? " +
         x + " : " + y + "))";
}

// A float type's rounding error, relative and absolute (the smallest subnormal), its largest
// finite value and its smallest normal one, for widening the bounds of a sum, product or
// quotient computed in that type; rel 0 for types without a bound rule.
struct FloatType {
  double rel = 0, tiny = 0, max = 0, min_normal = 0;
};
FloatType float_type(DType t) {
  switch (t) {
    case DType::f32: return {0x1p-23, 0x1p-149, 3.4028234663852886e38, 0x1p-126};
    case DType::bf16: return {0x1p-7, 0x1p-133, 3.3895313892515355e38, 0x1p-126};
    case DType::f16: return {0x1p-10, 0x1p-24, 65504.0, 0x1p-14};
    default: return {};
  }
}

std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace


std::string data_value_bounds(const Program& p, int node, const std::string& value,
                              const std::string& indent, const std::string& note) {
  std::string r = "r";  // (appending: GCC 12's -Wrestrict misfires on "r" + a string)
  r += std::to_string(node);
  const bool integer = is_integer(p.nodes[node].type);
  return indent + "const double " + r + "v = (double)" + value + ";  // " + note + "\n" + indent +
         "const double " + r + "lo = " + r + "v == " + r + "v" +
         (integer ? " && " + r + "v <= 9007199254740992.0 && " + r + "v >= -9007199254740992.0"
                  : std::string()) +
         " ? " + r + "v : NAN, " + r + "hi = " + r + "lo;\n";
}

namespace {

// The rule of one operation over its arguments' bounds (l<ID>, h<ID>), or nullopt where there is
// none (data, sin, cos, pow, casts to narrower floats): the one place that says which
// operations the interval arithmetic bounds (emit_interval_bounds, interval_undecided).
struct NodeRule {
  std::string L, H;
  bool round_sum = false;    // a float sum or product: widen by one rounding error
  bool inexact_div = false;  // a float quotient: the GPU's approximate division (2 ulp)
};
std::optional<NodeRule> node_rule(const Program& p, int id) {
  const Node& n = p.nodes[id];
  auto a = [&](int i) { return n.args[i]; };
  auto lo = interval_lo;
  auto hi = interval_hi;
  NodeRule r;
  std::string& L = r.L;
  std::string& H = r.H;
  bool& round_sum = r.round_sum;
  bool& inexact_div = r.inexact_div;
  switch (n.op) {
    case Op::Add: L = lo(a(0)) + " + " + lo(a(1)); H = hi(a(0)) + " + " + hi(a(1)); round_sum = true; break;
    case Op::Sub: L = lo(a(0)) + " - " + hi(a(1)); H = hi(a(0)) + " - " + lo(a(1)); round_sum = true; break;
    case Op::Neg: L = "-" + hi(a(0)); H = "-" + lo(a(0)); break;
    case Op::Cast: {  // to f32: rounded like the values (monotone); to i64 from an integer: same
      const DType from = p.nodes[a(0)].type;
      if (n.type == DType::f32 && from != DType::boolean) {
        L = "(double)(float)" + lo(a(0)); H = "(double)(float)" + hi(a(0));
      } else if ((n.type == DType::f32 && from == DType::boolean) ||
                 (n.type == DType::i64 && (is_integer(from) || from == DType::boolean))) {
        L = lo(a(0)); H = hi(a(0));
      } else if (is_integer(n.type) && is_float(from)) {
        // float to integer truncates toward zero (monotone); the integer branch below makes
        // bounds past the type unknown
        L = "trunc(" + lo(a(0)) + ")"; H = "trunc(" + hi(a(0)) + ")";
      } else {
        return std::nullopt;  // to narrower floats, i64 to i32: unknown
      }
      break;
    }
    case Op::Mul: {  // the extremes of the corner products (inf * 0 = NaN: unknown)
      const std::string p[4] = {"(" + lo(a(0)) + " * " + lo(a(1)) + ")",
                                "(" + lo(a(0)) + " * " + hi(a(1)) + ")",
                                "(" + hi(a(0)) + " * " + lo(a(1)) + ")",
                                "(" + hi(a(0)) + " * " + hi(a(1)) + ")"};
      L = imin(imin(p[0], p[1]), imin(p[2], p[3]));
      H = imax(imax(p[0], p[1]), imax(p[2], p[3]));
      round_sum = true;
      break;
    }
    case Op::Div: {  // a divisor interval that holds 0 (or a NaN bound) is unknown
      // (and one below 2^126: the GPU's approximate division returns 0 past it)
      const std::string ok = "((" + lo(a(1)) + " > 0.0 || " + hi(a(1)) + " < 0.0) && fabs(" +
                             lo(a(1)) + ") < 0x1p126 && fabs(" + hi(a(1)) + ") < 0x1p126)";
      const std::string q[4] = {"(" + lo(a(0)) + " / " + lo(a(1)) + ")",
                                "(" + lo(a(0)) + " / " + hi(a(1)) + ")",
                                "(" + hi(a(0)) + " / " + lo(a(1)) + ")",
                                "(" + hi(a(0)) + " / " + hi(a(1)) + ")"};
      L = "(" + ok + " ? " + imin(imin(q[0], q[1]), imin(q[2], q[3])) + " : NAN)";
      H = "(" + ok + " ? " + imax(imax(q[0], q[1]), imax(q[2], q[3])) + " : NAN)";
      round_sum = true;
      // By a constant power of two: a product by its exact reciprocal (as NVVM and GCC
      // compile it), exact where the type holds the result; else the approximate division.
      const Node& b = p.nodes[a(1)];
      int e2 = 0;
      inexact_div = !(b.op == Op::Const && std::isfinite(b.value) && b.value != 0 &&
                      std::frexp(std::fabs(b.value), &e2) == 0.5);
      break;
    }
    // Monotone functions: the function of each bound, widened for fast math's approximations
    // (tanh.approx's relative error is below 2^-10, __logf's absolute one near 1 below
    // 2^-21: the 2^-20 term covers it), an upper bound past f32's largest value +inf (expf
    // overflows), and outside the domain (a negative sqrt or log argument: NaN) unknown. A
    // subnormal argument is 0 under fast math (flushed): log's lower bound is then -inf and
    // rsqrt's unknown.
    case Op::Exp: case Op::Exp2: case Op::Log: case Op::Log2: case Op::Sqrt: case Op::Tanh:
    case Op::Sigmoid: case Op::Rsqrt: {
      const std::string x0 = lo(a(0)), x1 = hi(a(0));
      auto f = [&](const std::string& x) {
        switch (n.op) {
          case Op::Exp: return "exp(" + x + ")";
          case Op::Exp2: return "exp2(" + x + ")";
          case Op::Log: return "log(" + x + ")";
          case Op::Log2: return "log2(" + x + ")";
          case Op::Sqrt: return "sqrt(" + x + ")";
          case Op::Tanh: return "tanh(" + x + ")";
          case Op::Sigmoid: return "(1.0 / (1.0 + exp(-" + x + ")))";
          default: return "(1.0 / sqrt(" + x + "))";  // rsqrt: decreasing
        }
      };
      const bool down = n.op == Op::Rsqrt, logs = n.op == Op::Log || n.op == Op::Log2;
      const std::string domain =
          logs || n.op == Op::Sqrt ? "(" + x0 + " >= 0.0)"
          : down                   ? "(" + x0 + " >= 0x1p-126)"
                                   : "(" + x0 + " == " + x0 + ")";
      const std::string flushed = logs ? "(" + x0 + " < 0x1p-126 ? 0.0 : " + x0 + ")" : x0;
      const std::string fl = f(down ? x1 : flushed), fh = f(down ? x0 : x1);
      const std::string hw = "(" + fh + " + fabs(" + fh + ") * 0x1p-10 + 0x1p-20)";
      L = "(" + domain + " && " + x1 + " == " + x1 + " ? " + fl + " - fabs(" + fl +
          ") * 0x1p-10 - 0x1p-20 : NAN)";
      H = "(" + domain + " && " + x1 + " == " + x1 + " ? (" + hw + " <= 3.4028234663852886e38 ? " +
          hw + " : INFINITY) : NAN)";
      break;
    }
    case Op::Floor: L = "floor(" + lo(a(0)) + ")"; H = "floor(" + hi(a(0)) + ")"; break;
    case Op::Ceil: L = "ceil(" + lo(a(0)) + ")"; H = "ceil(" + hi(a(0)) + ")"; break;
    case Op::Relu:
      L = imax(lo(a(0)), "0.0");
      H = imax(hi(a(0)), "0.0");
      break;
    case Op::Abs:  // [0 if the interval holds 0, else the smaller magnitude; the larger]
      L = "(" + lo(a(0)) + " >= 0.0 ? " + lo(a(0)) + " : (" + hi(a(0)) + " <= 0.0 ? -" +
          hi(a(0)) + " : (" + lo(a(0)) + " == " + lo(a(0)) + " && " + hi(a(0)) + " == " +
          hi(a(0)) + " ? 0.0 : NAN)))";
      H = imax("-" + lo(a(0)), hi(a(0)));
      break;
    case Op::Mod: {
      // Floor modulo of integers (the sign of the divisor). By one divisor b: with one
      // quotient floor(x / b) over [lo, hi] (checked in doubles, exact for |x| < 2^30 and
      // |b| < 2^20), [lo - b q, hi - b q]; else [0, b - 1] for b > 0, [b + 1, 0] for b < 0.
      // A divisor interval of one sign: [0, hi(b) - 1] or [lo(b) + 1, 0]; else unknown.
      const std::string x0 = lo(a(0)), x1 = hi(a(0)), b0 = lo(a(1)), b1 = hi(a(1));
      const std::string small = "(fabs(" + x0 + ") < 1073741824.0 && fabs(" + x1 +
                                ") < 1073741824.0 && fabs(" + b0 + ") < 1048576.0)";
      const std::string one = "(" + b0 + " == " + b1 + " && " + b0 + " != 0.0 && " + small +
                              " && floor(" + x0 + " / " + b0 + ") == floor(" + x1 + " / " +
                              b0 + "))";
      const std::string q = "floor(" + x0 + " / " + b0 + ") * " + b0;
      L = "(" + one + " ? " + x0 + " - " + q + " : (" + b0 + " >= 1.0 ? 0.0 : (" + b1 +
          " <= -1.0 ? " + b0 + " + 1.0 : NAN)))";
      H = "(" + one + " ? " + x1 + " - " + q + " : (" + b0 + " >= 1.0 ? " + b1 +
          " - 1.0 : (" + b1 + " <= -1.0 ? 0.0 : NAN)))";
      break;
    }
    case Op::Where: {  // the branch the condition decides, else the hull of both
      const std::string c0 = lo(a(0)), c1 = hi(a(0));
      L = "(" + c0 + " == 1.0 ? " + lo(a(1)) + " : (" + c1 + " == 0.0 ? " + lo(a(2)) + " : " +
          imin(lo(a(1)), lo(a(2))) + "))";
      H = "(" + c0 + " == 1.0 ? " + hi(a(1)) + " : (" + c1 + " == 0.0 ? " + hi(a(2)) + " : " +
          imax(hi(a(1)), hi(a(2))) + "))";
      break;
    }
    case Op::Maximum: L = imax(lo(a(0)), lo(a(1))); H = imax(hi(a(0)), hi(a(1))); break;
    case Op::Minimum: L = imin(lo(a(0)), lo(a(1))); H = imin(hi(a(0)), hi(a(1))); break;
    case Op::Clamp: {  // x < lo ? lo : (x > hi ? hi : x): the value is lo, hi or x
      // If lo <= hi everywhere (h(lo) <= l(hi)): [min(max(l(x), l(lo)), l(hi)), min(max(h(x),
      // h(lo)), h(hi))]; otherwise lo can exceed hi: [min(l(lo), l(hi)), max(h(lo), min(h(x), h(hi)))].
      const std::string ordered = "(" + hi(a(1)) + " <= " + lo(a(2)) + ")";
      L = "(" + ordered + " ? " + imin(imax(lo(a(0)), lo(a(1))), lo(a(2))) + " : " +
          imin(lo(a(1)), lo(a(2))) + ")";
      H = "(" + ordered + " ? " + imin(imax(hi(a(0)), hi(a(1))), hi(a(2))) + " : " +
          imax(hi(a(1)), imin(hi(a(0)), hi(a(2)))) + ")";
      break;
    }
    case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: {
      // x < y: true if hi(x) < lo(y), false if lo(x) >= hi(y) (both false on NaN bounds).
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
    case Op::And: L = imin(lo(a(0)), lo(a(1))); H = imin(hi(a(0)), hi(a(1))); break;
    case Op::Or: L = imax(lo(a(0)), lo(a(1))); H = imax(hi(a(0)), hi(a(1))); break;
    case Op::Not: L = "1.0 - " + hi(a(0)); H = "1.0 - " + lo(a(0)); break;
    default: return std::nullopt;  // data (gathers, parameters), sin, ...: unknown
  }
  return r;
}

// The nodes under `id` that leave it unknown (empty: bounded), for a value; for a condition,
// whether some tile can be decided at all.
void unknown_parts(const Program& p, int id, const std::set<int>& ranged, std::vector<int>& out) {
  const Node& n = p.nodes[id];
  switch (n.op) {
    case Op::Const:
      if (is_float(n.type) && n.type != DType::f32) out.push_back(id);
      return;
    case Op::Size: case Op::Index: return;
    case Op::Gather: case Op::Param:  // data: known where the target bounds it (ranged)
      if (!ranged.count(id)) out.push_back(id);
      return;
    case Op::And: case Op::Or: {  // either side decides
      std::vector<int> a, b;
      unknown_parts(p, n.args[0], ranged, a);
      unknown_parts(p, n.args[1], ranged, b);
      if (!a.empty() && !b.empty()) {
        out.insert(out.end(), a.begin(), a.end());
        out.insert(out.end(), b.begin(), b.end());
      }
      return;
    }
    case Op::Where: {  // both branches (the hull), or the condition and one branch
      std::vector<int> c, a, b;
      unknown_parts(p, n.args[0], ranged, c);
      unknown_parts(p, n.args[1], ranged, a);
      unknown_parts(p, n.args[2], ranged, b);
      if ((a.empty() && b.empty()) || (c.empty() && (a.empty() || b.empty()))) return;
      for (const auto* v : {&c, &a, &b}) out.insert(out.end(), v->begin(), v->end());
      return;
    }
    default: break;
  }
  if (!node_rule(p, id)) {
    out.push_back(id);
    return;
  }
  for (int a : n.args) unknown_parts(p, a, ranged, out);
}
}  // namespace

namespace {
// The data reads (gathers, parameters) under `id` that the rules reach: through operations
// with a rule, and `and`, `or`, `where`; not under one without (sin of the data: never bounded).
void ruled_reads(const Program& p, int id, std::set<int>& seen, std::set<int>& out) {
  if (!seen.insert(id).second) return;
  const Node& n = p.nodes[id];
  switch (n.op) {
    case Op::Gather: case Op::Param: out.insert(id); return;
    case Op::Const: case Op::Size: case Op::Index: return;
    case Op::And: case Op::Or: case Op::Where: break;
    default:
      if (!node_rule(p, id)) return;
  }
  for (int a : n.args) ruled_reads(p, a, seen, out);
}
}  // namespace

std::vector<DataRange> deciding_data_ranges(const Program& p, const TileClasses& tiles) {
  if (tiles.mask < 0 || !(tiles.skip_empty || tiles.unmasked_full)) return {};
  std::set<int> seen, reached, ranged;
  ruled_reads(p, tiles.mask, seen, reached);
  std::vector<DataRange> out;
  for (const DataRange& r : tiles.data_ranges)
    if (reached.count(r.node)) {
      out.push_back(r);
      ranged.insert(r.node);
    }
  if (!interval_undecided(p, tiles.mask, ranged).empty()) return {};
  return out;
}

std::vector<int> interval_undecided(const Program& p, int mask, const std::set<int>& ranged) {
  std::vector<int> out;
  unknown_parts(p, mask, ranged, out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string emit_interval_bounds(const Program& p, int mask, const IntervalTarget& t) {
  const std::set<int> nodes = closure_of(p, mask);
  auto lo = interval_lo;
  auto hi = interval_hi;
  std::ostringstream os;
  for (int id : nodes) {
    const Node& n = p.nodes[id];
    const bool boolean = n.type == DType::boolean;
    const bool integer = is_integer(n.type);
    std::string L = boolean ? "0.0" : "NAN", H = boolean ? "1.0" : "NAN";
    bool round_sum = false;     // a float sum or product: widen by one rounding error
    bool inexact_div = false;   // a float quotient: the GPU's approximate division (2 ulp)
    if (auto leaf = t.leaf(id)) {
      std::tie(L, H) = *leaf;
    } else if (std::optional<NodeRule> r = node_rule(p, id)) {
      L = r->L;
      H = r->H;
      round_sum = r->round_sum;
      inexact_div = r->inexact_div;
    }
    const std::string l = lo(id), h = hi(id);
    if (integer) {
      // Exact in doubles below 2^53; outside the type's range the reference wraps.
      const double tmax = n.type == DType::i32 ? 2147483647.0 : 9007199254740991.0;
      const double tmin = n.type == DType::i32 ? -2147483648.0 : -9007199254740991.0;
      os << t.indent << "const double " << l << "r = " << L << ", " << h << "r = " << H << ";\n"
         << t.indent << "const bool " << l << "ok = " << l << "r >= " << num(tmin) << " && "
         << h << "r <= " << num(tmax) << ";\n"
         << t.indent << "const double " << l << " = " << l << "ok ? " << l << "r : NAN, " << h
         << " = " << l << "ok ? " << h << "r : NAN; (void)" << l << "; (void)" << h << ";\n";
      continue;
    }
    const FloatType ft = float_type(n.type);
    if (round_sum && ft.rel == 0) {
      L = H = "NAN";
    } else if (round_sum) {
      // Bounds the type holds as finite values only (past its largest one the value may be
      // inf, and inf - inf NaN: unknown), widened outward by one rounding error of the type
      // (a normal bound the type holds exactly stays: a sum, product or quotient by a power of
      // two that exact is computed exactly, fused or not), other quotients by the approximate
      // division's error (fast math on the GPU: 2 ulp, plus the rounding) whether exact or not;
      // a subnormal bound reaches 0 (fast math flushes subnormals); past the largest finite
      // value after widening, +-inf.
      os << t.indent << "const double " << l << "r = " << L << ", " << h << "r = " << H << ";\n";
      const double ulps = inexact_div ? 3 : 1;
      auto widen = [&](const std::string& v, bool up) {
        const std::string sign = up ? " + " : " - ";
        const std::string w = "(" + v + sign + "(" + v + " < 0 ? -" + v + " : " + v + ") * " +
                              num(ft.rel * ulps) + sign + num(ft.tiny) + ")";
        const std::string cap = up ? "(" + w + " <= " + num(ft.max) + " ? " + w + " : INFINITY)"
                                   : "(" + w + " >= " + num(-ft.max) + " ? " + w + " : -INFINITY)";
        const std::string sub = up ? "((" + v + " > 0.0 ? " + v + " : 0.0) + " +
                                         num(ft.tiny * (ulps + 1)) + ")"
                                   : "((" + v + " < 0.0 ? " + v + " : 0.0) - " +
                                         num(ft.tiny * (ulps + 1)) + ")";
        const std::string exact = n.type == DType::f32 && !inexact_div
                                      ? "(double)(float)" + v + " == " + v
                                      : std::string("false");
        return "(fabs(" + v + ") <= " + num(ft.max) + " ? (" + v + " != 0.0 && fabs(" + v +
               ") < " + num(ft.min_normal) + " ? " + sub + " : (" + exact + " ? " + v + " : " +
               cap + ")) : NAN)";
      };
      L = widen(l + "r", false);
      H = widen(h + "r", true);
    }
    os << t.indent << "const double " << l << " = " << L << ", " << h << " = " << H << "; (void)"
       << l << "; (void)" << h << ";\n";
  }
  return os.str();
}

}  // namespace flashgen
