// flashgen profile and verify on the GPU: the key tiles the CUDA kernel counts (FG_COUNT_TILES)
// equal the tiles counted on the host from each mask, the timed kernel's launch is read from the
// loaded module, the trace places every timed run on the device track, and verify runs every
// example on ref, cpu and cuda within the dtype tolerance. SKIPs without a GPU.
#include <gtest/gtest.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "compiler/cuda_call.h"
#include "flashgen/compile.h"
#include "flashgen/flashgen.h"
#include "flashgen/frontend.h"
#include "flashgen/profile.h"
#include "flashgen/verify.h"
#include "runtime/cuda_driver.h"
#include "runtime/runtime_test_util.h"
#include "support/support.h"

namespace flashgen {
namespace {

bool have_gpu() { return cuda_available(); }

ProfileOptions on_gpu(int iters = 5) {
  ProfileOptions o;
  o.backend = Backend::cuda;
  o.warmup = 2;
  o.iters = iters;
  return o;
}

class CudaProfileTiles : public ::testing::TestWithParam<testing::ExampleMask> {};

TEST_P(CudaProfileTiles, KernelCountsEqualTheMaskCountedOnTheHost) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const testing::ExampleMask& c = GetParam();
  Program p = testing::example_program(c.example);
  for (int64_t m : {1000, 1333}) {
    const int64_t n = m == 1000 ? 1000 : 1111;  // a ragged last key tile
    Extents sizes = testing::example_extents(p, m, n, 64, 64, 2);
    ProfileOptions o = on_gpu();
    Tensor doc;
    if (p.find_param("doc") >= 0) {
      // (documents three times the usual length: some hold whole 128 x 128 tiles, so the
      // kernel's full tiles are counted too)
      doc = testing::document_ids(sizes.at("t"), 3);
      o.given["doc"] = doc;
    }
    ProfileReport r = profile(p, sizes, o);
    ASSERT_EQ(r.kernels.size(), 1u);
    const KernelProfile& k = r.kernels[0];
    const int64_t grid = sizes.at("b") * sizes.at("h") * k.value_split;
    // The kernel runs a full tile without mask code only when N does not cut it short.
    testing::HostTileCounts want = testing::host_tile_counts(
        [&](int64_t a, int64_t b) { return c.kept(a, b, doc); }, grid, m, n, k.row_tile,
        k.key_tile, /*full_needs_whole_tile=*/true);
    EXPECT_EQ(k.tiles.computed, want.computed) << c.example << " m=" << m;
    EXPECT_EQ(k.tiles.skipped, want.skipped) << c.example << " m=" << m;
    EXPECT_EQ(k.tiles.full, want.full) << c.example << " m=" << m;
    EXPECT_GT(want.skipped, 0);
    EXPECT_GT(want.full, 0);
  }
}

// Index masks through arithmetic (abs, products, floor of quotients, modulo, where) on the
// tensor cores: the kernel counts the host's tiles where the interval rules are exact (a subset
// of the empty ones elsewhere), and verify finds the reference's answers.
class CudaIndexMasks : public ::testing::TestWithParam<size_t> {};

TEST_P(CudaIndexMasks, ThroughArithmeticSkipTheDeadTiles) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const testing::IndexMask& c = testing::arithmetic_index_masks().at(GetParam());
  SCOPED_TRACE(c.mask);
  const int64_t M = 1000, N = 1111;
  Program p = testing::index_mask_program(c, "bf16");
  Extents sizes = {{"h", 2}, {"m", M}, {"n", N}, {"d", 64}, {"e", 64}};
  for (const CudaKernelPath& k : cuda_paths(p, Target::cuda_sm90, sizes))
    ASSERT_EQ(k.path, "tensor_core") << k.why;
  ProfileReport r = profile(p, sizes, on_gpu(2));
  ASSERT_EQ(r.kernels.size(), 1u);
  const KernelProfile& k = r.kernels[0];
  const testing::HostTileCounts want = testing::host_tile_counts(
      c.kept, 2 * k.value_split, M, N, k.row_tile, k.key_tile, /*full_needs_whole_tile=*/true);
  ASSERT_GT(want.skipped, 0);
  if (c.exact) {
    EXPECT_EQ(k.tiles.computed, want.computed);
    EXPECT_EQ(k.tiles.skipped, want.skipped);
    EXPECT_EQ(k.tiles.full, want.full);
  } else {
    EXPECT_GT(k.tiles.skipped, 0);
    EXPECT_LE(k.tiles.skipped, want.skipped);
    EXPECT_LE(k.tiles.full, want.full);
    EXPECT_EQ(k.tiles.computed + k.tiles.skipped, want.computed + want.skipped);
  }
  TensorMap in = random_inputs(p, sizes, 13);
  VerifyReport v = verify(p, in);
  EXPECT_TRUE(v.ok()) << verify_text(p, v, bind_extents(p, in));
}

