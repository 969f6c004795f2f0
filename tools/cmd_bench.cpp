// `flashgen bench FILE [--program NAME] --sizes SIZES [--backend cuda] [--warmup N] [--iters N]
//                      [--seed S] [--input NAME=FILE.npy]...`: times a program on the GPU
// (random inputs unless given) and prints the median over warm runs, TFLOP/s counting only
// unmasked work, and the fraction of the dense bf16 tensor-core peak. The last line is
// machine-readable (bench/run_bench.py parses it). Tests: tests/gpu (through run_cuda);
// scripts/gpu_check runs it for every benchmark row.
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "flashgen/compile.h"
#include "flashgen/error.h"
#include "flashgen/npy.h"

namespace flashgen::cli {

void add_bench(CLI::App& app, int& exit_code) {
  struct Options {
    std::string file, program, sizes, backend = "cuda", seed = "1";
    int warmup = 5, iters = 30;
    std::vector<std::string> inputs;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Time a program on the GPU: median time over warm runs, TFLOP/s counting only "
               "unmasked work (per unmasked (row, key) pair: 2*d per q.k contraction + 2*e per "
               "P.V accumulator), and the fraction of the dense bf16 tensor-core peak.");
  cmd->add_option("FILE", o->file, "an .attn source file")->required();
  cmd->add_option("--program", o->program, "the program (if FILE holds several)");
  cmd->add_option("--sizes", o->sizes, "every dimension's extent, e.g. b=4,h=16,m=n=4096,d=e=128")
      ->required();
  cmd->add_option("--backend", o->backend, "cuda (the backend that is timed)")
      ->check(CLI::IsMember({"cuda"}));
  cmd->add_option("--warmup", o->warmup, "untimed runs first (default 5)");
  cmd->add_option("--iters", o->iters, "timed runs (default 30)");
  cmd->add_option("--seed", o->seed, "seed of the random inputs, 0 to 2^64 - 1 (default 1)");
  cmd->add_option("--input", o->inputs,
                  "NAME=FILE.npy: use this array for parameter NAME instead of random data "
                  "(e.g. sorted document ids); repeatable");
  cmd->callback([o, &exit_code] {
    exit_code = guarded(o->file, [&] {
      Loaded f = load(o->file);
      const Program& p = pick(f, o->program);
      const uint64_t seed = parse_seed(o->seed);
      Extents sizes = parse_sizes(o->sizes);
      check_sizes_known(p, sizes);
      TensorMap given = read_given_inputs(o->inputs);
      CudaBenchResult r = bench_cuda(p, sizes, o->warmup, o->iters, seed, given);
      std::printf("program %s on %s, sizes %s\n", p.name.c_str(), r.device.c_str(),
                  o->sizes.c_str());
      std::printf("kernels: %s\n", r.kernels.c_str());
      std::printf("median %.4f ms (min %.4f ms) over %d warm runs\n", r.median_ms, r.min_ms,
                  o->iters);
      std::printf("%.3e FLOPs counted: unmasked work only (%.1f%% of the dense %.3e)\n",
                  r.flops, r.dense_flops > 0 ? 100.0 * r.flops / r.dense_flops : 0.0,
                  r.dense_flops);
      const double of_peak = r.peak_tflops > 0 ? r.tflops / r.peak_tflops : 0;
      if (r.peak_tflops > 0)
        std::printf("%.1f TFLOP/s = %.3f of the %.0f TFLOP/s dense bf16 tensor-core peak\n",
                    r.tflops, of_peak, r.peak_tflops);
      else
        std::printf("%.1f TFLOP/s (no datasheet peak for this GPU)\n", r.tflops);
      std::printf("BENCH %s %s %.5f %.2f %.4f\n", p.name.c_str(), o->sizes.c_str(), r.median_ms,
                  r.tflops, of_peak);
      return kOk;
    });
  });
}

}  // namespace flashgen::cli
