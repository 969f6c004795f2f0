// Shared test helpers (see support.h).
#include "support/support.h"

#include <gtest/gtest.h>

#include "flashgen/frontend.h"
#include "flashgen/ref.h"
#include "support/random_program.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace flashgen::testing {

namespace fs = std::filesystem;

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base && *base ? base : "/tmp") + "/flashgen-test-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed for " + templ);
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

ProcessResult run_process(const std::vector<std::string>& argv, const std::string& cwd,
                          int timeout_s) {
  if (argv.empty()) throw std::invalid_argument("run_process: empty argv");
  // The child's stdout and stderr go to files (no pipe can fill up and block it).
  TempDir capture;
  const std::string out_path = capture.file("stdout"), err_path = capture.file("stderr");
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int in = open("/dev/null", O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0 || err < 0) _exit(126);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  ProcessResult r;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0) throw std::runtime_error("waitpid failed");
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  r.out = read_text_file(out_path);
  r.err = read_text_file(err_path);
  return r;
}

std::string source_path(const std::string& relative) {
  return std::string(FLASHGEN_SOURCE_DIR) + "/" + relative;
}

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

const std::vector<std::string>& example_names() {
  static const std::vector<std::string> names = {
      "vanilla", "causal",        "alibi",         "softcap", "sliding_window",
      "prefix_lm", "document",    "gqa",           "diff_attn", "evoformer_row",
      "evoformer_col", "lse",     "cross"};
  return names;
}

Program parse_typed(std::string text, const std::string& path, bool f32) {
  if (f32)
    for (size_t pos = 0; (pos = text.find("bf16", pos)) != std::string::npos; pos += 3)
      text.replace(pos, 4, "f32");
  return parse_source(text, path).at(0);
}

Program source_program(const std::string& relative, bool f32) {
  const std::string path = source_path(relative);
  return parse_typed(read_text_file(path), path, f32);
}

Program example_program(const std::string& name, bool f32) {
  return source_program("examples/" + name + ".attn", f32);
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot write " + path);
  f << text;
}

bool file_exists(const std::string& path) { return fs::exists(path); }

std::vector<std::string> list_dir(const std::string& path) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(path)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

Tensor random_float_tensor(DType t, const std::vector<int64_t>& shape, std::mt19937_64& rng,
                           double scale) {
  Tensor x(t, shape);
  std::normal_distribution<double> dist(0.0, scale);
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, dist(rng));
  return x;
}

Tensor random_int_tensor(DType t, const std::vector<int64_t>& shape, int64_t lo, int64_t hi,
                         std::mt19937_64& rng) {
  Tensor x(t, shape);
  std::uniform_int_distribution<int64_t> dist(lo, hi - 1);
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, static_cast<double>(dist(rng)));
  return x;
}

Tensor random_bool_tensor(const std::vector<int64_t>& shape, double p_true,
                          std::mt19937_64& rng) {
  Tensor x(DType::boolean, shape);
  std::bernoulli_distribution dist(p_true);
  for (int64_t i = 0; i < x.numel(); ++i) x.set(i, dist(rng) ? 1.0 : 0.0);
  return x;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.get(i);
    if (std::isfinite(v)) m = std::max(m, std::abs(v));
  }
  return m;
}

std::string compare_tensors(const Tensor& got, const Tensor& want, double tol) {
  std::ostringstream msg;
  if (got.shape() != want.shape()) {
    msg << "shapes differ: rank " << got.rank() << " vs " << want.rank();
    return msg.str();
  }
  int64_t bad = 0, first = -1, worst = -1;
  double worst_err = -1;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double a = got.get(i), b = want.get(i);
    bool ok;
    double err = 0;
    if (std::isnan(a) || std::isnan(b)) ok = std::isnan(a) && std::isnan(b);
    else if (std::isinf(a) || std::isinf(b)) ok = a == b;
    else ok = (err = std::abs(a - b)) <= tol;
    if (!ok) {
      if (first < 0) first = i;
      ++bad;
      if (!std::isfinite(err)) err = INFINITY;
      if (err > worst_err || worst < 0) worst_err = err, worst = i;
    }
  }
  if (bad == 0) return "";
  msg.precision(17);
  msg << bad << " of " << got.numel() << " elements differ (tolerance " << tol << "); first at "
      << first << ": got " << got.get(first) << ", want " << want.get(first) << "; worst at "
      << worst << ": got " << got.get(worst) << ", want " << want.get(worst);
  return msg.str();
}

