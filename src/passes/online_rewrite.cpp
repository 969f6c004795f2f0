// online_rewrite: the algebra that puts dependent reductions into one-pass form.
//
// Step 1, exp normalization (the exp homomorphism). Every exp(E) / exp2(E)
// whose argument is, after moving terms, E = a*y + c - a*M with M = max(y, R) (raw, or safe
// where(M == -inf, 0, M)), a > 0 a constant and c invariant along R, becomes
//   exp(c) * exp(z - safe(max(z, R))),   z = a*y   (a folded with ln 2 for exp2)
// since max(a*y, R) = a*max(y, R) for a > 0. For a raw M the factor is wrapped in
// where(max(z, R) > -inf, ..., NaN): a row that is all -inf gives -inf - -inf = NaN terms in
// the reference, and exactly those rows have max == -inf. The canonical softmax form (a = 1,
// c = 0, safe) is left as it is. Where M hides in an R-invariant T computed from it
// (attention sinks: T = maximum(max(s, n), sink[h])), E = a*y + c - a*T becomes
//   where(cx < inf, exp(cx) * exp(z - safe(max(z, R))), NaN),  cx = c - a*T + safe(max(z, R))
// term by term (the guard: rows where the strong zero would hide a NaN term), so the sum
// shares the running max and the factor waits for T.
//
// Step 2, for every sum over dims D whose argument depends on another reduction over a dim of
// D (the softmax's max and sum over n feeding sum(p * v, n)), the sum is
//   - distributed over + and - (and unary -):   sum(a - l*b, D) = sum(a, D) - sum(l*b, D)
//   - freed of factors invariant in D:          sum(c * f, D) = c * sum(f, D)
//     (first, so c multiplies the normalized sum below: c * div_or_zero(sum(e * v, D), L) is 0
//     for c = 0 even where L is NaN, as the reference's per-term strong zero gives)
//   - freed of invariant divisors:              sum(div_or_zero(e, L) * v, D)
//                                                 = div_or_zero(sum(e * v, D), L)
//   - split at an invariant condition:          sum(g * where(C, f, NaN), D)
//                                                 = where(C, sum(g*f, D), NaN (0 if D empty))
// until each remaining sum is sum(f, D) with f a product of factors that vary with D. A + or -
// (or a where) is split only when a branch holds a one-pass exp factor, or, for a float + or -
// of terms that depend on no reduction over D (a value computed per key: v + bias[e],
// v - lam * u, kb[n] + v), when another factor of its product holds one:
//   sum(e * (v + c), D) = sum(e * v, D) + sum(e * c, D)
// so each part reads a plain value (a P.V on the tensor cores) or leaves as an invariant. Each
// part's rounding is relative to sum(e) * max|term|, bounded by the program's own terms as a
// P.V's already is, where the terms do not cancel: terms that are sums themselves stay whole
// ((v + c) - c), and an infinite coefficient (v - inf * u) gives the deviation docs/language.md
// names for distributed sums. The split is asked for by targets whose fast kernels take plain
// values only (online_rewrite's distribute_values: CUDA's tensor cores); the CPU computes the
// value per key as written. A term offset by a reduction is never split this way:
// sum(p * (s - M)) would become sum(p * s) - M * sum(p), whose error grows with |M| (scores
// offset by 1e4 lose three digits; scores near the float range overflow), and with a value
// factor p * s would be rounded to bf16 on the tensor cores; such a sum keeps M materialized.
// Splitting anything else cannot make the sum one-pass, and turns sum((s - M) * v) into
// sum(s*v) - M*sum(v), which cancels catastrophically; such a sum stays whole and the planner
// materializes M instead. Values computed per key are distributed only where the expansion
// stays within kMaxTerms sums; past that the sum is expanded as if they were not, and past that
// again left whole.
// The planner then recognizes sum(g * exp(x - safe(max(x, n))), n) as an online accumulator
// that shares the running max of x. A sum over a dim its argument lacks becomes a
// multiplication by the extent. Sums that do not depend on a reduction over D are untouched.
// Preconditions: canonical program (lower_sugar ran). Tests: tests/passes/passes_test.cpp,
// tests/passes/online_forms_test.cpp.
#include <cmath>
#include <map>
#include <stdexcept>

