// Random attention-like programs (see random_program.h).
#include "support/random_program.h"

#include <algorithm>
#include <random>
#include <set>
#include <sstream>
#include <vector>

namespace flashgen::testing {
namespace {

class Gen {
 public:
  Gen(uint64_t seed, int index, const RandomProgramOptions& opt)
      : rng_(seed), extra_(seed * 0x9e3779b97f4a7c15ull + 12345),
        third_(seed * 0xbf58476d1ce4e5b9ull + 777), fourth_(seed * 0x94d049bb133111ebull + 4242),
        fifth_(seed * 0xd6e8feb86659fd93ull + 31337),
        sixth_(seed * 0xa0761d6478bd642full + 2718), index_(index), opt_(opt) {}

  GeneratedProgram make() {
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
    sizes_[D_] = opt_.cuda_shaped ? 32 * pick(1, 2) : pick(0, 1) ? pick(1, 9) : 16 * pick(1, 2);
    sizes_[E_] = opt_.cuda_shaped ? 32 * pick(1, 2) : pick(1, 12);
    // q/k/v types and odd head dims from a second stream (the first one's programs stay as
    // they were): mostly f32 (bf16 or f16 on the tensor-core shape), a third of the time a
    // 16-bit type (f16 on the tensor-core shape); tensor-core head dims of any extent a third
    // of the time (the tiles are padded).
    std::string qkv = opt_.cuda_shaped ? "bf16" : "f32";
    if (extra(0, 2) == 0) qkv = opt_.cuda_shaped ? "f16" : extra(0, 1) ? "bf16" : "f16";
    if (opt_.cuda_shaped && extra(0, 2) == 0) sizes_[D_] = extra(1, 100);
    if (opt_.cuda_shaped && extra(0, 2) == 0) sizes_[E_] = extra(1, 100);
    // CUDA-shaped programs, from a third stream (the draws above stay as they were): f32 q/k/v
    // a fifth of the time (bf16 pieces on the tensor cores), and a fourth of the time one more
    // output of plain weights (sums over keys without a softmax).
    const bool plain_out = opt_.cuda_shaped && third(0, 3) == 0;
    const int plain_kind = third(0, 2);
    if (opt_.cuda_shaped && third(0, 4) == 0) qkv = "f32";

    std::vector<std::string> kb;  // k/v may broadcast over some batch dims (GQA-like)
    for (auto& b : batch_)
      if (pick(0, 3) != 0) kb.push_back(b);
    param("q", qkv, with(batch_, {Q_}), D_);
    param("k", qkv, with(kb, {K_}), D_);
    param("v", qkv, with(kb, {K_}), E_);
    std::ostringstream body;
    std::string qv = "q";
    if (pick(0, 4) == 0) {  // normalize q over its head dim first
      body << "  qn = q / sqrt(sum(q * q, " << D_ << ") + 0.001)\n";
      qv = "qn";
    }
    // (a fifth stream, so the draws above and below stay as they were: k normalized over its
    // head dim a fifth of the time, a norm per key; at the end, sinks and key gates)
    std::string kv = "k";
    if (fifth(0, 4) == 0) {
      body << "  kn = k / sqrt(sum(k * k, " << D_ << ") + 0.001)\n";
      kv = "kn";
    }
    body << "  s = sum(" << qv << " * " << kv << ", " << D_ << ") / sqrt(size(" << D_ << "))\n";
    int mods = pick(0, 3);
    for (int i = 0; i < mods; ++i) body << "  s = " << score_mod("s") << "\n";
    bool two = pick(0, 3) == 0;
    if (two) {
      param("q2", qkv, with(batch_, {Q_}), D_);
      body << "  s2 = sum(q2 * k, " << D_ << ") * 0.25\n";
      if (pick(0, 1)) body << "  s2 = " << score_mod("s2") << "\n";
    }
    std::vector<std::string> outdims_o = with(batch_, {Q_, E_});
    std::vector<std::string> outdims_l = with(batch_, {Q_});
    int nout = 0;
    std::set<int> kinds;
    int want = pick(1, 3);
    int hi = 6;
    if (opt_.cuda_shaped && pick(0, 3) != 0) {  // mostly outputs the template computes
      hi = 3;
      kinds.insert(pick(0, 1) ? 0 : 3);
    }
    while (static_cast<int>(kinds.size()) < want) kinds.insert(pick(0, hi));
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
    if (plain_out) {  // weights that are score element code, no max: a plain group
      const std::string w = plain_kind == 0   ? "sigmoid(s - 1.0)"
                            : plain_kind == 1 ? "relu(s) * relu(s)"
                                              : "where(" + K_ + " <= " + Q_ + ", sigmoid(s), 0.0)";
      body << "  pw = " << w << "\n";
      body << out("o" + std::to_string(nout++), outdims_o) << "sum(pw * v, " << K_ << ")\n";
      if (third(0, 1)) body << out("o" + std::to_string(nout++), outdims_l) << "sum(pw, " << K_ << ")\n";
    }
    auto fifth_order = [&](std::vector<std::string> ds) { return ordered(ds, fifth_); };
    if (fifth(0, 4) == 0) {  // attention sinks: a logit per batch index in the normalizer
      params_.push_back("sink: f32[" + fifth_order(batch_) + "]");
      const std::string dims = fifth_order(outdims_o);
      body << "  mxs = maximum(max(s, " << K_ << "), sink)\n";
      body << "  out o" << nout++ << ": f32[" << dims << "] = sum(exp(s - mxs) * v, " << K_
           << ") / (sum(exp(s - mxs), " << K_ << ") + exp(sink - mxs))\n";
    }
    if (fifth(0, 4) == 0) {  // key gates: the probabilities weighed per key before the values
      params_.push_back("kg: f32[" + fifth_order(with(kb, {K_})) + "]");
      const std::string dims = fifth_order(outdims_o);
      body << "  out o" << nout++ << ": f32[" << dims << "] = sum(softmax(s, " << K_
           << ") * sigmoid(kg) * v, " << K_ << ")\n";
    }
    // (a sixth stream: values computed per key, the entropy over log(P) and a score biased per
    // key through a special function, a fifth of the time each)
    auto sixth_order = [&](std::vector<std::string> ds) { return ordered(ds, sixth_); };
    if (sixth(0, 4) == 0) {  // a bias per value column, per key, or per both, added to v
      const int over = sixth(0, 2);
      std::vector<std::string> bd = over == 0 ? std::vector<std::string>{E_}
                                    : over == 1 ? with(kb, {K_}) : with(kb, {K_, E_});
      params_.push_back("vb: f32[" + sixth_order(bd) + "]");
      const std::string dims = sixth_order(outdims_o);
      body << "  out o" << nout++ << ": f32[" << dims << "] = sum(softmax(s, " << K_ << ") * ("
           << (sixth(0, 1) ? "v + vb" : "vb - v") << "), " << K_ << ")\n";
    }
    if (sixth(0, 4) == 0) {  // the attention entropy, -sum(P * log(P))
      const std::string dims = sixth_order(outdims_l);
      body << "  pe = softmax(s, " << K_ << ")\n";
      body << "  out o" << nout++ << ": f32[" << dims << "] = -sum(pe * log(pe), " << K_ << ")\n";
    }
    if (sixth(0, 4) == 0) {  // a score biased per key through a special function (a value per key)
      params_.push_back("kbias: f32[" + sixth_order(with(kb, {K_})) + "]");
      const std::string dims = sixth_order(outdims_o);
      body << "  out o" << nout++ << ": f32[" << dims << "] = sum(softmax(s + "
           << (sixth(0, 1) ? "2.0 * tanh(kbias)" : "exp(-kbias * kbias)") << ", " << K_
           << ") * v, " << K_ << ")\n";
    }
    std::ostringstream os;
    os << "program rnd" << index_ << "(";
    for (size_t i = 0; i < params_.size(); ++i) os << (i ? ", " : "") << params_[i];
    os << ") {\n" << body.str() << "}\n";
    return {os.str(), sizes_};
  }

