// The CUDA element path without a GPU: the element kernels' CUDA source (the lowering, the
// loop-nest printer's cuda_block skeleton, the store helpers, the gathers) compiled by the host
// compiler over a shim that spells CUDA's built-ins for one thread per block, and run block by
// block on host memory bound by the real host binding (bind_element). Every example and every
// kind of tests/programs/unseen_kinds.attn and more_kinds.attn, plus random programs of the CPU property test's
// generator (fixed seed, printed), against the f64 reference at odd sizes; both workspace homes
// (shared memory and the device scratch). What this cannot show, the GPU tests do
// (tests/gpu/element_gpu_test.cpp): the elements spread over many threads and their barriers.
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

// CUDA's spellings on the host, for blockDim.x = 1: the barriers order nothing, atomics are
// plain read-modify-writes, shared memory is one static buffer.
const char* kShim = R"(
#include <math.h>
/* The CUDA prelude's own integer typedefs, under names the host's headers do not take. */
#define int64_t fg_i64
#define uint64_t fg_u64
#define uint32_t fg_u32
#define uint16_t fg_u16
#define uint8_t fg_u8
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__
#define __align__(n) __attribute__((aligned(n)))
struct fg_dim3 { long long x, y, z; };
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
static inline unsigned __float_as_uint(float f) { unsigned u; __builtin_memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int i) { float f; __builtin_memcpy(&f, &i, 4); return f; }
static inline float __fmul_rn(float a, float b) { return a * b; }
__attribute__((aligned(16))) char fg_smem[1 << 22];
)";

constexpr int64_t kSmem = 1 << 22;

// Runs program `p` on the element path of the host emulation; outputs of their declared dtype.
// `smem_limit`: the lowered limit under which a workspace stays in (emulated) shared memory.
TensorMap run_emulated(const Program& p, const TensorMap& inputs, int64_t smem_limit) {
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
    const std::string src = std::string(kShim) + c.sources[i] +
                            "\nextern \"C\" __attribute__((visibility(\"default\"))) void "
                            "fg_emulate(const void* params, long long blocks) {\n"
                            "  gridDim.x = blocks;\n"
                            "  for (long long b = 0; b < blocks; ++b) { blockIdx.x = b; " +
                            lk.entry + "(*(const " + lk.entry + "_params*)params); }\n}\n";
    HostCompileOptions hco;
    // Hidden symbols: the kernel's name (also a CPU kernel's) binds inside this library.
    hco.extra_flags = {"-O1", "-w", "-fvisibility=hidden"};
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
      lib->function<void(const void*, long long)>("fg_emulate")(bk.params.data(), bk.grid.x);
  }
  if (err[0]) cuda_raise_error_word(p, plan, extv, err);
  return out;
}

void expect_matches(const Program& p, const TensorMap& in, int64_t smem_limit,
                    const std::string& what) {
  EXPECT_EQ(testing::element_mismatch(p, run_emulated(p, in, smem_limit),
                                      evaluate_reference(p, in)),
            "")
      << what;
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
                           "tests/programs/groups.attn"})
    for (const Program& p : parse_file(testing::source_path(file))) {
      Extents all = {{"b", 2}, {"h", 3}, {"g", 2}, {"r", 129}, {"m", 19}, {"n", 70}, {"d", 5},
                     {"e", 7}, {"f", 3}, {"t", 11}, {"u", 70}}, ext;
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