Program data_mask_program(DType qkv) {
  const std::string t = dtype_name(qkv);
  return parse_source(
      "program docs(q: " + t + "[h, m, d], k: " + t + "[h, n, d], v: " + t + "[h, n, e], "
      "doc: i32[t], w: f32[t]) {\n"
      "  s = sum(q * k, d) / sqrt(size(d))\n"
      "  out o: f32[h, m, e] = sum(softmax(where(doc[m] == doc[n] and w[n] > 0., s, -inf), n)"
      " * v, n)\n}\n", "docs.attn").at(0);
}

void set_data_mask_inputs(TensorMap& in, int64_t len, int which) {
  const int64_t lengths[] = {1, 63, 64, 65, 127, 129, 7, 200};
  Tensor doc(DType::i32, {len}), w(DType::f32, {len});
  int64_t id = 0, left = lengths[0];
  for (int64_t i = 0; i < len; ++i) {
    if (left == 0) left = lengths[++id % 8];
    --left;
    doc.set(i, double(which != 1 ? id : (i * 7919) % 5));
    w.set(i, which == 2 ? 0.5 : (i % 97 == 5 ? NAN : (i % 13 == 0 ? -1.0 : 1.0)));
  }
  in["doc"] = doc;
  in["w"] = w;
}

const std::vector<HardMask>& hard_masks() {
  static const std::vector<HardMask> cases = {
      {"doc[m] == doc[n]", DType::i64, [](int64_t i) { return 0x1p53 + double(i % 2); }},
      {"doc[n] + doc[n] > doc[m]", DType::i32, [](int64_t) { return 2147483647.0; }},
      {"doc[n] + 1 > doc[m]", DType::i32, [](int64_t) { return 2147483647.0; }},
      {"bf16(doc[n]) == 1.", DType::f32, [](int64_t) { return 1.001; }},
      {"f32(doc[n]) == f32(doc[m])", DType::i64, [](int64_t i) { return 0x1p24 + (i >= 100); }},
      {"maximum(0., doc[n]) > -1.", DType::f32, [](int64_t i) { return i % 3 ? 1.0 : NAN; }},
      {"doc[n] >= -inf", DType::f32, [](int64_t i) { return i % 3 ? 1.0 : NAN; }},
      {"doc[n] + doc[m] <= inf", DType::f32,
       [](int64_t i) -> double { return i % 2 ? INFINITY : -INFINITY; }},
      {"clamp(doc[n], 5, 2) >= 3", DType::i32, [](int64_t i) { return double(i % 7); }},
      {"doc[m] == doc[n]", DType::i32, [](int64_t i) { return double(i / 37); }},
  };
  return cases;
}

Program hard_mask_program(const HardMask& h, DType qkv) {
  const std::string t = dtype_name(qkv);
  return parse_source("program hard(q: " + t + "[m, d], k: " + t + "[n, d], v: " + t +
                          "[n, e], doc: " + dtype_name(h.type) + "[t]) {\n"
                          "  out o: f32[m, e] = sum(softmax(where(" + h.mask +
                          ", sum(q * k, d), -inf), n) * v, n)\n}\n",
                      "hard.attn").at(0);
}

Tensor hard_mask_data(const HardMask& h, int64_t len) {
  Tensor doc(h.type, {len});
  for (int64_t i = 0; i < len; ++i) {
    if (h.type == DType::i64) static_cast<int64_t*>(doc.data())[i] = int64_t(h.value(i));
    else doc.set(i, h.value(i));
  }
  return doc;
}

Extents example_extents(const Program& p, int64_t m, int64_t n, int64_t d, int64_t e,
                        int64_t batch) {
  Extents x;
  for (size_t i = 0; i < p.dims.size(); ++i) {
    const std::string& nm = p.dims[i];
    bool in_nodes = false;
    for (const Node& nd : p.nodes)
      in_nodes = in_nodes || (nd.op != Op::Param && dimset_contains(nd.dims, (int)i));
    int64_t v = batch;
    if (nm == "m") v = m;
    else if (nm == "n") v = n;
    else if (nm == "d") v = d;
    else if (nm == "e") v = e;
    else if (!in_nodes) v = std::max(m, n);
    x[nm] = v;
  }
  return x;
}