 private:
  std::mt19937_64 rng_, extra_, third_, fourth_, fifth_, sixth_;
  int index_;
  RandomProgramOptions opt_;
  std::vector<std::string> batch_;
  std::string Q_, K_, D_, E_;
  Extents sizes_;
  std::vector<std::string> params_;
  std::set<std::string> declared_;

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  int extra(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(extra_); }
  int third(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(third_); }
  int fourth(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(fourth_); }
  int fifth(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(fifth_); }
  int sixth(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(sixth_); }
  // dims in an order drawn from stream `g`, as a list "a, b, c"
  static std::string ordered(std::vector<std::string> ds, std::mt19937_64& g) {
    std::shuffle(ds.begin(), ds.end(), g);
    std::string l;
    for (size_t i = 0; i < ds.size(); ++i) l += (i ? ", " : "") + ds[i];
    return l;
  }
  std::vector<std::string> with(std::vector<std::string> a, std::vector<std::string> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }
  // Declares a parameter in a random memory order. A CUDA-shaped program keeps `inner` (the
  // head dim of q/k/v) innermost, as the tensor-core loads need; otherwise it is shuffled in.
  void param(const std::string& name, const std::string& type, std::vector<std::string> dims,
             const std::string& inner = "") {
    if (!declared_.insert(name).second) return;
    if (!inner.empty() && !opt_.cuda_shaped) dims.push_back(inner);
    std::shuffle(dims.begin(), dims.end(), rng_);
    if (!inner.empty() && opt_.cuda_shaped) dims.push_back(inner);
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
  // A mask over the row and key indices; a third of the index masks (a fourth stream: the first
  // stream's draws stay as they were) become index arithmetic that the interval rules bound
  // (codegen/interval_code.cpp): windows by abs, slopes by products, blocks by floor of a
  // quotient, relu, floor modulo, where between conditions, scaled f32 differences, sqrt and
  // exp of index differences (thresholds off the exact edges).
  std::string mask() {
    const std::string m = index_mask();
    if (m.find("doc[") != std::string::npos || fourth(0, 2) != 0) return m;
    const std::string w = std::to_string(fourth(0, 20));
    switch (fourth(0, 8)) {
      case 7: return "sqrt(f32(abs(" + K_ + " - " + Q_ + "))) <= " + w + ".5";
      case 8: return "exp(f32(" + Q_ + " - " + K_ + ") * 0.1) >= 0.99 or " + K_ + " < " + w;
      case 0: return "abs(" + K_ + " - " + Q_ + ") <= " + w;
      case 1: return K_ + " * " + std::to_string(fourth(2, 3)) + " <= " + Q_ + " + " + w;
      case 2: {
        const char* b[] = {"4.0", "8.0", "16.0", "5.0", "7.0"};
        const std::string B = b[fourth(0, 4)];
        return "floor(f32(" + Q_ + ") / " + B + ") == floor(f32(" + K_ + ") / " + B + ")";
      }
      case 3: return "relu(" + K_ + " - " + Q_ + ") <= " + w;
      case 4: return "where(" + Q_ + " < " + w + ", " + K_ + " <= " + Q_ + ", " + K_ + " < " +
                     std::to_string(fourth(1, 30)) + ")";
      case 5: {
        const std::string P = std::to_string(fourth(0, 1) ? 64 : fourth(2, 9));
        return K_ + " % " + P + " <= " + Q_ + " % " + P;
      }
      default: return "abs(f32(" + K_ + ") * 0.5 - f32(" + Q_ + ") * 0.5) < " + w + ".5";
    }
  }
  std::string index_mask() {
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

}  // namespace

GeneratedProgram random_attention_program(uint64_t seed, int index,
                                          const RandomProgramOptions& opt) {
  return Gen(seed, index, opt).make();
}

}  // namespace flashgen::testing
