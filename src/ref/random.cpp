// Random inputs for a program (ref.h random_inputs).
//
// Each parameter draws from its own stream, seeded from (seed, parameter name), so adding a
// parameter does not change the others' values; the generator (splitmix64, Box-Muller) is
// written out here so that a seed gives the same inputs with every compiler and library.
// Floats ~ N(0, 1) rounded to the dtype; bool true with probability 0.8; integers uniform in
// [0, 4), except a parameter whose values index another parameter (`table[doc[m]]`, directly,
// through a gather of it or a cast) is uniform in [0, smallest extent it indexes).
// Tests: tests/ref/bind_test.cpp (RandomInputs*).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "flashgen/error.h"
#include "flashgen/ref.h"

namespace flashgen {
namespace {

struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {
    double u1 = 1.0 - uniform(), u2 = uniform();  // u1 in (0, 1]
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The parameter whose values an index expression reads directly (-1 if none).
int index_source(const Program& p, int id) {
  const Node* n = &p.nodes[id];
  while (n->op == Op::Cast) n = &p.nodes[n->args[0]];
  if (n->op == Op::Param || n->op == Op::Gather) return n->param;
  return -1;
}

}  // namespace

TensorMap random_inputs(const Program& p, const Extents& extents, uint64_t seed) {
  std::vector<int64_t> ext(p.dims.size());
  for (size_t d = 0; d < p.dims.size(); ++d) {
    auto it = extents.find(p.dims[d]);
    if (it == extents.end()) {
      throw CallError("dimension '" + p.dims[d] + "' has no extent; give it (e.g. " + p.dims[d] +
                      "=64)");
    }
    ext[d] = it->second;
  }
  // Upper bounds for integer parameters used as indices.
  std::vector<int64_t> bound(p.params.size(), 4);
  std::vector<bool> is_index(p.params.size(), false);
  for (const Node& n : p.nodes) {
    if (n.op != Op::Gather) continue;
    const Parameter& target = p.params[n.param];
    for (size_t j = 0; j < n.args.size(); ++j) {
      int src = index_source(p, n.args[j]);
      if (src < 0 || !is_integer(p.params[src].type)) continue;
      int64_t e = ext[target.dims[j]];
      bound[src] = is_index[src] ? std::min(bound[src], e) : e;
      is_index[src] = true;
    }
  }
  TensorMap out;
  for (size_t i = 0; i < p.params.size(); ++i) {
    const Parameter& par = p.params[i];
    std::vector<int64_t> shape;
    for (int d : par.dims) shape.push_back(ext[d]);
    Tensor t(par.type, shape);
    SplitMix rng{seed * 0x9e3779b97f4a7c15ull ^ name_hash(par.name)};
    const int64_t n = t.numel();
    if (is_float(par.type)) {
      for (int64_t k = 0; k < n; ++k) t.set(k, rng.normal());
    } else if (par.type == DType::boolean) {
      for (int64_t k = 0; k < n; ++k) t.set(k, rng.uniform() < 0.8 ? 1 : 0);
    } else {
      uint64_t b = static_cast<uint64_t>(std::max<int64_t>(bound[i], 1));
      for (int64_t k = 0; k < n; ++k) t.set(k, static_cast<double>(rng.next() % b));
    }
    out[par.name] = std::move(t);
  }
  return out;
}

}  // namespace flashgen