HostTileCounts host_tile_counts(const std::function<bool(int64_t, int64_t)>& kept,
                                int64_t grid_points, int64_t M, int64_t N, int64_t row_tile,
                                int64_t key_tile, bool full_needs_whole_tile) {
  HostTileCounts c;
  for (int64_t r0 = 0; r0 < M; r0 += row_tile)
    for (int64_t n0 = 0; n0 < N; n0 += key_tile) {
      const int64_t r1 = std::min(M, r0 + row_tile), n1 = std::min(N, n0 + key_tile);
      int64_t hit = 0;
      for (int64_t m = r0; m < r1; ++m)
        for (int64_t n = n0; n < n1; ++n) hit += kept(m, n);
      if (hit == 0) {
        c.skipped += grid_points;
        continue;
      }
      c.computed += grid_points;
      if (hit == (r1 - r0) * (n1 - n0) && (!full_needs_whole_tile || n0 + key_tile <= N))
        c.full += grid_points;
    }
  return c;
}

HostTileCounts length_mask_tile_counts(const std::vector<int64_t>& lens, int64_t grid_points,
                                       int64_t M, int64_t N, int64_t row_tile, int64_t key_tile,
                                       bool full_needs_whole_tile) {
  HostTileCounts want;
  for (int64_t L : lens) {
    const HostTileCounts c = host_tile_counts(
        [L](int64_t m, int64_t n) { return n < L && m < L; }, grid_points, M, N, row_tile,
        key_tile, full_needs_whole_tile);
    want.computed += c.computed, want.skipped += c.skipped, want.full += c.full;
  }
  return want;
}

const std::vector<ExampleMask>& example_masks() {
  static const std::vector<ExampleMask> masks = {
      {"causal", [](int64_t m, int64_t n, const Tensor&) { return n <= m; }},
      {"sliding_window", [](int64_t m, int64_t n, const Tensor&) { return n <= m && m - n <= 256; }},
      {"document",
       [](int64_t m, int64_t n, const Tensor& doc) { return doc.get(m) == doc.get(n) && n <= m; }},
      {"prefix_lm", [](int64_t m, int64_t n, const Tensor&) { return n <= m || n < 256; }},
  };
  return masks;
}

const std::vector<IndexMask>& arithmetic_index_masks() {
  static const std::vector<IndexMask> masks = {
      {"abs(n - m) <= 40", [](int64_t m, int64_t n) { return std::abs(n - m) <= 40; }, true},
      {"n * 2 <= m", [](int64_t m, int64_t n) { return n * 2 <= m; }, true},
      {"relu(n - m) == 0", [](int64_t m, int64_t n) { return n <= m; }, true},
      {"floor(f32(m) / 64.0) == floor(f32(n) / 64.0)",
       [](int64_t m, int64_t n) { return m / 64 == n / 64; }, true},
      {"n % 4096 <= m % 4096", [](int64_t m, int64_t n) { return n <= m; }, true},
      {"n % 100 < 50 and n <= m",
       [](int64_t m, int64_t n) { return n % 100 < 50 && n <= m; }, false},
      {"where(m < 100, n <= m, n < 50)",
       [](int64_t m, int64_t n) { return m < 100 ? n <= m : n < 50; }, true},
      {"abs(f32(n) * 0.5 - f32(m) * 0.5) < 30.0",
       [](int64_t m, int64_t n) { return std::abs(n - m) < 60; }, true},
      {"floor(f32(m) / 48.0) == floor(f32(n) / 48.0)",
       [](int64_t m, int64_t n) { return m / 48 == n / 48; }, false},
      // monotone functions (bounds widened for fast math: the exact edges stay partial tiles)
      // (thresholds off the exact edges: fast math's sqrt and exp are not correctly rounded)
      {"sqrt(f32(abs(n - m))) <= 6.04", [](int64_t m, int64_t n) { return std::abs(n - m) <= 36; },
       false},
      {"exp(f32(m - n) * 0.05) >= 0.99 and sigmoid(f32(m) - 150.5) < 0.5",
       [](int64_t m, int64_t n) { return n <= m && m <= 150; }, false},
      {"i32(f32(m) * 0.015625) == i32(f32(n) * 0.015625)",
       [](int64_t m, int64_t n) { return m / 64 == n / 64; }, true},
      // exp overflows f32 past 88.7 (inf < inf is false): the upper bound is then +inf
      {"exp(f32(n) * 0.5) < exp(f32(m) * 0.5)",
       [](int64_t m, int64_t n) { return n < m && n * 0.5 < 88.72; }, false},
      // 2^119 n overflows f32 from n = 512 (inf, and inf - inf NaN: masked): bounds past the
      // type's largest value are unknown, so those tiles are computed, never taken as full;
      // below 512 the products are exact and tiles of up to 128 x 128 away from the diagonal
      // are proved dead (the GPU's tiles: with 2^120 and overflow from 256, no 128-tile off
      // the diagonal stays under it, and the kernel rightly skipped none)
      {"abs(f32(n) * 6.646139978924579e35 - f32(m) * 6.646139978924579e35) < 4.253529586511731e37",
       [](int64_t m, int64_t n) { return m < 512 && n < 512 && std::abs(n - m) < 64; }, false},
  };
  return masks;
}

