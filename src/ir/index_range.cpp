// Index ranges (index_range.h): symbolic bounds of integer expressions, bottom-up over the nodes.
#include "ir/index_range.h"

#include <algorithm>
#include <map>

#include "ir/scalar_semantics.h"

namespace flashgen {

bool ExtentCondition::holds(const std::vector<int64_t>& extents) const {
  const int64_t lhs = (dim >= 0 ? extents[dim] : 0) + plus;  // |plus| <= 2^61: no overflow
  return lhs <= extents[target];
}

std::string ExtentCondition::str(const Program& p) const {
  std::string s = dim >= 0 ? "extent(" + p.dims[dim] + ")" : std::to_string(plus);
  if (dim >= 0 && plus != 0) s += (plus > 0 ? " + " : " - ") + std::to_string(std::abs(plus));
  return s + " <= extent(" + p.dims[target] + ")";
}

namespace {

constexpr int64_t kLimit = int64_t{1} << 61;  // constants of a bound; extents are below 2^60
constexpr size_t kMaxAlternatives = 8;

struct Term {
  int dim;    // -1: the constant c
  int64_t c;  // extent(dim) + c
};
// A set of terms: the smallest of them (a lower bound) or the largest (an upper bound).
using Terms = std::vector<Term>;

// value >= every alternative of `lo` (each the smallest of its terms) and value <= every
// alternative of `hi` (each the largest of its terms).
struct Bound {
  std::vector<Terms> lo, hi;
};

bool small(int64_t v) { return v >= -kLimit && v <= kLimit; }

// One term per dim, the least (lower) or largest (upper) constant; nullopt when a constant
// leaves the limit.
std::optional<Terms> normalized(const Terms& u, bool upper) {
  std::map<int, int64_t> best;
  for (const Term& t : u) {
    if (!small(t.c)) return std::nullopt;
    auto [it, fresh] = best.emplace(t.dim, t.c);
    if (!fresh) it->second = upper ? std::max(it->second, t.c) : std::min(it->second, t.c);
  }
  Terms out;
  for (const auto& [d, c] : best) out.push_back({d, c});
  return out;
}

std::optional<int64_t> constant_of(const Terms& u) {  // the bound when every term is constant
  if (u.empty()) return std::nullopt;
  int64_t c = u[0].c;
  for (const Term& t : u) {
    if (t.dim >= 0) return std::nullopt;
    c = t.c;  // normalized: at most one constant term
  }
  return c;
}

void add(std::vector<Terms>& alts, const Terms& u, bool upper) {
  if (alts.size() >= kMaxAlternatives) return;
  if (std::optional<Terms> n = normalized(u, upper)) alts.push_back(*n);
}

Terms shifted(const Terms& u, int64_t k) {
  Terms out = u;
  for (Term& t : out) t.c += k;  // |c|, |k| <= 2^61: no overflow; normalized() drops large ones
  return out;
}

// Each pair of alternatives of x and y as one set of terms: the smaller (lower) or larger
// (upper) of the two values.
void cross(std::vector<Terms>& out, const std::vector<Terms>& x, const std::vector<Terms>& y,
           bool upper) {
  for (const Terms& a : x)
    for (const Terms& b : y) {
      Terms u = a;
      u.insert(u.end(), b.begin(), b.end());
      add(out, u, upper);
    }
}

// Bounded on both sides: every term is an extent (below 2^60) plus a constant of at most 2^61,
// so the value's magnitude is below 2^62 and + or - of two such values does not wrap.
bool fits(const Bound& b) { return !b.lo.empty() && !b.hi.empty(); }

class Ranges {
 public:
  explicit Ranges(const Program& p) : p_(p) {}

  const Bound& of(int id) {
    auto it = memo_.find(id);
    if (it != memo_.end()) return it->second;
    Bound b = compute(id);
    return memo_.emplace(id, std::move(b)).first->second;
  }

