// The reference evaluator: every node of a Program evaluated unfused, in f64, as a dense tensor
// over the node's dimension set (dims sorted by id, row-major), exactly as docs/language.md says.
//
// Representation: a node's value is a buffer of doubles (float types) or of int64 (i32, i64,
// bool as 0/1) plus one stride per dimension of the node. Operands of an element-wise op are
// read through per-dimension strides over the op's iteration space (stride 0 for a dimension the
// operand lacks), so broadcasting costs no copies; a parameter read is a strided view of the
// prepared input (no transpose). Only nodes some output needs are evaluated; a buffer is freed
// after its last consumer ran. `sum(a * b, r)` is evaluated without materializing the product
// when nothing else reads it (the contractions of attention are the largest tensors).
//
// Semantics, where docs/language.md leaves a choice:
// - Float-typed nodes (f32, and bf16/f16 arithmetic, which promotes to f32) compute exactly in
//   f64 and round their result to their type, once per node: an f32 value is an f32 value, as
//   in the compiled code (so `s + -1e9` absorbs s there too). Reductions and softmax accumulate
//   in f64 and round their results. Outputs round to their declared type
//   (evaluate_reference_f64 skips that last rounding).
// - Multiplication has a strong zero (0 * NaN = 0 * inf = 0; ir/scalar_semantics.h), also in
//   the products of a fused sum: a key whose weight is 0 contributes nothing.
// - Integer-typed nodes compute exactly in int64 with two's-complement wrap-around; nodes typed
//   i32 wrap modulo 2^32 after every op (what 32-bit arithmetic in compiled code does). `%` is
//   the floor modulo (sign of the divisor); `x % 0` is a CallError.
// - A cast from float to an integer type truncates toward zero, saturates at the type's range
//   and gives 0 for NaN (the PTX cvt.rzi.sat rule).
// - max/min/maximum/minimum/clamp propagate NaN. max of an empty set is -inf (float) or the
//   i64 minimum (integer); min of an empty set is +inf or the i64 maximum; sum of an empty set
//   is 0; mean of an empty set is NaN (0/0).
// - softmax: exp(x - max) / sum(...), and 0 along the dimension where every element is -inf.
//   logsumexp: max + log(sum(exp(x - max))), and -inf where every element is -inf (or the
//   dimension is empty).
// - A gather index outside [0, extent) is a CallError naming the parameter, the index value and
//   the dimension.
// Tests: tests/ref/evaluator_test.cpp (hand-computed cases), tests/ref/attention_test.cpp
// (against independent loops on random inputs at odd sizes).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "flashgen/error.h"
#include "flashgen/ref.h"
#include "ir/scalar_semantics.h"