// one test per mask (each verifies on ref, cpu and cuda at 1000 x 1111): gpu_check's shards
// share them out
INSTANTIATE_TEST_SUITE_P(Arithmetic, CudaIndexMasks,
                         ::testing::Range<size_t>(0, testing::arithmetic_index_masks().size()));

// A mask over per-batch lengths (len[b], read once per block) on the tensor-core path: the dead
// tiles of each batch entry are skipped, batch by batch, as the host counts them, and the
// results are the reference's (a batch of length 0 has every row masked).
TEST(CudaProfile, PerBatchLengthsSkipTheDeadTilesOnTheTensorCores) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  Program p = parse_source(R"(
program lens(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], len: i32[b]) {
  s = where(n < len[b] and m < len[b], sum(q * k, d) / sqrt(size(d)), -inf)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
)", "lens.attn").at(0);
  const int64_t M = 1000, N = 1111, H = 2;
  Extents sizes = {{"b", 4}, {"h", H}, {"m", M}, {"n", N}, {"d", 64}, {"e", 64}};
  for (const CudaKernelPath& k : cuda_paths(p, Target::cuda_sm90, sizes))
    ASSERT_EQ(k.path, "tensor_core") << k.why;
  const std::vector<int64_t> lens = {0, 37, 700, 5000};
  Tensor len(DType::i32, {4});
  for (int i = 0; i < 4; ++i) len.set(i, static_cast<double>(lens[i]));
  ProfileOptions o = on_gpu();
  o.given["len"] = len;
  ProfileReport r = profile(p, sizes, o);
  ASSERT_EQ(r.kernels.size(), 1u);
  const KernelProfile& k = r.kernels[0];
  const testing::HostTileCounts want = testing::length_mask_tile_counts(
      lens, H, M, N, k.row_tile, k.key_tile, /*full_needs_whole_tile=*/true);
  EXPECT_EQ(k.tiles.computed, want.computed);
  EXPECT_EQ(k.tiles.skipped, want.skipped);
  EXPECT_EQ(k.tiles.full, want.full);
  EXPECT_GT(want.skipped, want.computed / 2);
  TensorMap in = random_inputs(p, sizes, 5);
  in["len"] = len;
  EXPECT_EQ(testing::element_mismatch(p, run_cuda(p, in), evaluate_reference(p, in)), "");
}

INSTANTIATE_TEST_SUITE_P(Masks, CudaProfileTiles, ::testing::ValuesIn(testing::example_masks()),
                         [](const auto& info) { return info.param.example; });

