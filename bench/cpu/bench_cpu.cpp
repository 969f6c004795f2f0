// CPU benchmark (not a test): causal attention at b=1, h=8, n=2048, d=64 through
//   1. flashgen's CPU backend (one fused kernel, compiled once, then timed warm),
//   2. a plain materializing C++ implementation (S = Q·Kᵀ as an N×N matrix per head, softmax,
//      P·V; OpenMP over heads),
//   3. the reference evaluator (f64, unfused; timed once),
// with the error of 1 and 2 against 3, and the memory each holds: the fused plan's per-thread
// tiles versus the N×N scores. Build and run: bench/cpu/run.sh [BUILD_DIR].
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include "compiler/pipeline.h"
#include "flashgen/compile.h"
#include "flashgen/flashgen.h"

using namespace flashgen;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The materializing baseline: every head's N×N scores go through memory.
std::vector<float> materializing(const Tensor& q, const Tensor& k, const Tensor& v, int64_t H,
                                 int64_t N, int64_t D, size_t* bytes_scores) {
  std::vector<float> out(H * N * D);
  const float* Q = static_cast<const float*>(q.data());
  const float* K = static_cast<const float*>(k.data());
  const float* V = static_cast<const float*>(v.data());
  std::vector<std::vector<float>> S(H, std::vector<float>(N * N));
  *bytes_scores = static_cast<size_t>(H) * N * N * sizeof(float);
  const float scale = 1.f / std::sqrt(static_cast<float>(D));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t hm = 0; hm < H * N; ++hm) {
    int64_t h = hm / N, i = hm % N;
    float* s = &S[h][i * N];
    float mx = -INFINITY;
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0;
      for (int64_t d = 0; d < D; ++d) acc += Q[(h * N + i) * D + d] * K[(h * N + j) * D + d];
      s[j] = j <= i ? acc * scale : -INFINITY;
      mx = std::max(mx, s[j]);
    }
    float sum = 0;
    for (int64_t j = 0; j < N; ++j) sum += (s[j] = std::exp(s[j] - mx));
    for (int64_t d = 0; d < D; ++d) {
      float acc = 0;
      for (int64_t j = 0; j < N; ++j) acc += s[j] * V[(h * N + j) * D + d];
      out[(h * N + i) * D + d] = acc / sum;
    }
  }
  return out;
}

}  // namespace

int main() {
  const int64_t B = 1, H = 8, N = 2048, D = 64;
  Program p = parse_source(R"(
program causal(q: f32[b, h, m, d], k: f32[b, h, n, d], v: f32[b, h, n, e]) {
  s = where(n <= m, sum(q * k, d) / sqrt(size(d)), -inf)
  out o: f32[b, h, m, e] = sum(softmax(s, n) * v, n)
})", "bench.attn").at(0);
  Extents ext = {{"b", B}, {"h", H}, {"m", N}, {"n", N}, {"d", D}, {"e", D}};
  TensorMap in = random_inputs(p, ext, 42);
  std::printf("causal attention, b=%lld h=%lld m=n=%lld d=e=%lld, f32, %d threads\n",
              (long long)B, (long long)H, (long long)N, (long long)D, omp_get_max_threads());

  Plan plan = compile_program(p, {}).plan;
  size_t tile_floats = 0;
  for (const PlanValue& v : plan.kernels[0].values) {
    if (v.inlined) continue;
    size_t n = 1;
    for (int d : v.local_dims)
      n *= d == plan.kernels[0].row_dim ? plan.kernels[0].row_tile
         : d == plan.kernels[0].red_dim ? plan.kernels[0].red_tile : ext.at(p.dims[d]);
    tile_floats += n;
  }
  std::printf("plan: %d kernel(s), %zu intermediate buffer(s) in memory; per-thread local "
              "arrays: %zu floats (%.1f KiB)\n", plan.kernel_count(), plan.materialized().size(),
              tile_floats, tile_floats * 4 / 1024.0);

  // FG_BENCH_REPS warm runs (default 5): the median is reported (the machine is shared).
  // FG_BENCH_QUICK=1 times only the fused kernel (no baseline, no reference, no error).
  const char* reps_env = std::getenv("FG_BENCH_REPS");
  const int reps = reps_env ? std::max(1, std::atoi(reps_env)) : 5;
  const bool quick = std::getenv("FG_BENCH_QUICK") != nullptr;
  auto t0 = std::chrono::steady_clock::now();
  TensorMap got = run_cpu(p, in);
  double first = seconds_since(t0);
  // CPU time (all threads) too: on a shared machine it moves less with the load than wall time.
  std::vector<double> times, cpu;
  for (int r = 0; r < reps; ++r) {
    t0 = std::chrono::steady_clock::now();
    std::clock_t c0 = std::clock();
    got = run_cpu(p, in);
    cpu.push_back(static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
    times.push_back(seconds_since(t0));
  }
  std::sort(times.begin(), times.end());
  std::sort(cpu.begin(), cpu.end());
  const double best = times[times.size() / 2];
  double flops = 4.0 * B * H * N * N * D / 2;  // causal: half the work
  std::printf("fused: median %.4f s (%.2f GFLOP/s*), min %.4f s, max %.4f s over %d runs; "
              "median CPU time %.4f s (%.2f GFLOP/s per busy core)\n",
              best, flops / best / 1e9, times.front(), times.back(), reps, cpu[cpu.size() / 2],
              flops / cpu[cpu.size() / 2] / 1e9);
  if (quick) return 0;
  size_t scores = 0;
  std::vector<float> base;
  double best_base = 1e30;
  for (int r = 0; r < 2; ++r) {
    t0 = std::chrono::steady_clock::now();
    base = materializing(in.at("q"), in.at("k"), in.at("v"), H, N, D, &scores);
    best_base = std::min(best_base, seconds_since(t0));
  }
  t0 = std::chrono::steady_clock::now();
  TensorMap want = evaluate_reference_f64(p, in);
  double ref_s = seconds_since(t0);

  double err_fused = 0, err_base = 0;
  const Tensor& w = want.at("o");
  const Tensor& g = got.at("o");
  for (int64_t i = 0; i < w.numel(); ++i) {
    err_fused = std::max(err_fused, std::fabs(g.get(i) - w.get(i)));
    err_base = std::max(err_base, std::fabs(base[i] - w.get(i)));
  }
  std::printf("%-28s %10s %12s %12s\n", "implementation", "time (s)", "GFLOP/s*", "max err");
  std::printf("%-28s %10.4f %12.2f %12.2e   (first call incl. compile %.2f s)\n",
              "flashgen cpu (fused, median)", best, flops / best / 1e9, err_fused, first);
  std::printf("%-28s %10.4f %12.2f %12.2e   (N×N scores: %.1f MiB)\n", "materializing C++",
              best_base, flops / best_base / 1e9, err_base, scores / 1048576.0);
  std::printf("%-28s %10.4f %12.2f %12s\n", "reference evaluator (f64)", ref_s,
              flops / ref_s / 1e9, "-");
  std::printf("* unmasked work only: 2·b·h·n²·d for causal\n");
  return 0;
}
