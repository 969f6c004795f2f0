// Scalar semantics of the element-wise ops (see scalar.h).
#include "plan/scalar.h"

#include <cmath>
#include <stdexcept>


namespace flashgen {

double eval_scalar(Op op, DType result, const std::vector<double>& a,
                   const std::vector<DType>& t) {
  double r = 0;
  switch (op) {
    case Op::Neg: r = -a[0]; break;
    case Op::Not: r = a[0] == 0; break;
    case Op::Exp: r = std::exp(a[0]); break;
    case Op::Exp2: r = std::exp2(a[0]); break;
    case Op::Log: r = std::log(a[0]); break;
    case Op::Log2: r = std::log2(a[0]); break;
    case Op::Sqrt: r = std::sqrt(a[0]); break;
    case Op::Rsqrt: r = 1.0 / std::sqrt(a[0]); break;
    case Op::Tanh: r = std::tanh(a[0]); break;
    case Op::Sigmoid: r = 1.0 / (1.0 + std::exp(-a[0])); break;
    case Op::Relu: r = a[0] > 0 ? a[0] : (std::isnan(a[0]) ? a[0] : 0.0); break;
    case Op::Abs: r = std::fabs(a[0]); break;
    case Op::Floor: r = std::floor(a[0]); break;
    case Op::Ceil: r = std::ceil(a[0]); break;
    case Op::Sin: r = std::sin(a[0]); break;
    case Op::Cos: r = std::cos(a[0]); break;
    case Op::Cast: r = is_integer(result) ? std::trunc(a[0]) : a[0]; break;
    case Op::Add: r = a[0] + a[1]; break;
    case Op::Sub: r = a[0] - a[1]; break;
    case Op::Mul: r = a[0] * a[1]; break;
    case Op::Div: r = a[0] / a[1]; break;
    case Op::DivOrZero: r = a[1] == 0 ? 0.0 : a[0] / a[1]; break;
    case Op::Mod: {
      if (a[1] == 0) throw std::runtime_error("integer modulo by zero");
      double m = std::fmod(a[0], a[1]);
      if (m != 0 && ((m < 0) != (a[1] < 0))) m += a[1];
      r = m;
      break;
    }
    case Op::Pow: r = std::pow(a[0], a[1]); break;
    case Op::Maximum: r = std::isnan(a[0]) || std::isnan(a[1]) ? NAN : std::max(a[0], a[1]); break;
    case Op::Minimum: r = std::isnan(a[0]) || std::isnan(a[1]) ? NAN : std::min(a[0], a[1]); break;
    case Op::Eq: r = a[0] == a[1]; break;
    case Op::Ne: r = a[0] != a[1]; break;
    case Op::Lt: r = a[0] < a[1]; break;
    case Op::Le: r = a[0] <= a[1]; break;
    case Op::Gt: r = a[0] > a[1]; break;
    case Op::Ge: r = a[0] >= a[1]; break;
    case Op::And: r = (a[0] != 0) && (a[1] != 0); break;
    case Op::Or: r = (a[0] != 0) || (a[1] != 0); break;
    case Op::Where: r = a[0] != 0 ? a[1] : a[2]; break;
    case Op::Clamp: r = std::min(std::max(a[0], a[1]), a[2]); break;
    default: throw std::runtime_error(std::string("not an element-wise op: ") + op_name(op));
  }
  (void)t;
  if (result == DType::boolean) return r != 0;
  return r;
}

}  // namespace flashgen