namespace flashgen {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMaxOperands = 16;

// Per-element semantics come from ir/scalar_semantics.h (shared with constant folding).
using scalar::add_w;
using scalar::float_to_int;
using scalar::int_storage;
using scalar::mul_w;
using scalar::wrap;

// A node's value: dense buffer plus one stride per dimension of the node (sorted dim ids).
struct Val {
  std::shared_ptr<std::vector<double>> f;   // float types
  std::shared_ptr<std::vector<int64_t>> i;  // i32, i64, bool
  std::vector<int64_t> strides;
  bool is_int() const { return i != nullptr; }
};

// A reader of either storage as double or as int64.
struct Rd {
  const double* f = nullptr;
  const int64_t* i = nullptr;
  explicit Rd(const Val& v) : f(v.f ? v.f->data() : nullptr), i(v.i ? v.i->data() : nullptr) {}
  double d(int64_t o) const { return f ? f[o] : static_cast<double>(i[o]); }
  int64_t n(int64_t o) const { return i ? i[o] : static_cast<int64_t>(f[o]); }
};

// Loops over the row-major iteration space `ext`, calling f(offsets) where offsets[k] advances
// by st[k][d] along dimension d. The innermost dimension runs as a plain loop.
template <class F>
void nd_loop(const std::vector<int64_t>& ext, const std::vector<std::vector<int64_t>>& st, F&& f) {
  const int R = static_cast<int>(ext.size());
  const int K = static_cast<int>(st.size());
  if (K > kMaxOperands) throw CallError("reference evaluator: too many operands");
  for (int64_t e : ext)
    if (e == 0) return;
  std::array<int64_t, kMaxOperands> off{};
  if (R == 0) {
    f(off.data());
    return;
  }
  std::array<int64_t, kMaxOperands> inner{};
  for (int k = 0; k < K; ++k) inner[k] = st[k][R - 1];
  std::vector<int64_t> idx(R, 0);
  const int64_t n = ext[R - 1];
  for (;;) {
    std::array<int64_t, kMaxOperands> o = off;
    for (int64_t j = 0; j < n; ++j) {
      f(o.data());
      for (int k = 0; k < K; ++k) o[k] += inner[k];
    }
    int d = R - 2;
    for (; d >= 0; --d) {
      for (int k = 0; k < K; ++k) off[k] += st[k][d];
      if (++idx[d] < ext[d]) break;
      for (int k = 0; k < K; ++k) off[k] -= st[k][d] * ext[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// The strides of a value over `dims` as seen from an iteration space over `space` (a superset).
std::vector<int64_t> strides_in(const DimSet& space, const DimSet& dims,
                                const std::vector<int64_t>& strides) {
  std::vector<int64_t> out(space.size(), 0);
  size_t j = 0;
  for (size_t i = 0; i < space.size(); ++i) {
    if (j < dims.size() && dims[j] == space[i]) out[i] = strides[j++];
  }
  return out;
}

class Evaluator {
 public:
  Evaluator(const Program& p, const TensorMap& prepared, const Extents& extents) : p_(p) {
    for (const auto& d : p.dims) ext_.push_back(extents.at(d));
    for (const Parameter& par : p.params) params_.push_back(load_param(prepared.at(par.name)));
  }

  // Evaluates every node the outputs need; returns the outputs' values.
  std::vector<Val> run() {
    const int N = static_cast<int>(p_.nodes.size());
    std::vector<bool> live(N, false), is_out(N, false);
    for (const Output& o : p_.outputs) live[o.node] = is_out[o.node] = true;
    for (int i = N - 1; i >= 0; --i)
      if (live[i])
        for (int a : p_.nodes[i].args) live[a] = true;
    std::vector<int> uses(N, 0);
    for (int i = 0; i < N; ++i)
      if (live[i])
        for (int a : p_.nodes[i].args) ++uses[a];
    // A product read only by one sum is fused into it.
    fused_.assign(N, false);
    for (int i = 0; i < N; ++i) {
      const Node& n = p_.nodes[i];
      if (live[i] && n.op == Op::Sum && p_.nodes[n.args[0]].op == Op::Mul &&
          uses[n.args[0]] == 1 && !is_out[n.args[0]]) {
        fused_[n.args[0]] = true;
      }
    }
    vals_.assign(N, Val{});
    auto release = [&](int a) {
      if (--uses[a] == 0 && !is_out[a]) vals_[a] = Val{};
    };
    for (int i = 0; i < N; ++i) {
      if (!live[i] || fused_[i]) continue;
      vals_[i] = eval(i);
      round_to_type(p_.nodes[i], vals_[i]);
      for (int a : p_.nodes[i].args) {
        if (fused_[a]) {
          for (int b : p_.nodes[a].args) release(b);
        } else {
          release(a);
        }
      }
    }
    std::vector<Val> out;
    for (const Output& o : p_.outputs) out.push_back(vals_[o.node]);
    return out;
  }

  std::vector<int64_t> extents_of(const DimSet& dims) const {
    std::vector<int64_t> e;
    for (int d : dims) e.push_back(ext_[d]);
    return e;
  }

 private:
  Val load_param(const Tensor& t) {
    Val v;
    int64_t n = t.numel();
    if (int_storage(t.dtype())) {
      v.i = std::make_shared<std::vector<int64_t>>(n);
      const uint8_t* src = static_cast<const uint8_t*>(t.data());
      for (int64_t k = 0; k < n; ++k) {
        if (t.dtype() == DType::i64) std::memcpy(&(*v.i)[k], src + 8 * k, 8);
        else if (t.dtype() == DType::i32) {
          int32_t x;
          std::memcpy(&x, src + 4 * k, 4);
          (*v.i)[k] = x;
        } else {
          (*v.i)[k] = src[k] ? 1 : 0;
        }
      }
    } else {
      v.f = std::make_shared<std::vector<double>>(n);
      for (int64_t k = 0; k < n; ++k) (*v.f)[k] = t.get(k);
    }
    v.strides = t.strides();  // memory order; contiguous
    return v;
  }

  // A fresh contiguous value over `dims` of int or float storage.
  // The reference materializes every value, so each must fit: more than 2^kMaxElementsLog2
  // elements is a CallError, a failed allocation a BackendError (out of memory), both naming
  // the value's dimensions and extents.
  Val fresh(const DimSet& dims, bool is_int, double fill = 0, int64_t ifill = 0) {
    Val v;
    const std::vector<int64_t> shape = extents_of(dims);
    const int64_t n = checked_element_count(shape);
    auto describe = [&] {
      std::string r = "value over [";
      for (size_t k = 0; k < dims.size(); ++k)
        r += (k ? ", " : "") + p_.dims[dims[k]] + "=" + std::to_string(shape[k]);
      return r + "]";
    };
    if (n < 0) {
      throw CallError("the reference evaluator cannot hold a " + describe() + ": more than 2^" +
                      std::to_string(kMaxElementsLog2) + " elements");
    }
    check_fits_memory(static_cast<uint64_t>(n) * 8,
                      "the reference evaluator's " + describe());
    try {
      if (is_int) v.i = std::make_shared<std::vector<int64_t>>(n, ifill);
      else v.f = std::make_shared<std::vector<double>>(n, fill);
    } catch (const std::bad_alloc&) {
      throw BackendError("out of memory: the reference evaluator needs " +
                         std::to_string(n * 8) + " bytes for a " + describe());
    } catch (const std::length_error&) {
      throw BackendError("out of memory: the reference evaluator needs " +
                         std::to_string(n * 8) + " bytes for a " + describe());
    }
    v.strides.assign(dims.size(), 0);
    int64_t acc = 1;
    for (size_t k = dims.size(); k-- > 0;) v.strides[k] = acc, acc *= ext_[dims[k]];
    return v;
  }

  const Val& arg(const Node& n, int k) { return vals_[n.args[k]]; }
  const DimSet& arg_dims(const Node& n, int k) { return p_.nodes[n.args[k]].dims; }

  // Iterates over `space`, with operand 0 = `out` (over out_dims) and the given args.
  template <class F>
  void loop(const DimSet& space, const Val& out, const DimSet& out_dims,
            const std::vector<std::pair<const Val*, const DimSet*>>& args, F&& f) {
    std::vector<std::vector<int64_t>> st;
    st.push_back(strides_in(space, out_dims, out.strides));
    for (const auto& a : args) st.push_back(strides_in(space, *a.second, a.first->strides));
    nd_loop(extents_of(space), st, f);
  }

  Val eval(int id);
  // A float value holds values of its type: f32 results (arithmetic, reductions, softmax) are
  // rounded once from their exact f64 value. Parameters, gathers and constants already are.
  void round_to_type(const Node& n, Val& v) {
    if (v.is_int() || n.op == Op::Param || n.op == Op::Gather || n.op == Op::Const) return;
    for (double& x : *v.f) x = round_to_dtype(x, n.type);
  }
  Val eval_unary(const Node& n);
  Val eval_binary(const Node& n);
  Val eval_reduce(const Node& n);
  Val eval_fused_sum(const Node& n);
  Val eval_softmax_like(const Node& n);
  Val eval_gather(const Node& n);

  const Program& p_;
  std::vector<int64_t> ext_;
  std::vector<Val> params_;
  std::vector<Val> vals_;
  std::vector<bool> fused_;
};

Val Evaluator::eval(int id) {
  const Node& n = p_.nodes[id];
  const bool ii = int_storage(n.type);
  switch (n.op) {
    case Op::Param: {
      const Parameter& par = p_.params[n.param];
      Val v = params_[n.param];
      // The input is in memory order; express its strides in sorted-dim order.
      std::vector<int64_t> s(n.dims.size());
      for (size_t j = 0; j < par.dims.size(); ++j) {
        s[std::lower_bound(n.dims.begin(), n.dims.end(), par.dims[j]) - n.dims.begin()] =
            v.strides[j];
      }
      v.strides = s;
      return v;
    }
    case Op::Const: {
      if (ii) return fresh({}, true, 0, scalar::int_constant(n.value, n.type));
      return fresh({}, false, n.value);
    }
    case Op::Index: {
      Val v = fresh(n.dims, true);
      for (int64_t k = 0; k < ext_[n.dim]; ++k) (*v.i)[k] = k;
      return v;
    }
    case Op::Size: return fresh({}, true, 0, ext_[n.dim]);
    case Op::Where: {
      Val o = fresh(n.dims, ii);
      Rd c(arg(n, 0)), a(arg(n, 1)), b(arg(n, 2));
      auto args = std::vector<std::pair<const Val*, const DimSet*>>{
          {&arg(n, 0), &arg_dims(n, 0)}, {&arg(n, 1), &arg_dims(n, 1)},
          {&arg(n, 2), &arg_dims(n, 2)}};
      if (ii) {
        int64_t* w = o.i->data();
        loop(n.dims, o, n.dims, args, [&](const int64_t* off) {
          w[off[0]] = wrap(n.type, c.n(off[1]) ? a.n(off[2]) : b.n(off[3]));
        });
      } else {
        double* w = o.f->data();
        loop(n.dims, o, n.dims, args, [&](const int64_t* off) {
          w[off[0]] = c.n(off[1]) ? a.d(off[2]) : b.d(off[3]);
        });
      }
      return o;
    }
    case Op::Clamp: {
      Val o = fresh(n.dims, ii);
      Rd x(arg(n, 0)), lo(arg(n, 1)), hi(arg(n, 2));
      auto args = std::vector<std::pair<const Val*, const DimSet*>>{
          {&arg(n, 0), &arg_dims(n, 0)}, {&arg(n, 1), &arg_dims(n, 1)},
          {&arg(n, 2), &arg_dims(n, 2)}};
      if (ii) {
        int64_t* w = o.i->data();
        loop(n.dims, o, n.dims, args, [&](const int64_t* off) {
          w[off[0]] = wrap(n.type, scalar::int_clamp(x.n(off[1]), lo.n(off[2]), hi.n(off[3])));
        });
      } else {
        double* w = o.f->data();
        loop(n.dims, o, n.dims, args, [&](const int64_t* off) {
          w[off[0]] = scalar::float_clamp(x.d(off[1]), lo.d(off[2]), hi.d(off[3]));
        });
      }
      return o;
    }
    case Op::Sum: case Op::Max: case Op::Min: case Op::Mean:
      if (n.op == Op::Sum && fused_[n.args[0]]) return eval_fused_sum(n);
      return eval_reduce(n);
    case Op::Softmax: case Op::LogSumExp: return eval_softmax_like(n);
    case Op::Gather: return eval_gather(n);
    default:
      if (n.args.size() == 1) return eval_unary(n);
      if (n.args.size() == 2) return eval_binary(n);
  }
  throw CallError(std::string("reference evaluator: unsupported operation ") + op_name(n.op));
}

Val Evaluator::eval_unary(const Node& n) {
  const bool ii = int_storage(n.type);
  const Val& a = arg(n, 0);
  Val o = fresh(n.dims, ii);
  Rd x(a);
  auto args = std::vector<std::pair<const Val*, const DimSet*>>{{&a, &arg_dims(n, 0)}};
  auto mapf = [&](auto fn) {
    double* w = o.f->data();
    loop(n.dims, o, n.dims, args, [&](const int64_t* off) { w[off[0]] = fn(x.d(off[1])); });
  };
  auto mapi = [&](auto fn) {
    int64_t* w = o.i->data();
    loop(n.dims, o, n.dims, args,
         [&](const int64_t* off) { w[off[0]] = wrap(n.type, fn(x.n(off[1]))); });
  };
  if (n.op == Op::Cast) {
    if (!ii) {
      DType t = n.type;
      if (a.is_int()) {
        const int64_t* src = a.i->data();
        double* w = o.f->data();
        loop(n.dims, o, n.dims, args, [&](const int64_t* off) {
          w[off[0]] = scalar::int_to_float(src[off[1]], t);
        });
      } else {
        mapf([t](double v) { return round_to_dtype(v, t); });
      }
    } else if (a.is_int()) {
      mapi([](int64_t v) { return v; });
    } else {
      int64_t* w = o.i->data();
      DType t = n.type;
      loop(n.dims, o, n.dims, args,
           [&](const int64_t* off) { w[off[0]] = float_to_int(x.d(off[1]), t); });
    }
    return o;
  }
  const Op op = n.op;
  if (ii) {
    mapi([op](int64_t v) { return scalar::int_unary(op, v); });
  } else {
    mapf([op](double v) { return scalar::float_unary(op, v); });
  }
  return o;
}

Val Evaluator::eval_binary(const Node& n) {
  const bool ii = int_storage(n.type);
  const Val& a = arg(n, 0);
  const Val& b = arg(n, 1);
  Val o = fresh(n.dims, ii);
  Rd x(a), y(b);
  auto args = std::vector<std::pair<const Val*, const DimSet*>>{{&a, &arg_dims(n, 0)},
                                                                 {&b, &arg_dims(n, 1)}};
  auto mapf = [&](auto fn) {
    double* w = o.f->data();
    loop(n.dims, o, n.dims, args,
         [&](const int64_t* off) { w[off[0]] = fn(x.d(off[1]), y.d(off[2])); });
  };
  auto mapi = [&](auto fn) {
    int64_t* w = o.i->data();
    loop(n.dims, o, n.dims, args, [&](const int64_t* off) {
      w[off[0]] = wrap(n.type, fn(x.n(off[1]), y.n(off[2])));
    });
  };
  // Comparisons run in the operands' promoted type: exact for two integers.
  auto cmp = [&](auto fn) {
    int64_t* w = o.i->data();
    if (a.is_int() && b.is_int()) {
      loop(n.dims, o, n.dims, args,
           [&](const int64_t* off) { w[off[0]] = fn(x.n(off[1]), y.n(off[2])); });
    } else {
      loop(n.dims, o, n.dims, args,
           [&](const int64_t* off) { w[off[0]] = fn(x.d(off[1]), y.d(off[2])); });
    }
  };
  const Op op = n.op;
  if (scalar::is_compare(op)) {
    cmp([op](auto u, auto v) { return scalar::compare(op, u, v); });
    return o;
  }
  if (ii) {
    const SourceLoc loc = n.loc;
    mapi([op, loc](int64_t u, int64_t v) { return scalar::int_binary(op, u, v, loc); });
  } else {
    mapf([op](double u, double v) { return scalar::float_binary(op, u, v); });
  }
  return o;
}

Val Evaluator::eval_reduce(const Node& n) {
  const bool ii = int_storage(n.type);
  const Val& a = arg(n, 0);
  const DimSet& space = arg_dims(n, 0);
  auto args = std::vector<std::pair<const Val*, const DimSet*>>{{&a, &space}};
  Rd x(a);
  if (ii) {
    int64_t init = n.op == Op::Max ? std::numeric_limits<int64_t>::min()
                 : n.op == Op::Min ? std::numeric_limits<int64_t>::max() : 0;
    Val o = fresh(n.dims, true, 0, init);
    int64_t* w = o.i->data();
    if (n.op == Op::Sum) {
      loop(space, o, n.dims, args,
           [&](const int64_t* off) { w[off[0]] = add_w(w[off[0]], x.n(off[1])); });
    } else if (n.op == Op::Max) {
      loop(space, o, n.dims, args,
           [&](const int64_t* off) { w[off[0]] = std::max(w[off[0]], x.n(off[1])); });
    } else if (n.op == Op::Min) {
      loop(space, o, n.dims, args,
           [&](const int64_t* off) { w[off[0]] = std::min(w[off[0]], x.n(off[1])); });
    } else {
      throw CallError("reference evaluator: mean with an integer result");
    }
    for (auto& v : *o.i) v = wrap(n.type, v);
    return o;
  }
  double init = n.op == Op::Max ? -kInf : n.op == Op::Min ? kInf : 0.0;
  Val o = fresh(n.dims, false, init);
  double* w = o.f->data();
  if (n.op == Op::Sum || n.op == Op::Mean) {
    loop(space, o, n.dims, args, [&](const int64_t* off) { w[off[0]] += x.d(off[1]); });
    if (n.op == Op::Mean) {
      double count = 1;
      for (int d : n.reduce) count *= static_cast<double>(ext_[d]);
      for (auto& v : *o.f) v /= count;  // 0/0 = NaN for an empty set
    }
  } else if (n.op == Op::Max) {
    loop(space, o, n.dims, args, [&](const int64_t* off) {
      double v = x.d(off[1]);
      if (v > w[off[0]] || std::isnan(v)) w[off[0]] = std::isnan(w[off[0]]) ? w[off[0]] : v;
    });
  } else {
    loop(space, o, n.dims, args, [&](const int64_t* off) {
      double v = x.d(off[1]);
      if (v < w[off[0]] || std::isnan(v)) w[off[0]] = std::isnan(w[off[0]]) ? w[off[0]] : v;
    });
  }
  return o;
}

// sum(a * b, r) without the product in memory.
Val Evaluator::eval_fused_sum(const Node& n) {
  const Node& mul = p_.nodes[n.args[0]];
  const Val& a = vals_[mul.args[0]];
  const Val& b = vals_[mul.args[1]];
  const DimSet& space = mul.dims;
  auto args = std::vector<std::pair<const Val*, const DimSet*>>{
      {&a, &p_.nodes[mul.args[0]].dims}, {&b, &p_.nodes[mul.args[1]].dims}};
  Rd x(a), y(b);
  if (int_storage(n.type)) {
    Val o = fresh(n.dims, true);
    int64_t* w = o.i->data();
    DType mt = mul.type;
    loop(space, o, n.dims, args, [&](const int64_t* off) {
      w[off[0]] = add_w(w[off[0]], wrap(mt, mul_w(x.n(off[1]), y.n(off[2]))));
    });
    for (auto& v : *o.i) v = wrap(n.type, v);
    return o;
  }
  Val o = fresh(n.dims, false);
  double* w = o.f->data();
  const DType mt = mul.type;  // each product is a value of the product's type
  loop(space, o, n.dims, args, [&](const int64_t* off) {
    w[off[0]] += round_to_dtype(scalar::mul0(x.d(off[1]), y.d(off[2])), mt);
  });
  return o;
}

// softmax(x, r) and logsumexp(x, r), through max, exp and sum over r.
Val Evaluator::eval_softmax_like(const Node& n) {
  const Val& a = arg(n, 0);
  const DimSet& xd = arg_dims(n, 0);
  const DimSet rest = dimset_minus(xd, n.reduce);
  Rd x(a);
  auto args = std::vector<std::pair<const Val*, const DimSet*>>{{&a, &xd}};
  // Max over r (NaN propagates).
  Val m = fresh(rest, false, -kInf);
  double* mw = m.f->data();
  loop(xd, m, rest, args, [&](const int64_t* off) {
    double v = x.d(off[1]);
    if (v > mw[off[0]] || std::isnan(v)) mw[off[0]] = std::isnan(mw[off[0]]) ? mw[off[0]] : v;
  });
  // e = exp(x - max) (0 where the max is -inf), and its sum over r.
  Val e = fresh(xd, false);
  Val s = fresh(rest, false);
  double* ew = e.f->data();
  double* sw = s.f->data();
  {
    std::vector<std::vector<int64_t>> st = {strides_in(xd, xd, e.strides),
                                            strides_in(xd, rest, m.strides),
                                            strides_in(xd, xd, a.strides)};
    nd_loop(extents_of(xd), st, [&](const int64_t* off) {
      double mx = mw[off[1]];
      double v = mx == -kInf ? 0.0 : std::exp(x.d(off[2]) - mx);
      ew[off[0]] = v;
      sw[off[1]] += v;
    });
  }
  if (n.op == Op::LogSumExp) {
    Val o = fresh(rest, false);
    for (size_t k = 0; k < o.f->size(); ++k) {
      (*o.f)[k] = mw[k] == -kInf ? -kInf : mw[k] + std::log(sw[k]);
    }
    return o;
  }
  std::vector<std::vector<int64_t>> st = {strides_in(xd, xd, e.strides),
                                          strides_in(xd, rest, s.strides)};
  nd_loop(extents_of(xd), st, [&](const int64_t* off) {
    double den = sw[off[1]];
    ew[off[0]] = den == 0 ? 0.0 : ew[off[0]] / den;
  });
  return e;
}

Val Evaluator::eval_gather(const Node& n) {
  const Parameter& par = p_.params[n.param];
  const Val& src = params_[n.param];
  const bool ii = src.is_int();
  Val o = fresh(n.dims, ii);
  std::vector<std::pair<const Val*, const DimSet*>> args;
  std::vector<Rd> idx;
  for (size_t k = 0; k < n.args.size(); ++k) {
    args.push_back({&arg(n, static_cast<int>(k)), &arg_dims(n, static_cast<int>(k))});
    idx.emplace_back(arg(n, static_cast<int>(k)));
  }
  const size_t rank = par.dims.size();
  std::vector<int64_t> pext(rank);
  for (size_t j = 0; j < rank; ++j) pext[j] = ext_[par.dims[j]];
  const double* sf = ii ? nullptr : src.f->data();
  const int64_t* si = ii ? src.i->data() : nullptr;
  double* wf = ii ? nullptr : o.f->data();
  int64_t* wi = ii ? o.i->data() : nullptr;
  loop(n.dims, o, n.dims, args, [&](const int64_t* off) {
    int64_t po = 0;
    for (size_t j = 0; j < rank; ++j) {
      int64_t v = idx[j].n(off[j + 1]);
      if (v < 0 || v >= pext[j]) {
        std::string where = n.loc.line ? " (at " + std::to_string(n.loc.line) + ":" +
                                             std::to_string(n.loc.col) + ")"
                                       : "";
        throw CallError("index " + std::to_string(v) + " is out of range for parameter '" +
                        par.name + "' dimension '" + p_.dims[par.dims[j]] + "' (extent " +
                        std::to_string(pext[j]) + ")" + where);
      }
      po += v * src.strides[j];
    }
    if (ii) wi[off[0]] = si[po];
    else wf[off[0]] = sf[po];
  });
  return o;
}

// Lays out an output value in the output's declared dim order, as `type`.
Tensor make_output(const Program& p, const Output& out, const Val& v, const Evaluator& ev,
                   DType type) {
  const DimSet& nd = p.nodes[out.node].dims;
  std::vector<int64_t> shape;
  std::vector<int64_t> st(out.dims.size());
  for (size_t j = 0; j < out.dims.size(); ++j) {
    shape.push_back(ev.extents_of({out.dims[j]})[0]);
    st[j] = v.strides[std::lower_bound(nd.begin(), nd.end(), out.dims[j]) - nd.begin()];
  }
  Tensor t(type, shape);
  std::vector<std::vector<int64_t>> sts = {st};
  const DType declared = out.type;
  int64_t flat = 0;
  if (v.is_int() && is_integer(type)) {
    uint8_t* w = static_cast<uint8_t*>(t.data());
    const int64_t* r = v.i->data();
    nd_loop(shape, sts, [&](const int64_t* off) {
      int64_t x = wrap(type, r[off[0]]);
      if (type == DType::i32) {
        int32_t y = static_cast<int32_t>(x);
        std::memcpy(w + 4 * flat, &y, 4);
      } else {
        std::memcpy(w + 8 * flat, &x, 8);
      }
      ++flat;
    });
  } else if (v.is_int()) {
    const int64_t* r = v.i->data();
    nd_loop(shape, sts, [&](const int64_t* off) {
      t.set(flat++, static_cast<double>(wrap(declared, r[off[0]])));
    });
  } else {
    Rd r(v);
    nd_loop(shape, sts, [&](const int64_t* off) { t.set(flat++, r.d(off[0])); });
  }
  return t;
}

// f64: float outputs keep their unrounded value; integer and bool outputs keep their declared
// type (exact, also above 2^53).
TensorMap evaluate(const Program& p, const TensorMap& inputs, const Extents& extra, bool f64) {
  Extents ext = bind_extents(p, inputs, extra);
  TensorMap prepared = prepare_inputs(p, inputs);
  Evaluator ev(p, prepared, ext);
  std::vector<Val> vals = ev.run();
  TensorMap out;
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const Output& o = p.outputs[k];
    out[o.name] = make_output(p, o, vals[k], ev, f64 && is_float(o.type) ? DType::f64 : o.type);
  }
  return out;
}

}  // namespace

TensorMap evaluate_reference(const Program& p, const TensorMap& inputs, const Extents& extra) {
  return evaluate(p, inputs, extra, false);
}

TensorMap evaluate_reference_f64(const Program& p, const TensorMap& inputs,
                                 const Extents& extra) {
  return evaluate(p, inputs, extra, true);
}

}  // namespace flashgen