#include "passes/passes.h"

namespace flashgen {

namespace {

constexpr int kMaxTerms = 64;  // sums one reduction may be expanded into (step 2)

// An expression as sum(coef * atom) + c, seen through +, -, unary -, and * or / by constants.
struct Linear {
  std::map<int, double> terms;
  double c = 0;
};

void linearize(const Program& p, int id, double scale, Linear& out) {
  const Node& n = p.nodes[id];
  auto konst = [&](int a) {
    const Node& k = p.nodes[a];
    return k.op == Op::Const && is_float(k.type) && std::isfinite(k.value);
  };
  if (is_float(n.type)) {
    switch (n.op) {
      case Op::Const:
        if (konst(id)) {
          out.c += scale * n.value;
          return;
        }
        break;
      case Op::Add:
        linearize(p, n.args[0], scale, out);
        linearize(p, n.args[1], scale, out);
        return;
      case Op::Sub:
        linearize(p, n.args[0], scale, out);
        linearize(p, n.args[1], -scale, out);
        return;
      case Op::Neg: linearize(p, n.args[0], -scale, out); return;
      case Op::Mul:
        if (konst(n.args[1])) return linearize(p, n.args[0], scale * p.nodes[n.args[1]].value, out);
        if (konst(n.args[0])) return linearize(p, n.args[1], scale * p.nodes[n.args[0]].value, out);
        break;
      case Op::Div:
        if (konst(n.args[1]) && p.nodes[n.args[1]].value != 0)
          return linearize(p, n.args[0], scale / p.nodes[n.args[1]].value, out);
        break;
      default: break;
    }
  }
  out.terms[id] += scale;
}

// Step 1 for one exp/exp2 node `e` (args already mapped into `b`); -1 keeps it as it is.
int normalize_exp(ProgramBuilder& b, const Node& e, int arg) {
  const Program& p = b.program();
  DType ty = p.nodes[arg].type;
  if (!is_float(ty)) return -1;
  Linear lin;
  linearize(p, arg, 1.0, lin);
  // Tries E = a*y + c - a*M with M = max(y, R) at `atom` (then c = E + a*M - a*y), or, with
  // `atom` an R-invariant T that is no max but computed from M (atom_is_max false), E = a*y +
  // c with c = E - a*y holding T: exp(E) = exp(c + a*safe(M)) * exp(a*y - a*safe(M)).
  auto attempt = [&](int atom, double a, int M, bool safe, bool atom_is_max) -> int {
    const Node& mx = p.nodes[M];
    if (mx.op != Op::Max || p.nodes[mx.args[0]].type != ty) return -1;
    int y = mx.args[0];
    // c must not vary along the max's reduced dims.
    Linear c = lin;
    if (atom_is_max) c.terms.erase(atom);
    Linear ly;
    linearize(p, y, 1.0, ly);
    for (auto& [t, k] : ly.terms) c.terms[t] -= a * k;
    c.c -= a * ly.c;
    bool invariant = true;
    for (auto it = c.terms.begin(); it != c.terms.end();) {
      if (it->second == 0) {
        it = c.terms.erase(it);
        continue;
      }
      for (int d : mx.reduce)
        if (dimset_contains(p.nodes[it->first].dims, d)) invariant = false;
      ++it;
    }
    if (!invariant) return -1;
    if (e.op == Op::Exp && safe && a == 1 && c.terms.empty() && c.c == 0) return -1;  // canonical
    double scale = e.op == Op::Exp2 ? std::log(2.0) : 1.0;
    double A = a * scale;
    std::vector<std::string> red;
    for (int d : mx.reduce) red.push_back(p.dims[d]);
    Value z{&b, y}, m{&b, M};
    if (A != 1) {
      z = z * b.constant(A, ty);
      m = b.max(z, red);
    }
    Value safe_m{&b, make_safe_max(b, m.id)};
    Value f = b.exp(z - safe_m);
    const Value neg_inf = b.constant(-INFINITY, b.node(m.id).type);
    if (!c.terms.empty() || c.c != 0 || !atom_is_max) {
      Value cx{&b, -1};
      auto add = [&](Value t) { cx = cx.id < 0 ? t : cx + t; };
      if (c.c != 0 || (c.terms.empty() && atom_is_max)) add(b.constant(c.c * scale, ty));
      for (auto& [t, k] : c.terms)
        add(k * scale == 1 ? Value{&b, t} : Value{&b, t} * b.constant(k * scale, ty));
      if (!atom_is_max) add(safe_m);  // a*safe(M), scaled like z
      f = b.exp(cx) * f;
      if (!atom_is_max) {
        // At a key whose z is -inf, exp(z - safe(M)) = 0, which the strong zero keeps 0
        // whatever the factor; the term it stands for, exp(-inf + cx), is NaN where cx is +inf
        // or NaN (a sink of -inf on a fully masked row; a NaN sink on any row with a masked
        // key, whose other terms the strong zero may zero too). Such a row's terms are NaN
        // wherever a key is masked, and NaN or +inf elsewhere: it is NaN.
        const Value nan = b.constant(NAN, b.node(f.id).type);
        f = b.where(b.binary(Op::Lt, cx, b.constant(INFINITY, b.node(cx.id).type)), f, nan);
      }
    }
    if (!safe) {
      // max > -inf rather than max == -inf: the safe max owns that eq node, and the planner
      // treats it as part of the online exp chain.
      Value some = b.binary(Op::Gt, m, neg_inf);
      f = b.where(some, f, b.constant(NAN, b.node(f.id).type));
    }
    return f.id;
  };
  for (auto& [atom, coef] : lin.terms) {
    if (!(coef < 0)) continue;
    int M = match_safe_max(p, atom);
    bool safe = M >= 0;
    if (!safe) M = atom;
    const int f = attempt(atom, -coef, M, safe, true);
    if (f >= 0) return f;
  }
  // An R-invariant T computed from a max over R, subtracted, as with attention sinks:
  // exp(s - maximum(max(s, n), sink)). Rewritten at that max, the exp shares its running max
  // (one pass) and the factor exp(safe(M) - T) waits for the epilogue. Each term exp(y - T) is
  // exp(y - safe(M)) * exp(safe(M) - T); at a masked key the strong zero would make it 0 also
  // for a T of -inf or NaN, where it is NaN, so those rows are guarded. Only a T that a max over
  // R computes is taken: a T read from an input (a logsumexp saved by a forward pass) is one
  // pass as it is.
  for (auto& [atom, coef] : lin.terms) {
    if (!(coef < 0) || p.nodes[atom].op == Op::Max || match_safe_max(p, atom) >= 0) continue;
    // (attempt checks that T, a term of c, does not vary along the max's dims)
    for (int M : closure_of(p, atom)) {
      if (p.nodes[M].op != Op::Max) continue;
      const int f = attempt(atom, -coef, M, true, false);
      if (f >= 0) return f;
    }
  }
  return -1;
}

struct TooManyTerms {};

struct OnlineRewriter {
  ProgramBuilder& b;
  std::map<int, DimSet> upstream;  // node -> dims reduced by reductions it depends on
  std::map<int, bool> capable;     // node -> holds a one-pass exp factor (see one_pass)
  int splits = 0;
  bool distribute_values = true;  // (see distributes; off for the CPU and in the second try)

