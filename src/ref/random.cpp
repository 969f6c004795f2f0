// Random inputs for a program (ref.h random_inputs).
//
// Each parameter draws from its own stream, seeded from (seed, parameter name), so adding a
// parameter does not change the others' values; the generator (splitmix64, Box-Muller) is
// written out here so that a seed gives the same inputs with every compiler and library.
// splitmix64's state after j draws is s0 + j·gamma, so large tensors fill in parallel chunks
// that start at their own element's state: the values do not depend on the thread count.
// Floats ~ N(0, 1) rounded to the dtype; bool true with probability 0.8; integers uniform in
// [0, 4), except a parameter whose values index another parameter (`table[doc[m]]`, directly,
// through a gather of it or a cast) is uniform in [0, smallest extent it indexes).
// Tests: tests/ref/bind_test.cpp (RandomInputs*).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "flashgen/error.h"
#include "flashgen/ref.h"

namespace flashgen {
namespace {

struct SplitMix {
  static constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ull;
  uint64_t s;
  void skip(uint64_t draws) { s += draws * kGamma; }
  uint64_t next() {
    uint64_t z = (s += kGamma);
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

// Runs fill(begin, end) over [0, n) in contiguous chunks on up to 16 threads (one below 2^16).
template <class F>
void parallel_fill(int64_t n, F fill) {
  const int64_t threads = n < (int64_t(1) << 16)
      ? 1 : std::min<int64_t>(16, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t)
    pool.emplace_back(fill, n * t / threads, n * (t + 1) / threads);
  fill(int64_t(0), n / threads);
  for (std::thread& th : pool) th.join();
}

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
  check_call_sizes(p, extents);
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
    Tensor t;
    try {
      t = Tensor(par.type, shape);
    } catch (const BackendError& e) {
      throw BackendError("random input for parameter '" + par.name + "': " + e.what());
    }
    const uint64_t s0 = seed * SplitMix::kGamma ^ name_hash(par.name);
    const int64_t n = t.numel();
    const uint64_t b = static_cast<uint64_t>(std::max<int64_t>(bound[i], 1));
    // Element k takes draws [k·per, (k + 1)·per) of the parameter's stream.
    const uint64_t per = is_float(par.type) ? 2 : 1;
    parallel_fill(n, [&t, &par, s0, b, per](int64_t begin, int64_t end) {
      SplitMix rng{s0};
      rng.skip(static_cast<uint64_t>(begin) * per);
      for (int64_t k = begin; k < end; ++k) {
        if (is_float(par.type)) t.set(k, rng.normal());
        else if (par.type == DType::boolean) t.set(k, rng.uniform() < 0.8 ? 1 : 0);
        else t.set(k, static_cast<double>(rng.next() % b));
      }
    });
    out[par.name] = std::move(t);
  }
  return out;
}

}  // namespace flashgen