Program index_mask_program(const IndexMask& c, const std::string& type) {
  const std::string T = type;
  return parse_source("program t(q: " + T + "[h, m, d], k: " + T + "[h, n, d], v: " + T +
                          "[h, n, e]) {\n  s = where(" + c.mask +
                          ", sum(q * k, d) / sqrt(size(d)), -inf)\n  out o: " + T +
                          "[h, m, e] = sum(softmax(s, n) * v, n)\n}\n",
                      "index_mask.attn")
      .at(0);
}

Tensor document_ids(int64_t t, int64_t scale) {
  const int64_t lengths[] = {70, 130, 33, 200, 67, 1, 90};
  Tensor doc(DType::i32, {t});
  int64_t pos = 0;
  for (int64_t id = 0; pos < t; ++id)
    for (int64_t i = 0; i < lengths[id % 7] * scale && pos < t; ++i)
      doc.set(pos++, static_cast<double>(id));
  return doc;
}

std::string element_mismatch(const Program& p, const TensorMap& got, const TensorMap& want) {
  for (const Output& o : p.outputs) {
    if (!got.count(o.name)) return "output " + o.name + " is missing";
    const double scale = std::max(1.0, max_abs(want.at(o.name)));
    // The least precise of the output's type and the 16-bit float parameters' (as check.h's
    // rule, f8 parameters aside: the element path computes them in f32): f16 operands on the
    // tensor cores round P to f16 even for an f32 output.
    DType t = o.type;
    auto rank = [](DType d) { return d == DType::bf16 ? 2 : d == DType::f16 ? 1 : 0; };
    for (const Parameter& P : p.params)
      if (is_float(P.type) && rank(P.type) > rank(t)) t = P.type;
    const double tol = t == DType::bf16 ? 8e-3 : t == DType::f16 ? 1e-3 : 1e-4;
    std::string d = compare_tensors(got.at(o.name), want.at(o.name), tol * scale);
    if (!d.empty()) return "output " + o.name + ": " + d;
  }
  return "";
}

void for_each_random_program(
    const char* label, int count,
    const std::function<void(const Program&, const TensorMap&, int index)>& check, int chunk,
    int chunks) {
  uint64_t seed = 20261130;  // the CPU property test's
  if (const char* e = std::getenv("FLASHGEN_PROPERTY_SEED")) seed = std::strtoull(e, nullptr, 10);
  if (const char* e = std::getenv("FLASHGEN_PROPERTY_COUNT")) count = std::atoi(e);
  const int first = count * chunk / chunks, last = count * (chunk + 1) / chunks;
  std::printf("%s: random programs %d..%d of %d (seed %llu)\n", label, first, last - 1, count,
              static_cast<unsigned long long>(seed));
  for (int i = first; i < last; ++i) {
    GeneratedProgram g = random_attention_program(seed + i, i);
    SCOPED_TRACE("FLASHGEN_PROPERTY_SEED=" + std::to_string(seed + i) + " (program index " +
                 std::to_string(i) + ")\n" + g.text);
    Program p = parse_source(g.text, "random.attn").at(0);
    check(p, random_inputs(p, g.sizes, seed + 1000003 * i), i);
    if (::testing::Test::HasFatalFailure() || ::testing::Test::HasFailure()) return;
  }
}

}  // namespace flashgen::testing
