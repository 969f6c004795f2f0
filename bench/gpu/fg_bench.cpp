// fg_bench — a small driver over the library for scripts/gpu_check (the same numbers as
// `flashgen bench`, without the CLI):
//   fg_bench bench FILE SIZES [NAME=FILE.npy ...]   median ms, unmasked TFLOP/s, peak fraction
//   fg_bench run FILE SIZES [NAME=FILE.npy ...]     one run_cuda on random inputs, the named
//                                                    ones from .npy files (for compute-
//                                                    sanitizer), prints output sums
//   fg_bench sweep FILE SPEC...                      `bench` for each SPEC = SIZES[;NAME=FILE.npy]...
//                                                    in one process (one compile); a failing
//                                                    SPEC prints BENCHFAIL SIZES why
// SIZES like b=4,h=16,m=n=4096,d=e=128. Last line of `bench`: BENCH name sizes ms tflops frac.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "flashgen/compile.h"
#include "flashgen/error.h"
#include "flashgen/frontend.h"
#include "flashgen/npy.h"
#include "flashgen/ref.h"

using namespace flashgen;

static Extents parse(const std::string& text) {
  Extents x;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t eq = item.rfind('=');
    int64_t v = std::stoll(item.substr(eq + 1));
    std::stringstream names(item.substr(0, eq));
    std::string n;
    while (std::getline(names, n, '=')) x[n] = v;
  }
  return x;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: [FG_PROGRAM=NAME] fg_bench bench|run FILE SIZES [NAME=FILE.npy ...]\n");
    return 2;
  }
  try {
    std::string mode = argv[1];
    // FILE's first program, or the one FG_PROGRAM names.
    std::vector<Program> all = parse_file(argv[2]);
    Program p = all.at(0);
    if (const char* want = std::getenv("FG_PROGRAM"); want && *want) {
      auto it = std::find_if(all.begin(), all.end(), [&](const Program& q) { return q.name == want; });
      if (it == all.end()) {
        std::fprintf(stderr, "fg_bench: %s holds no program '%s'\n", argv[2], want);
        return 2;
      }
      p = *it;
    }
    if (mode == "sweep") {
      for (int i = 3; i < argc; ++i) {
        std::stringstream spec(argv[i]);
        std::string text, item;
        std::getline(spec, text, ';');
        try {
          TensorMap given;
          while (std::getline(spec, item, ';')) {
            size_t eq = item.find('=');
            given[item.substr(0, eq)] = read_npy(item.substr(eq + 1)).tensor;
          }
          CudaBenchResult r = bench_cuda(p, parse(text), 5, 30, 1, given);
          std::printf("BENCH %s %s %.5f %.2f %.4f\n", p.name.c_str(), text.c_str(), r.median_ms,
                      r.tflops, (r.peak_tflops > 0 ? r.tflops / r.peak_tflops : 0.0));
        } catch (const std::exception& e) {
          std::printf("BENCHFAIL %s %s\n", text.c_str(), e.what());
        }
        std::fflush(stdout);
      }
      return 0;
    }
    Extents sizes = parse(argv[3]);
    TensorMap given;
    for (int i = 4; i < argc; ++i) {
      std::string kv = argv[i];
      size_t eq = kv.find('=');
      given[kv.substr(0, eq)] = read_npy(kv.substr(eq + 1)).tensor;
    }
    if (mode == "run") {
      TensorMap in = random_inputs(p, sizes, 7);
      for (const auto& [name, t] : given) in[name] = t;
      TensorMap out = run_cuda(p, in);
      for (const auto& [name, t] : out) {
        double s = 0;
        int64_t nonfinite = 0;
        for (int64_t i = 0; i < t.numel(); ++i) {
          double v = t.get(i);
          if (std::isfinite(v)) s += v; else ++nonfinite;
        }
        std::printf("RUN %s %s %s sum %.6g nonfinite %lld\n", p.name.c_str(), argv[3],
                    name.c_str(), s, (long long)nonfinite);
      }
      return 0;
    }
    CudaBenchResult r = bench_cuda(p, sizes, 5, 30, 1, given);
    std::printf("BENCH %s %s %.5f %.2f %.4f\n", p.name.c_str(), argv[3], r.median_ms, r.tflops,
                (r.peak_tflops > 0 ? r.tflops / r.peak_tflops : 0.0));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fg_bench: %s\n", e.what());
    return 1;
  }
}