// Walking blocks (Hopper) take every item after their first from a counter in the error words.
// With many more items than blocks, three launches that reuse the error words without zeroing
// them: the tile-counting build counts three times the host's tiles (an item taken twice or
// never would change them), each launch of the plain build, into outputs poisoned first,
// writes the same bits as a fresh call, and each leaves the counter 0. Document ids (items of
// unequal work: blocks take different numbers of them) at d = 64 (pipelined walking loop) and
// d = 128 (not pipelined), vanilla at a short key loop (its walking build) at d = 128, and the
// index masks causal (d = 128) and a sliding window (d = 64), reversed row tiles.
TEST(CudaProfile, WalkingBlocksTakeEveryItemOnceFromTheCounter) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const int sms = cuda_device_info().sm_count;
  struct Case { const char* name; int64_t n, d; };
  for (const Case& c : {Case{"document", 1000, 64}, Case{"document", 1000, 128},
                        Case{"vanilla", 300, 128}, Case{"causal", 1000, 128},
                        Case{"sliding_window", 1000, 64}}) {
    SCOPED_TRACE(std::string(c.name) + " d=" + std::to_string(c.d));
    Program p = testing::example_program(c.name);
    const bool doc = p.find_param("doc") >= 0;
    const int64_t m = 1000;
    int64_t batch = 1;  // b = h, for about 8 items an SM
    while (batch * batch * ((m + 127) / 128) < 8 * int64_t(sms)) ++batch;
    Extents sizes = testing::example_extents(p, m, c.n, c.d, c.d, batch);
    TensorMap in = random_inputs(p, sizes, 21);
    Tensor ids;
    if (doc) in["doc"] = ids = testing::document_ids(sizes.at("t"), 3);
    const TensorMap fresh = run_cuda(p, in);
    std::shared_ptr<const CudaLoaded> L = cuda_load(p, sizes);
    if (L->kernels.at(0).low.tensor_core.target != Target::cuda_sm90)
      GTEST_SKIP() << "blocks walk on Hopper GPUs only";
    const Sm80Launch& la = L->kernels.at(0).low.tensor_core.launch;
    std::shared_ptr<const CudaLoaded> counting = cuda_load(p, sizes, CudaBuild::count_tiles);
    for (const CudaLoaded* build : {counting.get(), L.get()}) {
      CudaBound b = cuda_bind(*build, p, in, sizes);
      cuda_prepare(*build, b);
      ASSERT_TRUE(b.kernels.at(0).walk);
      const int64_t items = (m + la.block_m - 1) / la.block_m * batch * batch * la.value_split;
      ASSERT_GT(items, 4 * int64_t(b.kernels.at(0).grid.x));
      for (int run = 0; run < 3; ++run) {
        for (size_t i = 0; i < build->plan.buffers.size(); ++i)
          if (build->plan.buffers[i].kind == PlanBuffer::Output) b.bufs[i].fill_u32(0xffffffffu);
        cuda_launch(*build, b, nullptr);
        cuda_synchronize();
        cuda_check_errors(p, build->plan, b);
        const std::vector<int64_t> err = b.err.download_as<int64_t>();
        ASSERT_EQ(err.size(), size_t(kCudaErrorWords));
        EXPECT_EQ(err[8], 0) << "run " << run;
        EXPECT_EQ(err[9], 0) << "run " << run;
        if (build == L.get()) {
          const TensorMap got = cuda_download_outputs(*build, b);
          for (const auto& [out, t] : fresh) {
            ASSERT_EQ(t.nbytes(), got.at(out).nbytes());
            EXPECT_EQ(std::memcmp(t.data(), got.at(out).data(), t.nbytes()), 0)
                << out << ", run " << run;
          }
        }
      }
      if (build == counting.get()) {
        const testing::ExampleMask* mask = nullptr;
        for (const testing::ExampleMask& e : testing::example_masks())
          if (e.example == c.name) mask = &e;
        const testing::HostTileCounts want = testing::host_tile_counts(
            [&](int64_t a, int64_t k) { return mask ? mask->kept(a, k, ids) : true; },
            batch * batch * la.value_split, m, c.n, la.block_m, la.block_n,
            /*full_needs_whole_tile=*/true);
        const TileCounts got = cuda_tile_counts(b);
        EXPECT_EQ(got.computed, 3 * want.computed);
        EXPECT_EQ(got.skipped, 3 * want.skipped);
        EXPECT_EQ(got.full, 3 * want.full);
      }
    }
  }
}

TEST(CudaProfile, TimesTheKernelAndReadsItsLaunchFromTheModule) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  Program p = testing::example_program("vanilla");
  Extents sizes = testing::example_extents(p, 2048, 2048, 128, 128, 4);
  ProfileReport r = profile(p, sizes, on_gpu(10));
  ASSERT_EQ(r.kernels.size(), 1u);
  const KernelProfile& k = r.kernels[0];
  EXPECT_GT(k.median_ms, 0);
  EXPECT_GT(k.registers, 0);
  EXPECT_TRUE(k.note.empty()) << k.note;  // random inputs: no careful rerun
  // Hopper's warp-specialized kernel (12 warps) copies these contiguous K/V by TMA
  EXPECT_EQ(k.kv_copies, k.threads == 384 ? "TMA" : "");
  EXPECT_GT(k.threads, 0);
  EXPECT_EQ(k.threads % 32, 0);
  EXPECT_GT(k.smem_bytes, 0);
  EXPECT_EQ(k.grid[0], (2048 + k.row_tile - 1) / k.row_tile);
  EXPECT_EQ(k.grid[1] * k.grid[2], 4 * sizes.at("h") * k.value_split * k.key_split);
  EXPECT_EQ(k.tiles.skipped, 0);
  EXPECT_EQ(k.tiles.full, k.tiles.computed);  // no mask: every whole tile runs unmasked
  EXPECT_GT(r.peaks.flops, 0) << r.peaks.flops_how;
  EXPECT_GT(r.peaks.bytes_per_s, 0) << r.peaks.bytes_how;
  EXPECT_GT(k.roofline_fraction, 0);
  EXPECT_LT(k.roofline_fraction, 1.5);  // a rate far above the device's peak is a counting bug
  nlohmann::json j = nlohmann::json::parse(chrome_trace_json(r));
  int runs = 0;
  double last_end = -1;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("cat", "") != "kernel" || e["tid"] != 1) continue;
    ++runs;
    EXPECT_GE(e["ts"].get<double>() + 1.0, last_end);  // event offsets: in order (1 us slack)
    last_end = e["ts"].get<double>() + e["dur"].get<double>();
  }
  EXPECT_EQ(runs, 10);
}