 private:
  Bound compute(int id) {
    const Node& n = p_.nodes[id];
    Bound b;
    if (!is_integer(n.type) && n.type != DType::boolean) return b;
    auto arg = [&](int i) -> const Bound& { return of(n.args[i]); };
    auto both = [&](const Terms& lo, const Terms& hi) {
      add(b.lo, lo, false);
      add(b.hi, hi, true);
    };
    switch (n.op) {
      case Op::Const: {
        const int64_t v = scalar::int_constant(n.value, n.type);
        if (small(v)) both({{-1, v}}, {{-1, v}});
        return b;
      }
      case Op::Index: both({{-1, 0}}, {{n.dim, -1}}); return b;
      case Op::Size: both({{n.dim, 0}}, {{n.dim, 0}}); return b;
      case Op::Cast: case Op::Floor: case Op::Ceil: {
        const DType from = p_.nodes[n.args[0]].type;
        if (from == DType::boolean) both({{-1, 0}}, {{-1, 1}});
        else if (is_integer(from) && (n.type == DType::i64 || from == DType::i32)) b = arg(0);
        else if (is_integer(from)) b = narrowed(arg(0));  // i64 to i32 wraps unless inside i32
        return b;
      }
      case Op::Add: case Op::Sub: {
        const Bound &x = arg(0), &y = arg(1);
        if (!fits(x) || !fits(y)) return b;
        // x + y: a bound of x shifted by a constant bound of y, or the other way round;
        // x - y: a bound of x shifted by minus a constant bound of y's other side.
        const bool sub = n.op == Op::Sub;
        for (int upper = 0; upper < 2; ++upper) {
          std::vector<Terms>& out = upper ? b.hi : b.lo;
          const std::vector<Terms>& xs = upper ? x.hi : x.lo;
          const std::vector<Terms>& ys = (upper != sub) ? y.hi : y.lo;
          for (const Terms& ux : xs)
            for (const Terms& uy : ys) {
              if (std::optional<int64_t> c = constant_of(uy)) add(out, shifted(ux, sub ? -*c : *c), upper);
              else if (!sub)
                if (std::optional<int64_t> c = constant_of(ux)) add(out, shifted(uy, *c), upper);
            }
        }
        return n.type == DType::i32 ? narrowed(b) : b;
      }
      case Op::Mul: {
        const std::optional<std::pair<int64_t, int64_t>> x = constants(arg(0)), y = constants(arg(1));
        if (!x || !y || x->first < 0 || y->first < 0) return b;
        if (x->second > 0 && y->second > kLimit / x->second) return b;
        both({{-1, x->first * y->first}}, {{-1, x->second * y->second}});
        return n.type == DType::i32 ? narrowed(b) : b;
      }
      case Op::Neg: {
        const std::optional<std::pair<int64_t, int64_t>> x = constants(arg(0));
        if (x) both({{-1, -x->second}}, {{-1, -x->first}});
        return n.type == DType::i32 ? narrowed(b) : b;
      }
      case Op::Maximum: case Op::Minimum: {  // one side's bound, or the pair's
        const Bound &x = arg(0), &y = arg(1);
        const bool mx = n.op == Op::Maximum;
        std::vector<Terms>& either = mx ? b.lo : b.hi;
        for (const Terms& u : mx ? x.lo : x.hi) add(either, u, !mx);
        for (const Terms& u : mx ? y.lo : y.hi) add(either, u, !mx);
        cross(mx ? b.hi : b.lo, mx ? x.hi : x.lo, mx ? y.hi : y.lo, mx);
        return b;
      }
      case Op::Clamp: case Op::Where: {  // clamp: lo, hi, or x between them; where: a or b
        const Bound &x = arg(1), &y = arg(2);
        cross(b.lo, x.lo, y.lo, false);
        cross(b.hi, x.hi, y.hi, true);
        return b;
      }
      case Op::Mod: {  // floor modulo: in [0, b - 1] for b >= 1, (b, 0] for b < 0, 0 for b == 0
        const Bound& y = arg(1);
        for (const Terms& u : y.lo) {
          Terms w = shifted(u, 1);
          w.push_back({-1, 0});
          add(b.lo, w, false);
        }
        for (const Terms& u : y.hi) {
          Terms w = shifted(u, -1);
          w.push_back({-1, 0});
          add(b.hi, w, true);
        }
        return b;
      }
      default: return b;
    }
  }

  // The tightest constant bounds of a value bounded by constants on both sides.
  static std::optional<std::pair<int64_t, int64_t>> constants(const Bound& x) {
    std::optional<int64_t> lo, hi;
    for (const Terms& u : x.lo)
      if (std::optional<int64_t> c = constant_of(u)) lo = lo ? std::max(*lo, *c) : *c;
    for (const Terms& u : x.hi)
      if (std::optional<int64_t> c = constant_of(u)) hi = hi ? std::min(*hi, *c) : *c;
    if (!lo || !hi) return std::nullopt;
    return std::make_pair(*lo, *hi);
  }

  // An i32 result: kept only when constant bounds show it inside i32 (no wrap-around).
  static Bound narrowed(const Bound& x) {
    Bound b;
    const std::optional<std::pair<int64_t, int64_t>> c = constants(x);
    if (c && c->first >= INT32_MIN && c->second <= INT32_MAX)
      add(b.lo, {{-1, c->first}}, false), add(b.hi, {{-1, c->second}}, true);
    return b;
  }

  const Program& p_;
  std::map<int, Bound> memo_;
};

// The conditions under which every term of a lower bound is >= 0 (lower) or every term of an
// upper bound is <= extent(dim) - 1; nullopt when a term cannot be.
std::optional<std::vector<ExtentCondition>> side(const Terms& u, int dim, bool upper) {
  std::vector<ExtentCondition> out;
  for (const Term& t : u) {
    if (!upper) {  // extent(t.dim) + c >= 0, i.e. -c <= extent(t.dim)
      if (t.dim < 0 && t.c < 0) return std::nullopt;
      if (t.dim >= 0 && -t.c > 0) out.push_back({-1, -t.c, t.dim});
      continue;
    }
    if (t.dim == dim) {  // extent(dim) + c <= extent(dim) - 1
      if (t.c > -1) return std::nullopt;
    } else if (t.dim >= 0 || t.c + 1 > 0) {  // t + 1 <= extent(dim)
      out.push_back({t.dim, t.c + 1, dim});
    }
  }
  return out;
}

}  // namespace

std::optional<std::vector<ExtentCondition>> prove_index_in_range(const Program& p, int node,
                                                                int dim) {
  Ranges r(p);
  const Bound& b = r.of(node);
  std::optional<std::vector<ExtentCondition>> best;
  for (const Terms& lo : b.lo)
    for (const Terms& hi : b.hi) {
      std::optional<std::vector<ExtentCondition>> a = side(lo, dim, false), c = side(hi, dim, true);
      if (!a || !c) continue;
      for (const ExtentCondition& e : *c)
        if (std::find(a->begin(), a->end(), e) == a->end()) a->push_back(e);
      if (!best || a->size() < best->size()) best = std::move(a);
    }
  return best;
}

}  // namespace flashgen