  const DimSet& reduced_above(int id) {
    auto it = upstream.find(id);
    if (it != upstream.end()) return it->second;
    Node n = b.node(id);
    DimSet s;
    if (is_reduction(n.op)) s = n.reduce;
    for (int a : n.args) s = dimset_union(s, reduced_above(a));
    return upstream[id] = s;
  }
  bool depends(int id, const DimSet& d) {
    const DimSet& r = reduced_above(id);
    for (int x : d)
      if (dimset_contains(r, x)) return true;
    return false;
  }
  bool varies(int id, const DimSet& d) {
    for (int x : d)
      if (dimset_contains(b.node(id).dims, x)) return true;
    return false;
  }
  // Whether splitting a sum at `id` can reach the one-pass form: `id` varies along D, depends
  // on a reduction over D, and (through products, +/-, invariant divisors and where with an
  // invariant condition) holds a factor exp(x - safe(max(x, ...))).
  bool one_pass(int id, const DimSet& d) {
    auto it = capable.find(id);
    if (it != capable.end()) return it->second;
    bool r = false;
    if (varies(id, d) && depends(id, d)) {
      Node n = b.node(id);
      switch (n.op) {
        case Op::Exp: {
          const Node& sub = b.node(n.args[0]);
          r = sub.op == Op::Sub && match_safe_max(b.program(), sub.args[1]) >= 0;
          break;
        }
        case Op::Add:
        case Op::Sub:
        case Op::Mul: r = one_pass(n.args[0], d) || one_pass(n.args[1], d); break;
        case Op::Neg: r = one_pass(n.args[0], d); break;
        case Op::Div:
        case Op::DivOrZero: r = !varies(n.args[1], d) && one_pass(n.args[0], d); break;
        case Op::Where:
          r = !varies(n.args[0], d) && (one_pass(n.args[1], d) || one_pass(n.args[2], d));
          break;
        default: break;
      }
    }
    return capable[id] = r;
  }
  // Whether factor `f`, a float + or - of terms computed without a reduction over D (a value
  // per key: v + c, v - lam * u) in a product whose other factors `rest` hold a one-pass exp, is
  // distributed (see the header): sum(e * (v + c)) = sum(e * v) + sum(e * c). Integer terms stay
  // whole (their sum wraps per key), and so do terms that are sums themselves ((v + c) - c):
  // one level, so that no split separates terms that cancel inside the value.
  bool distributes(int f, const std::vector<int>& rest, const DimSet& d) {
    const Node n = b.node(f);
    if (!distribute_values || (n.op != Op::Add && n.op != Op::Sub)) return false;
    for (int x : {f, n.args[0], n.args[1]})
      if (!is_float(b.node(x).type)) return false;
    if (depends(n.args[0], d) || depends(n.args[1], d)) return false;
    if (holds_sum(n.args[0]) || holds_sum(n.args[1])) return false;
    for (int r : rest)
      if (one_pass(r, d)) return true;
    return false;
  }
  // Whether `id` is a + or - through products, negations, quotients' numerators and casts.
  bool holds_sum(int id) {
    const Node n = b.node(id);
    switch (n.op) {
      case Op::Add:
      case Op::Sub: return true;
      case Op::Mul: return holds_sum(n.args[0]) || holds_sum(n.args[1]);
      case Op::Neg:
      case Op::Cast:
      case Op::Div:
      case Op::DivOrZero: return holds_sum(n.args[0]);
      default: return false;
    }
  }
  void split() {
    if (++splits >= kMaxTerms) throw TooManyTerms{};
  }
  std::vector<std::string> names(const DimSet& d) {
    std::vector<std::string> out;
    for (int x : d) out.push_back(b.program().dims[x]);
    return out;
  }
  Value extent_product(int like, const DimSet& d) {
    bool integer = is_integer(b.node(like).type);
    Value c = b.constant(1.0, integer ? DType::i64 : DType::f32);
    for (int x : d) {
      Value s = b.size(b.program().dims[x]);
      c = c * (integer ? s : b.cast(s, DType::f32));
    }
    return c;
  }
  // The sum over D of NaN terms: NaN, or 0 when D is empty.
  Value nan_sum(int like, const DimSet& d) {
    Value count = b.constant(1.0, DType::i64);
    for (int x : d) count = count * b.size(b.program().dims[x]);
    DType t = b.node(like).type;
    return b.where(count == b.constant(0.0, DType::i64), b.constant(0.0, t), b.constant(NAN, t));
  }
  void factors(int id, std::vector<int>& out) {
    Node n = b.node(id);
    if (n.op == Op::Mul) {
      factors(n.args[0], out);
      factors(n.args[1], out);
    } else {
      out.push_back(id);
    }
  }
  Value product(const std::vector<int>& fs) {
    Value v{&b, fs[0]};
    for (size_t i = 1; i < fs.size(); ++i) v = v * Value{&b, fs[i]};
    return v;
  }
  Value plain(int x, const DimSet& d) { return b.sum(Value{&b, x}, names(d)); }
  bool is_nan(int id) { return is_const(b.program(), id, NAN); }