// A first call compiles its main build and, beside it, the build it launches where that is
// another (few rows, or the walking build of a short key loop): profile reports NVRTC's time for
// each, by entry (the target is a second or less a kernel); a later call of the same process
// reports only a build it compiled itself.
TEST(CudaProfile, ReportsNvrtcTimeForEachBuildTheCallCompiles) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  testing_runtime::TempCacheDir cache;  // nothing compiled yet
  // (a name of its own: no earlier test in this process loaded these kernels)
  Program p = parse_source(
                  "program nvrtc_timed(q: bf16[b, h, m, d], k: bf16[b, h, n, d], "
                  "v: bf16[b, h, n, e]) {\n"
                  "  s = where(n <= m + 5, sum(q * k, d) / sqrt(size(d)), -inf)\n"
                  "  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)\n}\n",
                  "nvrtc_timed.attn")
                  .at(0);
  for (int64_t m : {int64_t{4}, int64_t{512}}) {  // the few-rows kernel, then the main one
    SCOPED_TRACE("m = " + std::to_string(m));
    Extents sizes = testing::example_extents(p, m, 512, 64, 64, 2);
    ProfileReport r = profile(p, sizes, on_gpu(2));
    ASSERT_EQ(r.kernels.size(), 1u);
    const KernelProfile& k = r.kernels[0];
    const std::string launched = k.name.substr(0, k.name.find(' '));
    if (m == 4) {  // the first call: the main build and the few-rows one
      EXPECT_EQ(k.compiled, "compiled");
      ASSERT_EQ(k.nvrtc_ms.size(), 2u);
      EXPECT_EQ(k.nvrtc_ms[0].first, "nvrtc_timed_k0");
      EXPECT_EQ(k.nvrtc_ms[1].first, launched);
      EXPECT_EQ(launched, "nvrtc_timed_k0_few");
    } else {  // loaded in this process: the main build is not compiled again (a build this
              // call launches for the first time would be: then it alone is listed)
      EXPECT_EQ(k.compiled, "process cache");
      for (const auto& [entry, ms] : k.nvrtc_ms) {
        EXPECT_NE(entry, "nvrtc_timed_k0");
        EXPECT_EQ(entry, launched);
      }
    }
    for (const auto& [entry, ms] : k.nvrtc_ms) {
      EXPECT_GT(ms, 0) << entry;
      EXPECT_LT(ms, 60e3) << entry;  // a wall time in milliseconds, not a clock count
    }
  }
}

class CudaVerify : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaVerify, EveryBackendAgreesWithTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  Program p = testing::example_program(GetParam());
  const bool evo = p.name.rfind("evoformer", 0) == 0;
  Extents sizes = testing::example_extents(p, 77, 333, evo ? 32 : 64,
                                           p.name == "diff_attn" ? 128 : 64, 2);
  TensorMap in = random_inputs(p, sizes, 11);
  VerifyReport r = verify(p, in);
  ASSERT_EQ(r.ran(), 3) << verify_text(p, r, bind_extents(p, in));
  EXPECT_TRUE(r.ok()) << verify_text(p, r, bind_extents(p, in));
}

INSTANTIATE_TEST_SUITE_P(Examples, CudaVerify, ::testing::ValuesIn(testing::example_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace flashgen
