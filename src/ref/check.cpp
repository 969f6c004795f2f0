// Outputs of a backend against the reference: see include/flashgen/check.h.
// Tests: tests/ref/check_test.cpp.
#include "flashgen/check.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace flashgen {
namespace {

// Significand bits (with the implicit one) of the float types; 0 for the others.
int significand_bits(DType t) {
  switch (t) {
    case DType::f64: return 53;
    case DType::f32: return 24;
    case DType::f16: return 11;
    case DType::bf16: return 8;
    case DType::f8e4m3: return 4;
    case DType::f8e5m2: return 3;
    default: return 0;
  }
}

// Element i of an integer or bool tensor, exactly.
int64_t int_value(const Tensor& t, int64_t i) {
  const auto* base = static_cast<const uint8_t*>(t.data());
  if (t.dtype() == DType::i64) {
    int64_t v;
    std::memcpy(&v, base + 8 * i, 8);
    return v;
  }
  if (t.dtype() == DType::i32) {
    int32_t v;
    std::memcpy(&v, base + 4 * i, 4);
    return v;
  }
  return base[i] != 0;
}

}  // namespace

double check_tolerance(const Program& p, const Output& out, DType* precision) {
  DType least = out.type;
  for (const Parameter& par : p.params) {
    if (!is_float(par.type)) continue;
    if (significand_bits(least) == 0 || significand_bits(par.type) < significand_bits(least))
      least = par.type;
  }
  if (precision) *precision = least;
  const int bits = significand_bits(least);
  if (bits == 0) return 0;  // integers and bools from integers and bools: exact
  if (bits >= 24) return std::ldexp(1.0, -13);
  return std::ldexp(2.0, -(bits - 1));  // 2 units in the last place at 1
}

std::vector<OutputCheck> check_outputs(const Program& p, const TensorMap& got,
                                       const TensorMap& ref) {
  std::vector<OutputCheck> out;
  for (const Output& o : p.outputs) {
    OutputCheck c;
    c.name = o.name;
    c.type = o.type;
    c.tolerance = check_tolerance(p, o, &c.precision);
    const Tensor g = got.at(o.name).contiguous();
    const Tensor r = ref.at(o.name).contiguous();
    const bool exact = !is_float(g.dtype()) && !is_float(r.dtype()) &&
                       g.dtype() != DType::f64 && r.dtype() != DType::f64;
    for (int64_t i = 0; i < r.numel(); ++i) {
      if (exact) {  // integers compare as integers (doubles lose bits above 2^53)
        const int64_t a = int_value(g, i), b = int_value(r, i);
        if (a != b) {
          const double e = std::abs(static_cast<double>(a) - static_cast<double>(b));
          if (c.worst < 0 || e > c.max_abs) c.max_abs = std::max(e, 1.0), c.worst = i;
        }
        c.scale = std::max(c.scale, std::abs(static_cast<double>(b)));
        continue;
      }
      const double a = g.get(i), b = r.get(i);
      if (std::isfinite(b)) c.scale = std::max(c.scale, std::abs(b));
      if (std::isfinite(a) && std::isfinite(b)) {
        const double e = std::abs(a - b);
        if (c.worst < 0 || e > c.max_abs) c.max_abs = e, c.worst = i;
      } else if (!(a == b || (std::isnan(a) && std::isnan(b)))) {
        ++c.nonfinite_mismatch;
      }
    }
    c.max_rel = c.scale > 0 ? c.max_abs / c.scale : c.max_abs;
    out.push_back(c);
  }
  return out;
}

}  // namespace flashgen