  Value sum_of(int x, const DimSet& d) {
    DimSet present, missing;
    for (int k : d) (dimset_contains(b.node(x).dims, k) ? present : missing).push_back(k);
    if (!missing.empty()) {
      Value s = present.empty() ? Value{&b, x} : sum_of(x, present);
      return s * extent_product(s.id, missing);
    }
    if (!depends(x, d)) return plain(x, d);
    Node n = b.node(x);
    switch (n.op) {
      case Op::Add:
      case Op::Sub:
        if (!one_pass(x, d)) return plain(x, d);
        split();
        if (n.op == Op::Add) return sum_of(n.args[0], d) + sum_of(n.args[1], d);
        return sum_of(n.args[0], d) - sum_of(n.args[1], d);
      case Op::Neg: return -sum_of(n.args[0], d);
      case Op::Div:
      case Op::DivOrZero:
        if (!varies(n.args[1], d))
          return b.binary(n.op, sum_of(n.args[0], d), Value{&b, n.args[1]});
        return plain(x, d);
      case Op::Mul:
      case Op::Where: {
        std::vector<int> fs, inv, var;
        factors(x, fs);
        for (int f : fs) (varies(f, d) ? var : inv).push_back(f);
        // Invariant factors leave first, so that they multiply what the rest becomes, a
        // normalized sum included: lam * div_or_zero(sum(e * v), L), whose strong zero gives 0
        // for lam = 0 even where L is NaN (div_or_zero(lam * sum(e * v), L) would be NaN).
        if (!inv.empty() && !var.empty()) return product(inv) * sum_of(product(var).id, d);
        // (from here on every factor varies along D)
        for (size_t i = 0; i < var.size(); ++i) {
          Node f = b.node(var[i]);
          std::vector<int> rest;
          for (size_t j = 0; j < var.size(); ++j)
            if (j != i) rest.push_back(var[j]);
          auto with = [&](int first) {
            std::vector<int> all = {first};
            all.insert(all.end(), rest.begin(), rest.end());
            return product(all).id;
          };
          if ((f.op == Op::Add || f.op == Op::Sub) &&
              (one_pass(var[i], d) || distributes(var[i], rest, d))) {
            split();
            Value a = sum_of(with(f.args[0]), d), c = sum_of(with(f.args[1]), d);
            return f.op == Op::Add ? a + c : a - c;
          }
          if (f.op == Op::Neg) return -sum_of(with(f.args[0]), d);
          if ((f.op == Op::Div || f.op == Op::DivOrZero) && !varies(f.args[1], d))
            return b.binary(f.op, sum_of(with(f.args[0]), d), Value{&b, f.args[1]});
          if (f.op == Op::Where && one_pass(var[i], d)) {
            split();
            Value c{&b, f.args[0]};
            auto branch = [&](int v) {
              return is_nan(v) ? nan_sum(x, d) : sum_of(with(v), d);
            };
            Value t = branch(f.args[1]), e = branch(f.args[2]);
            return b.where(c, t, e);
          }
        }
        return plain(x, d);
      }
      default: return plain(x, d);
    }
  }
};

}  // namespace

Program online_rewrite(const Program& p, bool distribute_values) {
  Program normal = rebuild(p, [&](ProgramBuilder& b, int id, const std::vector<int>& args) {
    const Node& n = p.nodes[id];
    if (n.op != Op::Exp && n.op != Op::Exp2) return -1;
    return normalize_exp(b, n, args[0]);
  });
  return rebuild(normal, [&](ProgramBuilder& b, int id, const std::vector<int>& args) -> int {
    const Node& n = normal.nodes[id];
    if (n.op != Op::Sum) return -1;
    if (!OnlineRewriter{b, {}, {}, 0}.depends(args[0], n.reduce)) return -1;
    // Values computed per key are distributed where that stays within kMaxTerms sums; past it
    // the sum is expanded without them, and past it again left whole: the planner then
    // materializes what it needs (see the header).
    Value v{&b, -1};
    for (bool distribute : {distribute_values, false}) {
      OnlineRewriter rw{b, {}, {}, 0, distribute};
      try {
        v = rw.sum_of(args[0], n.reduce);
        break;
      } catch (const TooManyTerms&) {
        if (!distribute) return -1;
      }
    }
    // Keep the node's type (an integer sum stays integer, a float sum f32).
    if (b.node(v.id).type != n.type) v = b.cast(v, n.type);
    return v.id;
  });
}

}  // namespace flashgen
