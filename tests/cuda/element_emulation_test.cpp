// The CUDA element path without a GPU: the element kernels' CUDA source (the lowering, the
// loop-nest printer's cuda_block skeleton, the store helpers, the gathers) compiled by the host
// compiler over a shim that spells CUDA's built-ins for one thread per block, and run block by
// block on host memory bound by the real host binding (bind_element). Every example and every
// kind of tests/programs/unseen_kinds.attn and more_kinds.attn, plus random programs of the CPU property test's
// generator (fixed seed, printed), against the f64 reference at odd sizes; both workspace homes
// (shared memory and the device scratch). The kernels whose threads share a point run once
// more with each block's real threads (kThreadShim): their elements over the threads, the
// trees of partials and the barriers. What this cannot show, the GPU tests do
// (tests/gpu/element_gpu_test.cpp): warps, the GPU's memory order, its shared memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "compiler/cuda_call.h"
#include "compiler/pipeline.h"
#include "flashgen/compile.h"
#include "flashgen/frontend.h"
#include "flashgen/ref.h"
#include "runtime/host_compiler.h"
#include "support/random_program.h"
#include "support/support.h"

namespace flashgen {
namespace {

// CUDA's spellings on the host common to both shims below.
#define FG_SHIM_COMMON \
  "/* The CUDA prelude's own integer typedefs, under names the host's headers do not take. */\n" \
  "#define int64_t fg_i64\n#define uint64_t fg_u64\n#define uint32_t fg_u32\n"                \
  "#define uint16_t fg_u16\n#define uint8_t fg_u8\n#define __global__\n#define __device__\n"  \
  "#define __forceinline__ inline\n#define __launch_bounds__(n)\n#define __shared__\n"          \
  "#define __align__(n) __attribute__((aligned(n)))\n"                                           \
  "struct fg_dim3 { long long x, y, z; };\n"                                                     \
  "static inline unsigned __float_as_uint(float f) { unsigned u; __builtin_memcpy(&u, &f, 4); "  \
  "return u; }\n"                                                                                \
  "static inline float __int_as_float(int i) { float f; __builtin_memcpy(&f, &i, 4); return f; }\n" \
  "static inline float __fmul_rn(float a, float b) { return a * b; }\n"

// For blockDim.x = 1: the barriers order nothing, atomics are plain read-modify-writes, shared
// memory is one static buffer.
const char* kShim = "#include <math.h>\n" FG_SHIM_COMMON R"(
static fg_dim3 threadIdx = {0, 0, 0}, blockDim = {1, 1, 1}, blockIdx = {0, 0, 0}, gridDim = {1, 1, 1};
static inline void __syncthreads() {}
static inline void __threadfence() {}
static inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long c,
                                           unsigned long long v) {
  unsigned long long o = *p; if (o == c) *p = v; return o;
}
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  unsigned long long o = *p; *p = o + v; return o;
}
__attribute__((aligned(16))) char fg_smem[1 << 22];
)";

// For a block of blockDim.x real threads (run_emulated's `threads`): each thread its own
// threadIdx and blockIdx, __syncthreads a barrier of the block's threads, shared memory a
// buffer per block. A barrier that waits past fg_wait_s seconds (a thread that never arrives: a
// barrier some threads skip) ends the process with a message.
const char* kThreadShim = R"(
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>
)" FG_SHIM_COMMON R"(
static thread_local fg_dim3 threadIdx = {0, 0, 0}, blockIdx = {0, 0, 0};
static fg_dim3 blockDim = {1, 1, 1}, gridDim = {1, 1, 1};
struct fg_block { std::mutex mu; std::condition_variable cv; int n = 1, arrived = 0; long long gen = 0; };
static thread_local fg_block* fg_this_block = nullptr;
static thread_local char* fg_smem = nullptr;
static const double fg_wait_s = 120;
static inline void __syncthreads() {
  fg_block* b = fg_this_block;
  std::unique_lock<std::mutex> lk(b->mu);
  if (++b->arrived == b->n) { b->arrived = 0; ++b->gen; b->cv.notify_all(); return; }
  const long long g = b->gen;
  if (!b->cv.wait_for(lk, std::chrono::duration<double>(fg_wait_s), [&] { return b->gen != g; })) {
    fprintf(stderr, "emulated block %lld: %d of %d threads at a barrier after %.0f s\n",
            blockIdx.x, b->arrived, b->n, fg_wait_s);
    abort();
  }
}
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long c,
                                           unsigned long long v) {
  __atomic_compare_exchange_n(p, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return c;
}
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
)";

