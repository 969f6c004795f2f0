// flashgen/profile.h on the CPU backend: the key tiles the kernel counts equal the tiles counted
// on the host from the mask (causal, sliding window, documents, prefix LM), the work and rates
// are consistent, every kernel of a plan is timed, and the Chrome trace holds the spans.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "flashgen/compile.h"
#include "flashgen/frontend.h"
#include "flashgen/profile.h"
#include "support/support.h"

namespace flashgen {
namespace {

ProfileOptions fast_cpu(int iters = 3) {
  ProfileOptions o;
  o.backend = Backend::cpu;
  o.warmup = 1;
  o.iters = iters;
  o.host_flags = {"-O1"};
  return o;
}

struct MaskCase {
  testing::ExampleMask mask;
  int64_t m, n;
};

class ProfileTiles : public ::testing::TestWithParam<MaskCase> {};

TEST_P(ProfileTiles, KernelCountsEqualTheMaskCountedOnTheHost) {
  const MaskCase& c = GetParam();
  Program p = testing::example_program(c.mask.example);
  Extents sizes = testing::example_extents(p, c.m, c.n, 16, 16, 2);
  ProfileOptions o = fast_cpu();
  Tensor doc;
  if (p.find_param("doc") >= 0) {
    doc = testing::document_ids(sizes.at("t"));
    o.given["doc"] = doc;
  }
  ProfileReport r = profile(p, sizes, o);
  ASSERT_EQ(r.kernels.size(), 1u);
  const KernelProfile& k = r.kernels[0];
  ASSERT_TRUE(k.has_key_loop);
  EXPECT_EQ(k.row_dim, "m");
  EXPECT_EQ(k.key_dim, "n");
  const int64_t grid = sizes.at("b") * sizes.at("h");
  testing::HostTileCounts want = testing::host_tile_counts(
      [&](int64_t m, int64_t n) { return c.mask.kept(m, n, doc); }, grid, c.m, c.n, k.row_tile,
      k.key_tile, /*full_needs_whole_tile=*/false);
  EXPECT_EQ(k.tiles.computed, want.computed);
  EXPECT_EQ(k.tiles.skipped, want.skipped);
  EXPECT_EQ(k.tiles.full, want.full);
  EXPECT_GT(want.skipped, 0);  // each case has empty tiles, full tiles and partial ones
  EXPECT_GT(want.full, 0);
  EXPECT_GT(want.computed, want.full);
  // The work the kernel must do: the mask keeps the fraction of pairs the host counts (exact:
  // every case has at most 512 rows, all of which mask_fraction evaluates).
  double kept = 0;
  for (int64_t m = 0; m < c.m; ++m)
    for (int64_t n = 0; n < c.n; ++n) kept += c.mask.kept(m, n, doc);
  EXPECT_NEAR(k.kept_fraction, kept / (c.m * c.n), 1e-12);
  EXPECT_LT(k.flops, k.dense_flops);
}

// Sizes with empty, full and partial tiles for each mask, at most 512 rows.
std::vector<MaskCase> mask_cases() {
  std::vector<MaskCase> out;
  for (const testing::ExampleMask& m : testing::example_masks()) {
    const int64_t rows = m.example == "causal" ? 300 : 500, keys = rows - 20;
    out.push_back({m, rows, keys});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Masks, ProfileTiles, ::testing::ValuesIn(mask_cases()),
                         [](const auto& info) { return info.param.mask.example; });

// A mask over per-batch data (valid lengths len[b]): len[b] is one value over a tile, so the
// classifier bounds it exactly and skips the dead tiles; the counts equal the host's, batch by
// batch (a batch with no valid row, one ragged, one full), and the answers the reference's.
TEST(ProfileTiles, PerBatchLengthsSkipTheDeadTiles) {
  Program p = parse_source(R"(
program lens(q: f32[b, m, d], k: f32[b, n, d], v: f32[b, n, e], len: i32[b]) {
  s = where(n < len[b] and m < len[b], sum(q * k, d), -inf)
  out o: f32[b, m, e] = sum(softmax(s, n) * v, n)
}
)", "lens.attn").at(0);
  const int64_t M = 100, N = 150;
  Extents sizes = {{"b", 3}, {"m", M}, {"n", N}, {"d", 4}, {"e", 4}};
  const std::vector<int64_t> lens = {0, 37, 150};
  Tensor len(DType::i32, {3});
  for (int i = 0; i < 3; ++i) len.set(i, static_cast<double>(lens[i]));
  ProfileOptions o = fast_cpu();
  o.given["len"] = len;
  ProfileReport r = profile(p, sizes, o);
  ASSERT_EQ(r.kernels.size(), 1u);
  const KernelProfile& k = r.kernels[0];
  const testing::HostTileCounts want = testing::length_mask_tile_counts(
      lens, 1, M, N, k.row_tile, k.key_tile, /*full_needs_whole_tile=*/false);
  EXPECT_EQ(k.tiles.computed, want.computed);
  EXPECT_EQ(k.tiles.skipped, want.skipped);
  EXPECT_EQ(k.tiles.full, want.full);
  EXPECT_GT(want.skipped, want.computed);  // most tiles are dead
  TensorMap in = random_inputs(p, sizes, 5);
  in["len"] = len;
  EXPECT_EQ(testing::compare_tensors(run_cpu(p, in).at("o"), evaluate_reference(p, in).at("o"),
                                     1e-5),
            "");
}

// Mask data read by name at the parameter's own dims (tests/programs/masks_and_outputs.attn): a
// window of one value per call, a key padding in runs under a causal mask, a per-row key limit
// that grows with the row. The kernel skips and unmasks exactly the tiles the host counts
// (empty, full and partial ones in each), and the answers are the reference's.
TEST(ProfileTiles, MaskDataReadByNameSkipsTheDeadTiles) {
  const int64_t M = 300, N = 280;
  auto pad_at = [](int64_t n) { return n < 90 || (n >= 200 && n < 250); };
  auto lim_at = [](int64_t m) { return m / 2 + 10; };
  struct Case {
    const char* program;
    std::function<bool(int64_t, int64_t)> kept;
  };
  const std::vector<Case> cases = {
      {"win_scalar", [](int64_t m, int64_t n) { return std::llabs(m - n) <= 40; }},
      {"pad_by_name", [&](int64_t m, int64_t n) { return pad_at(n) && n <= m; }},
      {"row_limit", [&](int64_t m, int64_t n) { return n <= lim_at(m); }}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.program);
    Program p;
    for (const Program& q :
         parse_file(testing::source_path("tests/programs/masks_and_outputs.attn")))
      if (q.name == c.program) p = q;
    ASSERT_EQ(p.name, c.program);
    const Extents sizes = {{"b", 1}, {"h", 2}, {"m", M}, {"n", N}, {"d", 8}, {"e", 8}};
    Tensor data;
    std::string name;
    if (p.find_param("win") >= 0) {
      name = "win";
      data = Tensor(DType::i32, {});
      data.set(0, 40);
    } else if (p.find_param("pad") >= 0) {
      name = "pad";
      data = Tensor(DType::boolean, {1, N});
      for (int64_t n = 0; n < N; ++n) data.set(n, pad_at(n) ? 1 : 0);
    } else {
      name = "lim";
      data = Tensor(DType::i32, {1, M});
      for (int64_t m = 0; m < M; ++m) data.set(m, static_cast<double>(lim_at(m)));
    }
    ProfileOptions o = fast_cpu(1);
    o.given[name] = data;
    ProfileReport r = profile(p, sizes, o);
    ASSERT_EQ(r.kernels.size(), 1u);
    const KernelProfile& k = r.kernels[0];
    const testing::HostTileCounts want = testing::host_tile_counts(
        c.kept, 2, M, N, k.row_tile, k.key_tile, /*full_needs_whole_tile=*/false);
    EXPECT_GT(want.skipped, 0);
    EXPECT_GT(want.full, 0);
    EXPECT_GT(want.computed, want.full);
    EXPECT_EQ(k.tiles.computed, want.computed);
    EXPECT_EQ(k.tiles.skipped, want.skipped);
    EXPECT_EQ(k.tiles.full, want.full);
    TensorMap in = random_inputs(p, sizes, 6);
    in[name] = data;
    EXPECT_EQ(testing::element_mismatch(p, run_cpu(p, in), evaluate_reference(p, in)), "");
  }
}

// Index masks through any arithmetic the interval rules know (abs, products, relu, floor of a
// quotient, floor modulo, a where between two conditions, scaled f32 differences): the kernel
// skips and unmasks exactly the tiles the host counts; a quotient by 48 (inexact in f32: its
// bounds are widened by the GPU's approximate division) skips a subset of them. Every answer is
// the reference's.
TEST(ProfileTiles, IndexMasksThroughArithmeticSkipTheDeadTiles) {
  const int64_t M = 600, N = 580;  // (past 512: the overflowing products of the 2^119 case)
  for (const testing::IndexMask& c : testing::arithmetic_index_masks()) {
    SCOPED_TRACE(c.mask);
    Program p = testing::index_mask_program(c, "f32");
    Extents sizes = {{"h", 2}, {"m", M}, {"n", N}, {"d", 4}, {"e", 4}};
    ProfileReport r = profile(p, sizes, fast_cpu(1));
    ASSERT_EQ(r.kernels.size(), 1u);
    const KernelProfile& k = r.kernels[0];
    const testing::HostTileCounts want = testing::host_tile_counts(
        c.kept, 2, M, N, k.row_tile, k.key_tile, /*full_needs_whole_tile=*/false);
    ASSERT_GT(want.skipped, 0);
    if (c.exact) {
      EXPECT_EQ(k.tiles.computed, want.computed);
      EXPECT_EQ(k.tiles.skipped, want.skipped);
      EXPECT_EQ(k.tiles.full, want.full);
    } else {  // sound: never skips a live tile nor unmasks a partial one
      EXPECT_GT(k.tiles.skipped, 0);
      EXPECT_LE(k.tiles.skipped, want.skipped);
      EXPECT_LE(k.tiles.full, want.full);
      EXPECT_EQ(k.tiles.computed + k.tiles.skipped, want.computed + want.skipped);
    }
    TensorMap in = random_inputs(p, sizes, 11);
    EXPECT_EQ(testing::element_mismatch(p, run_cpu(p, in), evaluate_reference(p, in)), "");
  }
}

TEST(Profile, WorkRatesAndRooflineAreConsistent) {
  Program p = testing::example_program("vanilla");
  Extents sizes = testing::example_extents(p, 200, 300, 32, 32, 2);
  ProfileReport r = profile(p, sizes, fast_cpu(5));
  ASSERT_EQ(r.kernels.size(), 1u);
  const KernelProfile& k = r.kernels[0];
  EXPECT_EQ(k.iters, 5);
  EXPECT_GT(k.median_ms, 0);
  ASSERT_TRUE(k.cost_known);
  // q.k and p.v: 2 FLOPs per (b, h, m, n, d) each, plus the element-wise work.
  const double pairs = 2.0 * 2 * 200 * 300;
  EXPECT_GE(k.flops, pairs * 4 * 32);
  EXPECT_EQ(k.kept_fraction, 1);
  EXPECT_EQ(k.flops, k.dense_flops);
  // q, k, v (bf16) read once, o (bf16) written once.
  EXPECT_EQ(k.bytes, 2.0 * (2 * 2 * 200 * 32 + 2 * 2 * 300 * 32 * 2 + 2 * 2 * 200 * 32));
  EXPECT_NEAR(k.tflops, k.flops / (k.median_ms * 1e-3) / 1e12, 1e-9 * k.tflops);
  EXPECT_NEAR(k.intensity, k.flops / k.bytes, 1e-9);
  ASSERT_GT(r.peaks.flops, 0) << r.peaks.flops_how;
  ASSERT_GT(r.peaks.bytes_per_s, 0) << r.peaks.bytes_how;
  const double roof = std::min(r.peaks.flops, k.intensity * r.peaks.bytes_per_s) / 1e12;
  EXPECT_NEAR(k.roofline_tflops, roof, 1e-9 * roof);
  EXPECT_NEAR(k.roofline_fraction, k.tflops / roof, 1e-9);
  EXPECT_EQ(k.tiles.skipped, 0);  // no mask: every key tile is computed, without mask code
  EXPECT_EQ(k.tiles.full, k.tiles.computed);
  EXPECT_EQ(k.tiles.computed, 4 * ((200 + k.row_tile - 1) / k.row_tile) *
                                  ((300 + k.key_tile - 1) / k.key_tile));
  EXPECT_GT(k.grid_points, 0);
  EXPECT_GT(k.threads, 0);
  const std::string text = profile_text(r);
  EXPECT_NE(text.find("roofline:"), std::string::npos) << text;
}

TEST(Profile, EveryKernelOfAPlanIsTimed) {
  Program p = parse_source(R"(
program peak(q: f32[b, m, d], k: f32[b, n, d]) {
  out top: f32[b, m] = max(softmax(sum(q * k, d), n), n)
})", "peak.attn")[0];
  ProfileReport r = profile(p, {{"b", 2}, {"m", 50}, {"n", 70}, {"d", 8}}, fast_cpu());
  ASSERT_EQ(r.kernels.size(), 2u);
  for (const KernelProfile& k : r.kernels) {
    EXPECT_GT(k.median_ms, 0) << k.name;
    EXPECT_TRUE(k.cost_known) << k.name;
    EXPECT_GT(k.bytes, 0) << k.name;
  }
  EXPECT_NE(r.kernels[0].name, r.kernels[1].name);
}

TEST(Profile, TheChromeTraceHoldsCompileTransfersAndEveryKernelRun) {
  Program p = testing::example_program("causal");
  ProfileReport r = profile(p, testing::example_extents(p, 64, 64, 16, 16, 1), fast_cpu(4));
  nlohmann::json j = nlohmann::json::parse(chrome_trace_json(r));
  ASSERT_TRUE(j.contains("traceEvents"));
  int compile = 0, transfer = 0, runs = 0;
  double last_end = -1;
  std::map<int, std::string> threads;
  for (const auto& e : j["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph"));
    if (e["ph"] == "M") {
      if (e["name"] == "thread_name") threads[e["tid"].get<int>()] = e["args"]["name"];
      continue;
    }
    ASSERT_EQ(e["ph"], "X");
    ASSERT_GE(e["ts"].get<double>(), 0);
    ASSERT_GE(e["dur"].get<double>(), 0);
    EXPECT_EQ(e["pid"], 1);
    const std::string cat = e["cat"];
    compile += cat == "compile";
    transfer += cat == "transfer";
    if (cat == "kernel") {
      ++runs;
      EXPECT_EQ(e["name"], r.kernels[0].name);
      EXPECT_EQ(e["tid"], 1);
      EXPECT_GE(e["ts"].get<double>(), last_end);  // runs in order, none overlapping
      last_end = e["ts"].get<double>() + e["dur"].get<double>();
    }
  }
  EXPECT_EQ(compile, 2);  // the timed build and the tile-counting build
  EXPECT_GE(transfer, 2);
  EXPECT_EQ(runs, 4);
  EXPECT_EQ(threads[0], "host");
  EXPECT_EQ(threads[1], "kernels");
}

TEST(Profile, BadCallsAreCallErrors) {
  Program p = testing::example_program("causal");
  Extents sizes = testing::example_extents(p, 64, 64, 16, 16, 1);
  ProfileOptions o = fast_cpu(0);
  EXPECT_THROW(profile(p, sizes, o), CallError);
  sizes.erase("d");
  EXPECT_THROW(profile(p, sizes, fast_cpu()), CallError);
  ProfileOptions ref = fast_cpu();
  ref.backend = Backend::ref;
  EXPECT_THROW(profile(p, testing::example_extents(p, 64, 64, 16, 16, 1), ref), CallError);
}

}  // namespace
}  // namespace flashgen
