// Property test: random attention-like programs (random dim names, layouts and sizes; score
// code from the language's functions; masks from index arithmetic and gathers; several
// softmaxes; several outputs; occasionally a program that cannot be one pass) run on the CPU
// backend and must equal the reference evaluator. The seed is printed on failure; set
// FLASHGEN_PROPERTY_SEED to replay, FLASHGEN_PROPERTY_COUNT to run more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "flashgen/compile.h"
#include "flashgen/flashgen.h"
#include "support/support.h"

namespace flashgen {
namespace {

struct Generated {
  std::string text;
  Extents sizes;
};

class Gen {
 public:
  explicit Gen(uint64_t seed, int index) : rng_(seed), index_(index) {}

  Generated make() {
    const char* pool[] = {"b", "h", "g", "x", "y", "bat", "hd", "z", "w", "u1"};
    std::vector<std::string> names(std::begin(pool), std::end(pool));
    std::shuffle(names.begin(), names.end(), rng_);
    int nb = pick(0, 2);
    for (int i = 0; i < nb; ++i) batch_.push_back(names[i]);
    Q_ = pick(0, 1) ? "m" : "qi";
    K_ = pick(0, 1) ? "n" : "kj";
    D_ = pick(0, 1) ? "d" : "c";
    E_ = pick(0, 1) ? "e" : "f";
    for (auto& b : batch_) sizes_[b] = pick(1, 3);
    sizes_[Q_] = pick(0, 3) == 0 ? 1 : pick(1, 40);
    sizes_[K_] = pick(1, 70);
    sizes_[D_] = pick(0, 1) ? pick(1, 9) : 16 * pick(1, 2);
    sizes_[E_] = pick(1, 12);

    std::vector<std::string> kb;  // k/v may broadcast over some batch dims (GQA-like)
    for (auto& b : batch_)
      if (pick(0, 3) != 0) kb.push_back(b);
    param("q", "f32", with(batch_, {Q_, D_}));
    param("k", "f32", with(kb, {K_, D_}));
    param("v", "f32", with(kb, {K_, E_}));
    std::ostringstream body;
    std::string qv = "q";
    if (pick(0, 4) == 0) {  // normalize q over its head dim first
      body << "  qn = q / sqrt(sum(q * q, " << D_ << ") + 0.001)\n";
      qv = "qn";
    }
    body << "  s = sum(" << qv << " * k, " << D_ << ") / sqrt(size(" << D_ << "))\n";
    int mods = pick(0, 3);
    for (int i = 0; i < mods; ++i) body << "  s = " << score_mod("s") << "\n";
    bool two = pick(0, 3) == 0;
    if (two) {
      param("q2", "f32", with(batch_, {Q_, D_}));
      body << "  s2 = sum(q2 * k, " << D_ << ") * 0.25\n";
      if (pick(0, 1)) body << "  s2 = " << score_mod("s2") << "\n";
    }
    std::vector<std::string> outdims_o = with(batch_, {Q_, E_});
    std::vector<std::string> outdims_l = with(batch_, {Q_});
    int nout = 0;
    std::set<int> kinds;
    int want = pick(1, 3);
    while (static_cast<int>(kinds.size()) < want) kinds.insert(pick(0, 6));
    for (int kind : kinds) {
      std::string o = "o" + std::to_string(nout++);
      switch (kind) {
        case 0:
          body << out(o, outdims_o) << "sum(softmax(s, " << K_ << ") * v, " << K_ << ")\n";
          break;
        case 1:
          body << out(o, outdims_l) << "logsumexp(s, " << K_ << ")\n";
          break;
        case 2:
          if (two) {
            param("lam", "f32", {});
            body << out(o, outdims_o) << "sum((softmax(s, " << K_ << ") - lam * softmax(s2, "
                 << K_ << ")) * v, " << K_ << ")\n";
          } else {
            body << out(o, outdims_l) << "max(s, " << K_ << ")\n";
          }
          break;
        case 3:
          param("gate", "f32", with(batch_, {Q_, E_}));
          body << out(o, outdims_o) << "sum(softmax(s, " << K_ << ") * v, " << K_
               << ") * sigmoid(gate)\n";
          break;
        case 4:
          body << out(o, outdims_o) << "sum(softmax(s, " << K_ << ") * exp(v * 0.1), " << K_
               << ") + mean(v, " << K_ << ")\n";
          break;
        case 5:  // not one-pass: a max over probabilities (needs the whole row first)
          body << out(o, outdims_l) << "max(softmax(s, " << K_ << "), " << K_ << ")\n";
          break;
        default:
          body << out(o, outdims_l) << "sum(softmax(s, " << K_ << ") * f32(" << K_ << "), "
               << K_ << ")\n";
      }
    }
    std::ostringstream os;
    os << "program rnd" << index_ << "(";
    for (size_t i = 0; i < params_.size(); ++i) os << (i ? ", " : "") << params_[i];
    os << ") {\n" << body.str() << "}\n";
    return {os.str(), sizes_};
  }