constexpr int64_t kSmem = 1 << 22;

// Runs program `p` on the element path of the host emulation; outputs of their declared dtype.
// `smem_limit`: the lowered limit under which a workspace stays in (emulated) shared memory.
// `threads`: a block is one thread (kShim), or its launch's blockDim.x real threads
// (kThreadShim), the blocks one after another.
TensorMap run_emulated(const Program& p, const TensorMap& inputs, int64_t smem_limit,
                       bool threads = false) {
  const Extents ext = bind_extents(p, inputs);
  CompileOptions o;
  o.target = Target::cuda_sm80;  // no head sizes: every kernel takes the element path
  Compiled c = compile_to_target(p, o);
  const Plan& plan = c.plan;
  std::vector<int64_t> extv;
  for (const std::string& d : p.dims) extv.push_back(ext.at(d));
  const TensorMap prepared = prepare_inputs(p, inputs);
  std::vector<Tensor> held;                         // inputs and outputs, declared dtypes
  std::vector<std::vector<int64_t>> wide;  // intermediates, 8 bytes an element (moving the
                                           // vectors keeps their buffers where they are)
  std::vector<DevicePtr> ptrs;
  std::vector<std::vector<int64_t>> strides;
  TensorMap out;
  for (const PlanBuffer& B : plan.buffers) {
    std::vector<int64_t> shape;
    for (int d : B.dims) shape.push_back(extv[d]);
    if (B.kind == PlanBuffer::Intermediate) {
      wide.emplace_back(static_cast<size_t>(std::max<int64_t>(1, checked_element_count(shape))));
      ptrs.push_back(reinterpret_cast<DevicePtr>(wide.back().data()));
      strides.push_back(Tensor(DType::f32, shape).strides());
      continue;
    }
    Tensor t = B.kind == PlanBuffer::Input ? prepared.at(B.name).to(B.type) : Tensor(B.type, shape);
    if (B.kind == PlanBuffer::Output && t.nbytes()) std::memset(t.data(), 0xff, t.nbytes());
    if (B.kind == PlanBuffer::Output) out[B.name] = t;
    ptrs.push_back(reinterpret_cast<DevicePtr>(t.data()));
    strides.push_back(t.strides());
    held.push_back(t);
  }
  int64_t err[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < c.lowered.kernels.size(); ++i) {
    LoweredKernel lk = c.lowered.kernels[i];
    EXPECT_EQ(lk.path, LoweredKernel::Path::element);
    lk.element.smem_limit = static_cast<int>(std::min<int64_t>(smem_limit, kSmem));
    const PlanKernel& k = plan.kernels[lk.plan_kernel];
    const std::string call = lk.entry + "(*(const " + lk.entry + "_params*)params);";
    std::string src;
    if (!threads) {
      src = std::string(kShim) + c.sources[i] +
            "\nextern \"C\" __attribute__((visibility(\"default\"))) void "
            "fg_emulate(const void* params, long long blocks, int, long long) {\n"
            "  gridDim.x = blocks;\n"
            "  for (long long b = 0; b < blocks; ++b) { blockIdx.x = b; " + call + " }\n}\n";
    } else {
      // (the kernel's `extern __shared__` array is the shim's pointer to its block's buffer)
      std::string kernel = c.sources[i];
      const std::string decl = "extern __shared__ __align__(16) char fg_smem[];";
      for (size_t at; (at = kernel.find(decl)) != std::string::npos;) kernel.erase(at, decl.size());
      src = std::string(kThreadShim) + kernel +
            "\nextern \"C\" __attribute__((visibility(\"default\"))) void "
            "fg_emulate(const void* params, long long blocks, int threads, long long smem) {\n"
            "  gridDim.x = blocks; blockDim.x = threads;\n"
            "  for (long long b = 0; b < blocks; ++b) {\n"
            "    fg_block block; block.n = threads;\n"
            "    std::vector<long long> buf((size_t)(smem / 8 + 2), -1);  /* (NaN bytes) */\n"
            "    std::vector<std::thread> ts;\n"
            "    for (int t = 0; t < threads; ++t)\n"
            "      ts.emplace_back([&, t] { threadIdx.x = t; blockIdx.x = b; fg_this_block = &block;\n"
            "                               fg_smem = (char*)buf.data(); " + call + " });\n"
            "    for (std::thread& th : ts) th.join();\n  }\n}\n";
    }
    HostCompileOptions hco;
    // Hidden symbols: the kernel's name (also a CPU kernel's) binds inside this library.
    hco.extra_flags = {"-O1", "-w", "-fvisibility=hidden", "-pthread"};
    auto lib = host_compile(src, hco);
    CudaBoundKernel bk;
    bind_element(plan, k, lk.element, ptrs, strides, reinterpret_cast<DevicePtr>(err), 0, extv,
                 7, bk);
    std::vector<char> scratch(static_cast<size_t>(std::max<int64_t>(1, bk.scratch_bytes)) + 16);
    if (bk.scratch_bytes > 0) {
      const auto at = reinterpret_cast<uintptr_t>(scratch.data());
      const DevicePtr aligned = (at + 15) / 16 * 16;
      bind_element(plan, k, lk.element, ptrs, strides, reinterpret_cast<DevicePtr>(err), aligned,
                   extv, 7, bk);
    }
    if (!bk.empty)
      lib->function<void(const void*, long long, int, long long)>("fg_emulate")(
          bk.params.data(), bk.grid.x, static_cast<int>(bk.block.x),
          static_cast<long long>(bk.smem));
  }
  if (err[0]) cuda_raise_error_word(p, plan, extv, err);
  return out;
}

