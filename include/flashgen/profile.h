// Profiling a program on a backend: per plan kernel, compile time, median time over warm runs,
// the work it must do (FLOPs, bytes), achieved rates against the device's roofline, the key
// tiles the kernel computed / skipped / ran unmasked (counted by an instrumented build of the
// kernel), and its launch. `flashgen profile` prints profile_text and writes chrome_trace_json.
// See docs/cli.md "profile". Tests: tests/tools/profile_test.cpp, tests/gpu/profile_gpu_test.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "flashgen/flashgen.h"

namespace flashgen {

// Key tiles of a kernel's reduction loop over the whole grid, as the kernel counted them.
struct TileCounts {
  int64_t computed = 0;  // tiles whose body ran (partial or full)
  int64_t skipped = 0;   // tiles classified empty: never loaded, never computed
  int64_t full = 0;      // computed tiles that ran without evaluating the mask
};

// The device's two ceilings, each with how it was obtained (0: unknown, `how` says why).
struct DevicePeaks {
  std::string device;       // "NVIDIA H200" / the CPU's model name
  double flops = 0;         // FLOP/s of the unit the kernels' main work runs on
  std::string flops_how;    // e.g. "132 SMs x 1980 MHz x 4096 FLOP/clock/SM (dense bf16 ...)"
  double bytes_per_s = 0;   // device memory bandwidth
  std::string bytes_how;
};

struct KernelProfile {
  std::string name;
  // Compile: "compiled" (the compiler ran), "disk cache" or "process cache" (already loaded).
  std::string compiled;
  double compile_ms = 0;
  // CUDA, where NVRTC ran for this call: its time for each build (entry, ms): the main build
  // (when this process loads the program), and the one the call launches where that is another
  // (few-rows or walking, compiled beside the main build; the cp.async builds, entry
  // "... (cp.async)", compiled when the call launches them).
  std::vector<std::pair<std::string, double>> nvrtc_ms;
  int iters = 0;
  double median_ms = 0, min_ms = 0, max_ms = 0;
  bool cost_known = false;      // false when an extent the counts need is unknown
  double dense_flops = 0;       // every value over its whole dim set (kernel_cost)
  double kept_fraction = 1;     // of (row, key) pairs the mask keeps (host, plan/cost.h)
  double flops = 0;             // must do: the key loop's FLOPs over kept pairs, plus the rest
  double bytes = 0;             // each buffer read or written once
  double tflops = 0, tbps = 0;  // flops and bytes over the median time
  double intensity = 0;         // flops / bytes
  double roofline_tflops = 0;   // min(peak FLOP/s, intensity x peak bandwidth); 0: unknown
  double roofline_fraction = 0; // tflops / roofline_tflops
  bool bound_by_memory = false; // intensity x bandwidth below the FLOP peak
  // Key tiles (kernels with a reduction loop): the tile shape and the counts.
  bool has_key_loop = false;
  std::string row_dim, key_dim;
  int64_t row_tile = 0, key_tile = 0;
  TileCounts tiles;
  // Launch. CUDA: grid, threads per block, dynamic shared memory, registers and local memory
  // (spills or stack) per thread, from the loaded module. CPU: OpenMP threads and grid points.
  int64_t grid[3] = {0, 0, 0};
  int threads = 0;
  int64_t smem_bytes = 0;
  int registers = 0;
  int local_bytes = 0;
  int blocks_per_sm = 0;      // CUDA: __launch_bounds__ minimum
  int value_split = 1;        // CUDA: blocks that split the value columns (each counts tiles)
  int key_split = 1;          // CUDA: blocks that split the key loop (flash-decoding; combined)
  // CUDA, a warp-specialized (Hopper) kernel: how its producer warpgroup copied K and V ("TMA",
  // or "cp.async" when no tensor map describes the call's tensors); empty otherwise
  std::string kv_copies;
  bool walk = false;          // CUDA: a persistent grid whose blocks walk the work items
  int64_t grid_points = 0;    // CPU: parallel loop iterations
  std::string note;           // what the numbers leave out, if anything
};

// One span of the Chrome trace (microseconds from the profile's start).
struct TraceSpan {
  std::string name, category;  // category: "compile", "transfer", "kernel", "host"
  double start_us = 0, dur_us = 0;
  int track = 0;               // 0: host, 1: device (CUDA) / kernels (CPU)
};

struct ProfileReport {
  std::string program;
  Backend backend = Backend::cpu;
  std::string backend_detail;  // "cuda (sm80 path, sm_90a)" / "cpu (N OpenMP threads)"
  Extents sizes;
  int warmup = 0;
  DevicePeaks peaks;
  std::vector<KernelProfile> kernels;
  std::vector<TraceSpan> trace;
};

struct ProfileOptions {
  Backend backend = Backend::cpu;  // cpu or cuda
  int warmup = 3, iters = 20;
  uint64_t seed = 1;               // random inputs
  TensorMap given;                 // inputs that replace the random ones (e.g. document ids)
  std::vector<std::string> host_flags;  // extra host compiler flags (CPU; tests pass -O1)
};

// Profiles `p` on random inputs of `sizes` (every dim needs an extent). CallError for a bad
// call, BackendError when the backend cannot run the program.
ProfileReport profile(const Program& p, const Extents& sizes, const ProfileOptions& opt);
// The report as the table `flashgen profile` prints.
std::string profile_text(const ProfileReport& r);
// The report's spans as a Chrome trace (the JSON object format that Perfetto and
// chrome://tracing open): {"traceEvents": [...], "displayTimeUnit": "ms"}.
std::string chrome_trace_json(const ProfileReport& r);

}  // namespace flashgen