 private:
  std::mt19937_64 rng_;
  int index_;
  std::vector<std::string> batch_;
  std::string Q_, K_, D_, E_;
  Extents sizes_;
  std::vector<std::string> params_;
  std::set<std::string> declared_;

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::vector<std::string> with(std::vector<std::string> a, std::vector<std::string> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  // Declares a parameter in a random memory order.
  void param(const std::string& name, const std::string& type, std::vector<std::string> dims) {
    if (!declared_.insert(name).second) return;
    std::shuffle(dims.begin(), dims.end(), rng_);
    std::string s = name + ": " + type + "[";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i];
    params_.push_back(s + "]");
  }
  std::string out(const std::string& name, std::vector<std::string> dims) {
    std::shuffle(dims.begin(), dims.end(), rng_);
    std::string s = "  out " + name + ": f32[";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i];
    return s + "] = ";
  }
  std::string mask() {
    switch (pick(0, 6)) {
      case 0: return K_ + " <= " + Q_;
      case 1: return Q_ + " - " + K_ + " <= " + std::to_string(pick(0, 20)) + " and " + K_ +
                     " <= " + Q_;
      case 2: return K_ + " <= " + Q_ + " or " + K_ + " < " + std::to_string(pick(0, 10));
      case 3: {
        sizes_["t"] = std::max(sizes_[Q_], sizes_[K_]);
        param("doc", "i32", {"t"});
        return "doc[" + Q_ + "] == doc[" + K_ + "]";
      }
      case 4: return "(" + Q_ + " + " + K_ + ") % 3 != 0";
      case 5: return "not (" + K_ + " > " + Q_ + " + " + std::to_string(pick(0, 5)) + ")";
      default: return K_ + " >= " + std::to_string(pick(0, 30));
    }
  }
  std::string score_mod(const std::string& s) {
    switch (pick(0, 6)) {
      case 0: {
        if (!batch_.empty() && pick(0, 1)) {
          param("slope", "f32", {batch_[0]});
        } else {
          param("slope", "f32", {});
        }
        return s + " + slope * f32(" + K_ + " - " + Q_ + ") * 0.1";
      }
      case 1: return "5 * tanh(" + s + " / 5)";
      case 2: {
        sizes_["u"] = 9;
        param("tab", "f32", {"u"});
        return s + " + tab[clamp(" + K_ + " - " + Q_ + " + 4, 0, 8)]";
      }
      case 3: return "where(" + mask() + ", " + s + ", -inf)";
      case 4: return "maximum(" + s + ", -2.) + 0.5 * abs(" + s + ")";
      case 5: return "where(" + mask() + ", " + s + ", -inf)";
      default: return s + " * 2 - relu(" + s + ")";
    }
  }
};

TEST(Property, RandomProgramsMatchReferenceOnCpu) {
  uint64_t seed = std::random_device{}();
  if (const char* e = std::getenv("FLASHGEN_PROPERTY_SEED")) seed = std::strtoull(e, nullptr, 10);
  int count = 150;
  if (const char* e = std::getenv("FLASHGEN_PROPERTY_COUNT")) count = std::atoi(e);
  const int batch = 40;
  int multi_kernel = 0;
  for (int start = 0; start < count; start += batch) {
    std::vector<Program> progs;
    std::vector<Generated> gens;
    for (int i = start; i < std::min(count, start + batch); ++i) {
      Generated g = Gen(seed + i, i).make();
      SCOPED_TRACE("seed " + std::to_string(seed + i) + "\n" + g.text);
      Program p = parse_source(g.text, "random.attn").at(0);
      progs.push_back(p);
      gens.push_back(g);
    }
    // Two compiler processes at once (CI has two cores); -O1 compiles several times faster.
    size_t half = progs.size() / 2;
    std::vector<Program> first(progs.begin(), progs.begin() + half);
    std::vector<Program> second(progs.begin() + half, progs.end());
    std::thread other([&] { if (!first.empty()) precompile_cpu(first, {"-O1"}); });
    precompile_cpu(second, {"-O1"});
    other.join();
    for (size_t i = 0; i < progs.size(); ++i) {
      const Program& p = progs[i];
      std::string trace = "FLASHGEN_PROPERTY_SEED=" + std::to_string(seed + start + i) +
                          " (program index " + std::to_string(start + i) + ")\n" + gens[i].text;
      SCOPED_TRACE(trace);
      if (kernel_count(p, {}) > 1) ++multi_kernel;
      TensorMap in = random_inputs(p, gens[i].sizes, seed + 1000003 * (start + i));
      TensorMap want = evaluate_reference(p, in);
      TensorMap got = run_cpu(p, in);
      for (const Output& o : p.outputs) {
        double scale = std::max(1.0, testing::max_abs(want.at(o.name)));
        std::string diff = testing::compare_tensors(got.at(o.name), want.at(o.name), 3e-5 * scale);
        ASSERT_EQ(diff, "") << "output " << o.name;
      }
    }
  }
  std::printf("property: %d programs (seed %llu), %d needed more than one kernel\n", count,
              static_cast<unsigned long long>(seed), multi_kernel);
}

}  // namespace
}  // namespace flashgen