void expect_matches(const Program& p, const TensorMap& in, int64_t smem_limit,
                    const std::string& what, bool threads = false) {
  EXPECT_EQ(testing::element_mismatch(p, run_emulated(p, in, smem_limit, threads),
                                      evaluate_reference(p, in)),
            "")
      << what;
}

// The kernels whose threads share a point (a block per point, the lanes of a point) with every
// block's real threads, against the reference: the elements in turn over the threads, the
// partials' trees, the barriers between them, a point slot past the last point (which stores
// nothing). Lanes from 1 to 32 (the rows' extents 7 to 1000), and a block per point over e;
// both workspace homes. Sizes keep each launch to a few blocks of 256 threads.
TEST(ElementEmulation, PointsSharedByThreadsMatchTheReferenceWithRealThreads) {
  std::vector<Program> ps;
  for (const Program& p : parse_file(testing::source_path("tests/programs/unseen_kinds.attn")))
    for (const char* name : {"norm_r", "center_m", "norm_e", "col_softmax", "col_stats", "two_whole"})
      if (p.name == name) ps.push_back(p);
  ASSERT_EQ(ps.size(), 6u);
  int lanes_seen = 0;
  for (const Program& p : ps)
    for (const int64_t m : {int64_t{7}, int64_t{100}, int64_t{1000}}) {
      Extents all = {{"b", 2}, {"r", 3}, {"m", m}, {"e", 9}}, ext;
      if (p.name == "norm_e") all = {{"b", 2}, {"m", 5}, {"e", m}};  // (a block per (b, m))
      for (const std::string& d : p.dims) ext[d] = all.at(d);
      CompileOptions o;
      o.target = Target::cuda_sm80;
      const Compiled c = compile_to_target(p, o);
      std::vector<int64_t> extv;
      for (const std::string& d : p.dims) extv.push_back(ext.at(d));
      lanes_seen = std::max(lanes_seen, lanes_for(c.lowered.kernels.at(0).element, extv));
      const TensorMap in = random_inputs(p, ext, 37);
      for (const int64_t limit : {kSmem, int64_t{0}})
        expect_matches(p, in, limit, p.name + " m=" + std::to_string(m) +
                                         (limit ? " (shared memory)" : " (device scratch)"),
                       /*threads=*/true);
    }
  EXPECT_EQ(lanes_seen, 32);
}

