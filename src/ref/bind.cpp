// Call-time binding: checks inputs against a program's parameters, binds every dimension's
// extent, and converts inputs to the declared dtypes.
//
// Rules (docs/language.md "Errors"): every parameter needs an input of its rank; a
// float parameter accepts a float array of any width (rounded to the declared dtype by
// prepare_inputs); an integer parameter accepts an integer array of any width (values must fit
// the declared type); a bool parameter needs a bool array. Two inputs binding one dimension must
// agree; a dimension no input binds takes its extent from `extra`; extents in `extra` for a
// bound dimension must agree with it; names in `extra` that are not dimensions of the program
// are ignored (a CLI's SIZES may cover several programs). Inputs that name no parameter are
// ignored. Every error is a CallError naming the parameter and, where there is one, the
// dimension. Tests: tests/ref/bind_test.cpp.
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "flashgen/error.h"
#include "flashgen/ref.h"

namespace flashgen {
namespace {

std::string decl(const Program& p, const Parameter& par) {
  return std::string(dtype_name(par.type)) + p.dim_list(par.dims);
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

const char* kind_name(DType t) {
  if (is_float(t)) return "float";
  if (is_integer(t)) return "integer";
  return "bool";
}

// Checks presence, rank and dtype kind of every parameter's input; returns the inputs in
// parameter order.
std::vector<const Tensor*> check_params(const Program& p, const TensorMap& inputs) {
  std::vector<const Tensor*> out;
  for (const Parameter& par : p.params) {
    auto it = inputs.find(par.name);
    if (it == inputs.end()) {
      throw CallError("missing input for parameter '" + par.name + "' (" + decl(p, par) + ")");
    }
    const Tensor& t = it->second;
    if (t.rank() != static_cast<int>(par.dims.size())) {
      throw CallError("parameter '" + par.name + "' is " + decl(p, par) + " (rank " +
                      std::to_string(par.dims.size()) + ") but its input has rank " +
                      std::to_string(t.rank()) + ", shape " + shape_str(t.shape()));
    }
    if (std::string(kind_name(t.dtype())) != kind_name(par.type)) {
      throw CallError("parameter '" + par.name + "' is " + decl(p, par) + " but its input is " +
                      dtype_name(t.dtype()) + " (" + kind_name(par.type) +
                      " parameters need " + (is_integer(par.type) ? "an " : "a ") +
                      kind_name(par.type) + " array)");
    }
    out.push_back(&t);
  }
  return out;
}

// CallError unless `dims` under `ext` (one extent per program dim) has at most
// 2^kMaxElementsLog2 elements; names the value and every extent of the product.
void check_size(const Program& p, const std::string& what, const std::vector<int>& dims,
                const std::vector<int64_t>& ext) {
  std::vector<int64_t> shape;
  for (int d : dims) shape.push_back(ext[d]);
  if (checked_element_count(shape) >= 0) return;
  std::string product;
  for (int d : dims) product += (product.empty() ? "" : " x ") + p.dims[d] + "=" + std::to_string(ext[d]);
  throw CallError(what + " would have " + product + " elements, more than 2^" +
                  std::to_string(kMaxElementsLog2) + " (the most one tensor may hold)");
}

}  // namespace

void check_call_sizes(const Program& p, const Extents& extents) {
  std::vector<int64_t> ext(p.dims.size(), 0);
  for (size_t d = 0; d < p.dims.size(); ++d) {
    auto it = extents.find(p.dims[d]);
    if (it != extents.end()) ext[d] = it->second;
  }
  for (const Parameter& par : p.params) check_size(p, "parameter '" + par.name + "'", par.dims, ext);
  for (const Output& o : p.outputs) check_size(p, "output '" + o.name + "'", o.dims, ext);
}

Extents bind_extents(const Program& p, const TensorMap& inputs, const Extents& extra) {
  std::vector<const Tensor*> ts = check_params(p, inputs);
  std::vector<int64_t> ext(p.dims.size(), -1);
  std::vector<int> binder(p.dims.size(), -1);  // the parameter that bound each dimension
  for (size_t i = 0; i < p.params.size(); ++i) {
    const Parameter& par = p.params[i];
    for (size_t j = 0; j < par.dims.size(); ++j) {
      int d = par.dims[j];
      int64_t e = ts[i]->shape()[j];
      if (ext[d] < 0) {
        ext[d] = e, binder[d] = static_cast<int>(i);
      } else if (ext[d] != e) {
        throw CallError("parameter '" + par.name + "' dimension '" + p.dims[d] + "' has extent " +
                        std::to_string(e) + " but '" + p.params[binder[d]].name + "' binds " +
                        p.dims[d] + " = " + std::to_string(ext[d]));
      }
    }
  }
  Extents out;
  for (size_t d = 0; d < p.dims.size(); ++d) {
    auto it = extra.find(p.dims[d]);
    if (it != extra.end()) {
      if (it->second < 0) {
        throw CallError("dimension '" + p.dims[d] + "' is given a negative extent " +
                        std::to_string(it->second));
      }
      if (ext[d] >= 0 && ext[d] != it->second) {
        throw CallError("dimension '" + p.dims[d] + "' is given as " +
                        std::to_string(it->second) + " but parameter '" +
                        p.params[binder[d]].name + "' binds " + p.dims[d] + " = " +
                        std::to_string(ext[d]));
      }
      ext[d] = it->second;
    }
    if (ext[d] < 0) {
      throw CallError("dimension '" + p.dims[d] +
                      "' is not bound by any input; give its extent (e.g. " + p.dims[d] +
                      "=64)");
    }
    out[p.dims[d]] = ext[d];
  }
  check_call_sizes(p, out);
  return out;
}

namespace {

// CallError unless every value of an i64 input for an i32 parameter fits in i32.
void check_fits_i32(const Program& p, const Parameter& par, const Tensor& c) {
  const int64_t* v = static_cast<const int64_t*>(c.data());
  for (int64_t k = 0; k < c.numel(); ++k) {
    if (v[k] < std::numeric_limits<int32_t>::min() || v[k] > std::numeric_limits<int32_t>::max()) {
      throw CallError("parameter '" + par.name + "' is " + decl(p, par) + " but its input " +
                      "holds " + std::to_string(v[k]) + " (element " + std::to_string(k) +
                      "), which does not fit in i32");
    }
  }
}

}  // namespace

void check_input_values(const Program& p, const TensorMap& inputs) {
  std::vector<const Tensor*> ts = check_params(p, inputs);
  for (size_t i = 0; i < p.params.size(); ++i)
    if (p.params[i].type == DType::i32 && ts[i]->dtype() == DType::i64)
      check_fits_i32(p, p.params[i], ts[i]->is_contiguous() ? *ts[i] : ts[i]->contiguous());
}

TensorMap prepare_inputs(const Program& p, const TensorMap& inputs) {
  std::vector<const Tensor*> ts = check_params(p, inputs);
  TensorMap out;
  for (size_t i = 0; i < p.params.size(); ++i) {
    const Parameter& par = p.params[i];
    const Tensor& t = *ts[i];
    if (par.type == DType::i32 && t.dtype() == DType::i64) {
      // Values must fit: a wrapped index would silently read the wrong element.
      Tensor c = t.contiguous();
      check_fits_i32(p, par, c);
      out[par.name] = c.to(DType::i32);
    } else {
      out[par.name] = t.to(par.type);
    }
  }
  return out;
}

}  // namespace flashgen