TEST(ElementEmulation, ExamplesAndUnseenKindsMatchTheReference) {
  std::vector<std::pair<Program, Extents>> ps;
  for (const std::string& n : testing::example_names()) {
    Program p = testing::example_program(n);
    ps.emplace_back(p, testing::example_extents(p, 19, 70, 5, 7, 2));
  }
  for (const char* file : {"tests/programs/unseen_kinds.attn", "tests/programs/more_kinds.attn",
                           "tests/programs/norms.attn", "tests/programs/gates.attn",
                           "tests/programs/value_sums.attn", "tests/programs/key_values.attn",
                           "tests/programs/mixed_kinds.attn",
                           "tests/programs/masks_and_outputs.attn",
                           "tests/programs/partials.attn",
                           "tests/programs/after_attention.attn",
                           "tests/programs/groups.attn",
                           "tests/programs/scores_only.attn",
                           "tests/programs/score_dims.attn"})
    for (const Program& p : parse_file(testing::source_path(file))) {
      Extents all = {{"b", 2}, {"h", 3}, {"g", 2}, {"r", 129}, {"r2", 2}, {"m", 19}, {"n", 70},
                     {"d", 5}, {"e", 7}, {"f", 3}, {"t", 11}, {"u", 70}}, ext;
      for (const std::string& d : p.dims) ext[d] = all.at(d);
      ps.emplace_back(p, ext);
    }
  for (const auto& [p, ext] : ps) {
    TensorMap in = random_inputs(p, ext, 29);
    if (in.count("len")) {  // a batch with every row masked, one with a few rows
      Tensor len(DType::i32, {2});
      len.set(1, 6.0);
      in["len"] = len;
    }
    if (in.count("doc")) {  // sorted documents
      const int64_t t = in.at("doc").numel();
      Tensor doc(DType::i32, {t});
      for (int64_t i = 0; i < t; ++i) doc.set(i, static_cast<double>(i / 23));
      in["doc"] = doc;
    }
    // Workspaces in shared memory, then in the device scratch (a limit of 0 bytes).
    expect_matches(p, in, kSmem, p.name + " (shared memory)");
    expect_matches(p, in, 0, p.name + " (device scratch)");
  }
}

// Stores in every encoding (f8 values pass through; f16 results round once), and a plan of two
// kernels whose intermediate lives between them.
TEST(ElementEmulation, EveryOutputEncodingAndPlansOfSeveralKernels) {
  std::vector<Program> ps = parse_source(R"(
program f8pass(x: f8e4m3[m, d], y: f8e5m2[m], z: f16[m, d]) {
  out a: f8e4m3[m, d] = x
  out b: f8e5m2[m] = y
  out c: f16[m, d] = z * 3.0
  out e: f16[m] = sum(z, d)
  out f: bool[m] = sum(z, d) > 0.0
  out g: i32[m, d] = i32(z * 4.0)
}
program two_pass(q: f32[b, m, d], k: f32[b, n, d], v: f32[b, n, e]) {
  s = sum(q * k, d)
  c = sum(softmax(s, n), m)
  out o: f32[b, m, e] = sum(softmax(s, n) * v / (1.0 + c), n)
}
)", "enc.attn");
  ASSERT_GT(kernel_count(ps[1], {}), 1);
  expect_matches(ps[0], random_inputs(ps[0], {{"m", 9}, {"d", 5}}, 3), kSmem, "f8pass");
  for (int64_t m : {1, 9, 70})
    expect_matches(ps[1], random_inputs(ps[1], {{"b", 2}, {"m", m}, {"n", 45}, {"d", 7}, {"e", 3}}, 3),
                   m == 9 ? 0 : kSmem, "two_pass m=" + std::to_string(m));
}

TEST(ElementEmulation, OutOfRangeGatherNamesTheParameter) {
  Program p = parse_source(R"(
program g(x: f32[m, d], idx: i32[m], t: f32[r]) {
  out o: f32[m] = sum(x, d) + t[idx[m]]
}
)", "g.attn").at(0);
  TensorMap in = random_inputs(p, {{"m", 5}, {"d", 3}, {"r", 4}}, 1);
  Tensor idx(DType::i32, {5});
  idx.set(3, -2.0);
  in["idx"] = idx;
  try {
    run_emulated(p, in, kSmem);
    FAIL() << "expected a CallError";
  } catch (const CallError& e) {
    EXPECT_NE(std::string(e.what()).find("index -2 is out of range [0, 4) in a read of parameter 't'"),
              std::string::npos) << e.what();
  }
}

TEST(ElementEmulation, RandomProgramsMatchTheReference) {
  testing::for_each_random_program("element emulation", 40,
                                    [](const Program& p, const TensorMap& in, int i) {
                                      expect_matches(p, in, i % 2 ? 0 : kSmem, p.name);
                                    });
}

}  // namespace
}  // namespace flashgen
