// Every example on the CUDA backend (sm80 path) against the f64 reference evaluator, at odd
// sizes (1, 7, 77, 333 x 1000: m != n, ragged tiles, fully masked rows) and at a benchmark-like
// size (512 x 512, d = 128), on fresh random inputs. Outputs are poisoned (NaN) by run_cuda
// before the launch, so an unwritten element fails. Tolerance (FlashAttention's
// rule): the RMS error against f64 is at most 2x that of a plain bf16 implementation, computed
// here as the reference evaluator on the same program with the score contractions and the
// softmax probabilities rounded to bf16 (what an eager bf16 PyTorch implementation stores),
// plus a floor of 1e-6 for outputs both get exactly. Also: changing long extents never
// recompiles (cuda_kernel_load_count), and out-of-range gathers name the parameter.
// SKIPs without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <ostream>
#include <random>
#include <tuple>

#include "compiler/cuda_call.h"
#include "compiler/pipeline.h"
#include "flashgen/compile.h"
#include "flashgen/error.h"
#include "flashgen/flashgen.h"
#include "flashgen/frontend.h"
#include "flashgen/verify.h"
#include "lower/tensor_core.h"
#include "runtime/cuda_driver.h"
#include "support/random_program.h"
#include "support/support.h"

namespace flashgen {
namespace {

Program example(const std::string& name) { return testing::example_program(name); }

// m, n, head dims as given (evoformer d = 32, diff_attn e = 2d up to 256); dims reached only
// through gathers cover m and n; others `batch`.
Extents extents_for(const Program& p, int64_t m, int64_t n, int64_t d, int64_t batch) {
  const int64_t dd = p.name.rfind("evoformer", 0) == 0 ? 32 : d;
  const int64_t e = p.name == "diff_attn" ? std::min<int64_t>(2 * d, 256) : d;
  return testing::example_extents(p, m, n, dd, e, batch);
}

// The program with every score contraction (a sum of a product) and every softmax rounded to
// bf16 (or `t`): the precision of a plain bf16 (f16) implementation.
Program plain_bf16(const Program& p, DType t = DType::bf16) {
  Program q = p;
  q.nodes.clear();
  std::vector<int> map(p.nodes.size());
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    Node n = p.nodes[i];
    for (int& a : n.args) a = map[a];
    q.nodes.push_back(n);
    int id = static_cast<int>(q.nodes.size()) - 1;
    bool contraction = n.op == Op::Sum && p.nodes[p.nodes[i].args[0]].op == Op::Mul;
    if ((contraction || n.op == Op::Softmax) && is_float(n.type)) {
      Node c;
      c.op = Op::Cast;
      c.type = t;
      c.dims = n.dims;
      c.args = {id};
      q.nodes.push_back(c);
      id = static_cast<int>(q.nodes.size()) - 1;
    }
    map[i] = id;
  }
  for (Output& o : q.outputs) o.node = map[o.node];
  return q;
}

double rms_diff(const Tensor& a, const Tensor& b, int64_t* nonfinite) {
  double s = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.get(i), y = b.get(i);
    if (!std::isfinite(x) || !std::isfinite(y)) {
      // NaN where the reference has NaN is a match (e.g. softmax over a row holding +inf)
      bool same = std::isnan(x) ? std::isnan(y) : x == y;
      if (!same) ++*nonfinite;
      continue;
    }
    s += (x - y) * (x - y);
  }
  return a.numel() ? std::sqrt(s / static_cast<double>(a.numel())) : 0.0;
}

void check_inputs(const Program& p, const TensorMap& in, const Extents& ext,
                  DType plain_type = DType::bf16) {
  TensorMap want = evaluate_reference_f64(p, in);
  TensorMap plain = evaluate_reference(plain_bf16(p, plain_type), in);
  TensorMap got = run_cuda(p, in);
  std::string sizes;
  for (auto& [k, v] : ext) sizes += k + "=" + std::to_string(v) + " ";
  for (const Output& o : p.outputs) {
    ASSERT_TRUE(got.count(o.name)) << o.name;
    int64_t bad = 0, bad_plain = 0;
    double err = rms_diff(got.at(o.name), want.at(o.name), &bad);
    double base = rms_diff(plain.at(o.name), want.at(o.name), &bad_plain);
    EXPECT_EQ(bad, 0) << p.name << "." << o.name << ": non-finite mismatches (unwritten or NaN) at "
                      << sizes;
    EXPECT_LE(err, 2 * base + 1e-6) << p.name << "." << o.name << " rms error " << err
                                    << " vs plain bf16 " << base << " at " << sizes;
  }
}

// Heads [h0, h0 + count) of a tensor whose first dim is the heads (the rest as it is).
Tensor head_slice(const Tensor& t, int64_t h0, int64_t count) {
  std::vector<int64_t> shape = t.shape();
  const int64_t inner = t.numel() / shape[0];
  shape[0] = count;
  Tensor s(t.dtype(), shape);
  for (int64_t i = 0; i < count * inner; ++i) s.set(i, t.get(h0 * inner + i));
  return s;
}

// check_inputs for a call too large for the reference: the GPU runs every head, the references
// run heads [h0, h0 + count) of the inputs whose first dim is `h` (heads are independent), and
// the GPU's output heads there must match them as check_inputs requires.
void check_heads(const Program& p, const TensorMap& in, int64_t h0, int64_t count) {
  const TensorMap got = run_cuda(p, in);
  TensorMap part;
  for (const auto& [name, t] : in) {
    const Parameter* input = nullptr;
    for (const Parameter& i : p.params)
      if (i.name == name) input = &i;
    ASSERT_NE(input, nullptr) << name;
    const bool heads = !input->dims.empty() && p.dims[input->dims[0]] == "h";
    part[name] = heads ? head_slice(t, h0, count) : t;
  }
  const TensorMap want = evaluate_reference_f64(p, part);
  const TensorMap plain = evaluate_reference(plain_bf16(p), part);
  for (const Output& o : p.outputs) {
    ASSERT_TRUE(got.count(o.name)) << o.name;
    const Tensor mine = head_slice(got.at(o.name), h0, count);
    int64_t bad = 0, bad_plain = 0;
    const double err = rms_diff(mine, want.at(o.name), &bad);
    const double base = rms_diff(plain.at(o.name), want.at(o.name), &bad_plain);
    EXPECT_EQ(bad, 0) << p.name << "." << o.name << ": non-finite mismatches at heads " << h0;
    EXPECT_LE(err, 2 * base + 1e-6) << p.name << "." << o.name << " heads " << h0 << ": rms error "
                                    << err << " vs plain bf16 " << base;
  }
}

void check_example(const Program& p, const Extents& ext, uint64_t seed) {
  check_inputs(p, random_inputs(p, ext, seed), ext);
}

bool have_gpu() {
  std::string why;
  return cuda_available(&why);
}

class CudaExample : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaExample, MatchesReferenceAtOddSizes) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  Program p = example(GetParam());
  struct S { int64_t m, n, batch; };
  const S shapes[] = {{1, 1, 2}, {7, 77, 2}, {77, 7, 3}, {333, 1000, 2}};
  uint64_t seed = 11;
  int loads = -1;
  for (const S& s : shapes) {
    check_example(p, extents_for(p, s.m, s.n, 64, s.batch), seed++);
    // One compiled kernel serves every long extent: only the first shape may load one.
    if (loads < 0) loads = cuda_kernel_load_count();
    else EXPECT_EQ(cuda_kernel_load_count(), loads) << "recompiled for a new sequence length";
  }
}

TEST_P(CudaExample, MatchesReferenceAtBenchmarkSize) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  Program p = example(GetParam());
  check_example(p, extents_for(p, 512, 512, 128, 2), 101);
}

INSTANTIATE_TEST_SUITE_P(Examples, CudaExample, ::testing::ValuesIn(testing::example_names()),
                         [](const auto& info) { return std::string(info.param); });

TEST(CudaBackend, RunThroughTheLibraryEntryPoint) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  Program p = example("causal");
  Extents ext = extents_for(p, 19, 23, 64, 2);
  TensorMap in = random_inputs(p, ext, 3);
  RunOptions opt;
  opt.backend = Backend::cuda;
  TensorMap got = run(p, in, opt);
  TensorMap want = evaluate_reference(p, in);
  EXPECT_EQ(testing::compare_tensors(got.at("o"), want.at("o"), 0.02), "");
}

TEST(CudaBackend, OutOfRangeGatherNamesTheParameter) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  Program p = example("document");
  Extents ext = extents_for(p, 9, 9, 64, 1);
  TensorMap in = random_inputs(p, ext, 5);
  in["doc"] = Tensor(DType::i32, {4});  // t = 4 < m = 9
  try {
    run_cuda(p, in, {});
    FAIL() << "expected a CallError";
  } catch (const CallError& e) {
    EXPECT_NE(std::string(e.what()).find("'doc'"), std::string::npos) << e.what();
  }
}

// Programs not among the examples. Two softmax groups over one 256-wide value (the emitter
// splits the value columns across blocks) plus a per-row logsumexp that only the first column
// chunk writes; and index arithmetic with a data-dependent floor modulo (32-bit index code).
const char* kUnseen =
    "program two_groups(q1: bf16[h, m, d], k1: bf16[h, n, d], q2: bf16[h, m, d],\n"
    "                   k2: bf16[h, n, d], v: bf16[h, n, e]) {\n"
    "  s1 = sum(q1 * k1, d) / sqrt(size(d))\n"
    "  s2 = where(n <= m, sum(q2 * k2, d) / sqrt(size(d)), -inf)\n"
    "  out o: bf16[h, m, e] = sum(softmax(s1, n) * v, n) + 0.5 * sum(softmax(s2, n) * v, n)\n"
    "  out l: f32[h, m] = logsumexp(s2, n)\n"
    "}\n"
    "program permuted(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {\n"
    "  out o: bf16[h, m, b, e] = sum(softmax(where(n <= m, sum(q * k, d), -inf), n) * v, n)\n"
    "}\n"
    "program strided(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e], p: i32[h]) {\n"
    "  s = sum(q * k, d) / sqrt(size(d)) + 0.25 * f32((n - m) % p[h])\n"
    "  out o: bf16[h, m, e] = sum(softmax(where(n - m <= 3, s, -inf), n) * v, n)\n"
    "}\n";

TEST(CudaBackend, UnseenProgramsMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  std::vector<Program> ps = parse_source(kUnseen, "unseen.attn");
  for (auto [m, n] : {std::pair<int64_t, int64_t>{7, 77}, {333, 200}}) {
    check_example(ps[0], {{"h", 3}, {"m", m}, {"n", n}, {"d", 64}, {"e", 256}}, 5);
    check_example(ps[1], {{"b", 2}, {"h", 3}, {"m", m}, {"n", n}, {"d", 64}, {"e", 64}}, 6);
    Extents ext = {{"h", 3}, {"m", m}, {"n", n}, {"d", 64}, {"e", 64}};
    TensorMap in = random_inputs(ps[2], ext, 9);
    Tensor per(DType::i32, {3});
    for (int64_t i = 0; i < 3; ++i) per.set(i, double(i == 1 ? -5 : 3 + 4 * i));
    in["p"] = per;
    TensorMap want = evaluate_reference_f64(ps[2], in);
    TensorMap got = run_cuda(ps[2], in);
    int64_t bad = 0;
    EXPECT_LE(rms_diff(got.at("o"), want.at("o"), &bad), 0.01) << ps[2].name;
    EXPECT_EQ(bad, 0);
  }
}

// Masks over data: the classifier bounds doc[m], doc[n] and w[n] by the values each tile reads
// (fg::warp_range), so with sorted document ids whole tiles are skipped or run unmasked. The
// results must be those of the reference (fixtures in tests/support: ragged documents around
// the 64-key tile and the 128-row block, NaN and negative weights, unsorted ids), and no mask
// over data at the edges of exactness (testing::hard_masks) may decide a tile wrongly.
TEST(CudaBackend, DataMasksMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  Program p = testing::data_mask_program(DType::bf16);
  for (int64_t len : {333, 1000}) {
    Extents ext = {{"h", 2}, {"m", len}, {"n", len}, {"t", len}, {"d", 64}, {"e", 64}};
    for (int which = 0; which < 3; ++which) {
      TensorMap in = random_inputs(p, ext, 11 + which);
      testing::set_data_mask_inputs(in, len, which);
      SCOPED_TRACE("ids and weights, case " + std::to_string(which));
      check_inputs(p, in, ext);
    }
  }
}

// Masks over data walk (a persistent grid at every length on Hopper): with many more items
// than resident blocks each block runs several, so the producer's tile scan, the row data's
// ranges, the staged tiles and the next item's Q (the producer's, once the last scores of the
// item before have landed) carry from item to item. At d = 64 (pipelined, 4 stages) and 128
// (3 stages), sorted and unsorted
// ids; each role of the block finds its items itself (fg_attn_sm80.cuh's first_item). (The
// references run on five of the heads: all of them took minutes.)
TEST(CudaBackend, DataMaskedBlocksWalkSeveralItems) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  Program p = testing::data_mask_program(DType::bf16);
  const int sms = cuda_device_info().sm_count;
  const int64_t len = 600;
  for (int64_t d : {64, 128})
    for (int which : {0, 1}) {
      Extents ext = {{"h", 2 * int64_t(sms) / 5 + 1}, {"m", len}, {"n", len}, {"t", len},
                     {"d", d}, {"e", d}};
      TensorMap in = random_inputs(p, ext, 31 + which);
      testing::set_data_mask_inputs(in, len, which);
      SCOPED_TRACE("d " + std::to_string(d) + ", ids and weights, case " + std::to_string(which));
      std::shared_ptr<const CudaLoaded> L = cuda_load(p, ext);
      const Sm80Launch& la = L->kernels.at(0).low.tensor_core.launch;
      const CudaBound b = cuda_bind(*L, p, in, ext);
      const CudaBoundKernel& bk = b.kernels.at(0);
      const bool hopper = L->kernels.at(0).low.tensor_core.target == Target::cuda_sm90;
      EXPECT_EQ(bk.walk, hopper);
      if (bk.walk) {
        const int64_t items =
            (len + la.block_m - 1) / la.block_m * ext.at("h") * bk.key_split * la.value_split;
        EXPECT_GT(items, 2 * int64_t(bk.grid.x));  // (every block walks at least two items)
      }
      // the first heads (blocks' first items) and the last (their second and third)
      const int64_t h = ext.at("h");
      check_heads(p, in, 0, 2);
      check_heads(p, in, h - 3, 3);
    }
}

TEST(CudaBackend, TileClassesHoldOnHardData) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const int64_t len = 333;
  for (const testing::HardMask& h : testing::hard_masks()) {
    Program p = testing::hard_mask_program(h, DType::bf16);
    Extents ext = {{"m", len}, {"n", len}, {"t", len}, {"d", 64}, {"e", 64}};
    TensorMap in = random_inputs(p, ext, 5);
    in["doc"] = testing::hard_mask_data(h, len);
    SCOPED_TRACE(h.mask);
    check_inputs(p, in, ext);
  }
}

// Staged tiles (fg::load_staged): gathers and plain reads over (row, key) or (key) travel to
// shared memory with K/V. Rows that are contiguous and 16-byte aligned go by cp.async (with a
// partial chunk at N when the gathered tensor is wider than n), anything else element by
// element (an odd row stride, a transposed w[h, n, m]); both must give the reference's results.
const char* kStaged =
    "program rows_and_keys(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e],\n"
    "                      bias: bf16[h, i, j], keep: bool[j], kb: f32[h, n]) {\n"
    "  s = sum(q * k, d) / sqrt(size(d)) + bias[h, m, n] + kb\n"
    "  out o: bf16[h, m, e] = sum(softmax(where(keep[n] and n <= m + 40, s, -inf), n) * v, n)\n"
    "}\n"
    "program transposed(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e], w: bf16[h, j, i]) {\n"
    "  out o: bf16[h, m, e] = sum(softmax(sum(q * k, d) / sqrt(size(d)) + w[h, n, m], n) * v, n)\n"
    "}\n"
    "program plain(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e], rel: bf16[h, m, n]) {\n"
    "  out o: bf16[h, m, e] = sum(softmax(sum(q * k, d) - 0.5 * rel, n) * v, n)\n"
    "}\n";

TEST(CudaBackend, StagedTilesMatchTheReference) {
  std::vector<Program> ps = parse_source(kStaged, "staged.attn");
  const Extents heads[3] = {{{"d", 64}, {"e", 64}}, {{"d", 32}, {"e", 32}}, {{"d", 32}, {"e", 32}}};
  const char* count[3] = {"kNumStaged = 3", "kNumStaged = 1", "kNumStaged = 1"};
  // (emission only, checked without a GPU too; at an H100/H200's shared memory, which the
  // GPU machine has: run_cuda sizes the tiles by the running device's)
  for (int i = 0; i < 3; ++i)
    ASSERT_NE(emit_cuda(ps[i], Target::cuda_sm90, heads[i]).find(count[i]), std::string::npos)
        << ps[i].name;
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  // {m, n, i, j}: j = 104 (208-byte rows: cp.async, partial chunk at n = 100), j = 101
  // (202-byte rows: element by element), several row blocks and ragged key tiles; the
  // transposed w[h, n, m] always goes element by element. m = 3 runs the few-rows kernel, whose
  // 64-key tiles stage at their own pitch beside the full kernel's 128 (sm90).
  const int64_t sizes[][4] = {{77, 100, 80, 104}, {77, 100, 77, 101}, {333, 1000, 333, 1000},
                              {130, 64, 131, 72}, {3, 1000, 3, 1000}};
  for (int i = 0; i < 3; ++i)
    for (const auto& z : sizes) {
      Extents ext = heads[i];
      ext["h"] = 3;
      ext["m"] = z[0];
      ext["n"] = z[1];
      if (i == 0) ext["i"] = z[2], ext["j"] = z[3];
      if (i == 1) ext["i"] = z[0] + 1, ext["j"] = z[1] + 3;  // w[h, n, m]: j >= n, i >= m
      TensorMap in = random_inputs(ps[i], ext, 21 + i);
      SCOPED_TRACE(ps[i].name + " m=" + std::to_string(z[0]) + " n=" + std::to_string(z[1]));
      check_inputs(ps[i], in, ext);
    }
}

// A gather of a staged tile's parameter by an index that is not a plain dim index (here
// size(n), out of range) stays a checked gather: a CallError naming the parameter, as the
// reference raises (the staged read would have returned bias[h, m, n] silently).
TEST(CudaBackend, CheckedGathersOfAStagedParameterStayChecked) {
  Program p = parse_source(
      "program oob(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e], bias: bf16[h, m, n]) {\n"
      "  s = sum(q * k, d) + bias + bias[h, m, size(n)]\n"
      "  out o: f32[h, m, e] = sum(softmax(s, n) * v, n)\n}\n", "oob.attn").at(0);
  const Extents ext = {{"h", 2}, {"m", 9}, {"n", 30}, {"d", 64}, {"e", 64}};
  ASSERT_NE(emit_cuda(p, Target::cuda_sm90, ext).find("kNumStaged = 1"), std::string::npos);
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  try {
    run_cuda(p, random_inputs(p, ext, 3), {});
    FAIL() << "expected a CallError";
  } catch (const CallError& e) {
    EXPECT_NE(std::string(e.what()).find("'bias'"), std::string::npos) << e.what();
  }
}

// A check that reads the scores (kChecksReadScores: a log-bucketed bias, table[i32(log2(|s|))
// + 40]) fails only where a real element's does: padded keys (n not a multiple of the key
// tile) and padded rows (m not a multiple of the row tile, and the few-rows kernel's 16 rows
// at m = 1), whose products would be 0 (log2(0) = -inf: out of range), run no check of their
// own. A table too short for the real elements is a CallError naming it, as on the reference.
TEST(CudaBackend, ChecksThatReadScoresFailOnlyWhereARealElementDoes) {
  Program p = parse_source(R"(
program bucket(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], table: f32[u]) {
  s = sum(q * k, d) / sqrt(size(d))
  out o: f32[b, h, m, e] = sum(softmax(where(n <= m + size(n) - size(m), s + table[i32(log2(abs(s))) + 40], -inf), n) * v, n)
}
)", "bucket.attn").at(0);
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  for (auto [m, n] : {std::pair<int64_t, int64_t>{37, 130}, {300, 300}, {1, 3001}, {150, 700}}) {
    for (int64_t d : {64, 128}) {
      Extents ext = {{"b", 2}, {"h", 3}, {"m", m}, {"n", n}, {"d", d}, {"e", d}, {"u", 64}};
      SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " d=" + std::to_string(d));
      check_inputs(p, random_inputs(p, ext, 11 + m), ext);
    }
  }
  Extents small = {{"b", 1}, {"h", 2}, {"m", 37}, {"n", 130}, {"d", 64}, {"e", 64}, {"u", 20}};
  const TensorMap in = random_inputs(p, small, 3);
  EXPECT_THROW(evaluate_reference(p, in, small), CallError);
  try {
    run_cuda(p, in, {});
    FAIL() << "expected a CallError";
  } catch (const CallError& e) {
    EXPECT_NE(std::string(e.what()).find("'table'"), std::string::npos) << e.what();
  }
}

// Gathers by computed indices proved in range run unchecked where the call meets the proof's
// extent conditions, and through the build that checks every gather where it does not: an
// empty table is the reference's CallError, and clamp(x, 2, size(r) - 1) at r = 2 (lo > hi:
// the clamp gives hi = 1, in range) gives the reference's answers without an error.
TEST(CudaBackend, ProvedGathersRunUncheckedAndOtherCallsAreChecked) {
  std::vector<Program> ps = parse_source(R"(
program rel(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], table: f32[h, r]) {
  s = sum(q * k, d) / sqrt(size(d)) + table[h, clamp(n - m + 3, 0, size(r) - 1)]
  out o: bf16[b, h, m, e] = sum(softmax(where(n <= m, s, -inf), n) * v, n)
}
program rel2(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], table: f32[h, r]) {
  s = sum(q * k, d) / sqrt(size(d)) + table[h, clamp(n - m + 100, 2, size(r) - 1)]
  out o: f32[b, h, m, e] = sum(softmax(s, n) * v, n)
}
)", "rel.attn");
  for (const Program& p : ps) {
    CompileOptions o;
    o.target = Target::cuda_sm90;
    o.sizes = {{"d", 64}, {"e", 64}};
    ASSERT_FALSE(compile_program(p, o, "lower")
                     .lowered.kernels.at(0).tensor_core.launch.range_conditions.empty());
  }
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  Extents ext = {{"b", 2}, {"h", 3}, {"m", 37}, {"n", 130}, {"d", 64}, {"e", 64}};
  for (int64_t r : {1, 5, 129}) {  // rel: conditions hold, unchecked
    ext["r"] = r;
    SCOPED_TRACE("rel r=" + std::to_string(r));
    EXPECT_FALSE(cuda_load(ps[0], ext)->checks_gathers);
    check_inputs(ps[0], random_inputs(ps[0], ext, 5 + r), ext);
  }
  ext["r"] = 0;  // the empty table: every read is out of range, on every backend
  EXPECT_TRUE(cuda_load(ps[0], ext)->checks_gathers);
  const TensorMap in0 = random_inputs(ps[0], ext, 4);
  EXPECT_THROW(evaluate_reference(ps[0], in0, ext), CallError);
  try {
    run_cuda(ps[0], in0, {});
    FAIL() << "expected a CallError";
  } catch (const CallError& e) {
    EXPECT_NE(std::string(e.what()).find("'table'"), std::string::npos) << e.what();
  }
  for (int64_t r : {2, 3, 4}) {  // rel2: 3 <= extent(r) fails at r = 2 only
    ext["r"] = r;
    SCOPED_TRACE("rel2 r=" + std::to_string(r));
    EXPECT_EQ(cuda_load(ps[1], ext)->checks_gathers, r < 3);
    check_inputs(ps[1], random_inputs(ps[1], ext, 9 + r), ext);
  }
}

// Values computed once per tile diagonal (functions of n - m: lower_tensor_core's diagonal)
// give the reference's answers: a clamped relative-position gather by m - n, a decay
// exp(-|n - m| / 8) under a banded mask, and a table read by (n - m) modulo its extent, at odd
// sizes (partial tiles, rows and keys past the ends), one row (the few-rows kernel, split key
// loops), at head dims on either product path.
TEST(CudaBackend, ValuesPerDiagonalMatchTheReference) {
  std::vector<Program> ps = parse_source(R"(
program rel_t(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], table: bf16[h, r]) {
  s = sum(q * k, d) / sqrt(size(d)) + table[h, clamp(m - n + 5, 0, size(r) - 1)]
  out o: f32[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program decay(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], w: f32[h]) {
  s = sum(q * k, d) / sqrt(size(d)) + w * exp(abs(n - m) * -0.125)
  out o: bf16[b, h, m, e] = sum(softmax(where(n <= m + 7, s, -inf), n) * v, n)
}
program wrap(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], table: f32[r]) {
  s = sum(q * k, d) / sqrt(size(d)) + table[(n - m) % size(r)] * 2.0
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
)", "diag.attn");
  for (const Program& p : ps)
    for (int64_t d : {64, 96, 128}) {
      CompileOptions o;
      o.target = Target::cuda_sm90;
      o.sizes = {{"d", d}, {"e", d}};
      ASSERT_FALSE(
          compile_program(p, o, "lower").lowered.kernels.at(0).tensor_core.diagonal.empty())
          << p.name << " d=" << d;
    }
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  struct Z { int64_t m, n, d; };
  for (const Program& p : ps)
    for (const Z& z : {Z{37, 130, 64}, Z{1, 3000, 64}, Z{200, 77, 128}, Z{129, 129, 96}}) {
      Extents ext = {{"b", 2}, {"h", 3}, {"m", z.m}, {"n", z.n}, {"d", z.d}, {"e", z.d}, {"r", 40}};
      SCOPED_TRACE(p.name + " m=" + std::to_string(z.m) + " n=" + std::to_string(z.n) +
                   " d=" + std::to_string(z.d));
      check_inputs(p, random_inputs(p, ext, 3 + z.m), ext);
    }
}

// The warp-specialized Hopper kernel's ring: a producer warpgroup publishes each stage (its
// tile index and class, K/V, a staged key tile, the values per diagonal) and a sentinel after
// the last tile. Fewer tiles than stages, no tile at all in a block (rows past every live key),
// a ring that wraps many times, and tiles skipped by the scan, each with a staged tile and
// diagonal values in every stage: the reference's answers. The lowering's choice is asserted
// without a GPU.
TEST(CudaBackend, WarpSpecializedRingMatchesTheReference) {
  Program p = parse_source(R"(
program ring(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], keep: bf16[b, n],
             table: f32[h, r]) {
  s = sum(q * k, d) / sqrt(size(d)) + table[h, clamp(m - n + 3, 0, size(r) - 1)]
  out o: bf16[b, h, m, e] = sum(softmax(where(keep > 0.0 and n <= m + 40, s, -inf), n) * v, n)
}
)", "ring.attn").at(0);
  CompileOptions o;
  o.target = Target::cuda_sm90;
  o.sizes = {{"d", 64}, {"e", 64}};
  const Compiled c = compile_program(p, o, "lower");
  const TensorCoreKernel& tc = c.lowered.kernels.at(0).tensor_core;
  EXPECT_TRUE(tc.launch.warp_specialized);
  EXPECT_GE(tc.launch.stages, 2);
  EXPECT_FALSE(tc.staged.empty());
  EXPECT_FALSE(tc.diagonal.empty());
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  {  // the loaded kernel is warp-specialized where it is Hopper's (not under FLASHGEN_CUDA_PATH=sm80)
    std::shared_ptr<const CudaLoaded> L =
        cuda_load(p, {{"b", 1}, {"h", 1}, {"m", 9}, {"n", 9}, {"d", 64}, {"e", 64}, {"r", 9}},
                  CudaBuild::plain);
    const TensorCoreKernel& lt = L->kernels.at(0).low.tensor_core;
    EXPECT_EQ(lt.launch.warp_specialized, lt.target == Target::cuda_sm90);
  }
  struct Z { int64_t m, n; };
  // (1 and 60 keys: one tile; 200 rows x 70 keys: the second row block's window starts past
  // the keys of its first tiles; 150 x 2000: the live band wraps the ring and the scan skips
  // the tiles past it; 40 x 900: rows fewer than a block, most tiles empty)
  for (const Z& z : {Z{33, 1}, Z{130, 60}, Z{200, 70}, Z{150, 2000}, Z{40, 900}}) {
    Extents ext = {{"b", 2}, {"h", 3}, {"m", z.m}, {"n", z.n}, {"d", 64}, {"e", 64}, {"r", 50}};
    SCOPED_TRACE("m=" + std::to_string(z.m) + " n=" + std::to_string(z.n));
    check_inputs(p, random_inputs(p, ext, 5 + z.n), ext);
  }
}

// Hopper's producer copies K and V by TMA (Sm80Launch::tma) when the call's tensors allow it:
// keys laid out [b, n, h, d] (map strides out of order), GQA's shared K/V, a value split (V's
// column coordinate at the block's chunk), ragged key tiles (the map zero-fills past n) and a
// head dim of 40 (past d); a head dim of 100 (200-byte rows) copies by cp.async, in the build
// of the kernel compiled for such calls at the first one. All match the reference; the bound
// call says which copy it took.
TEST(CudaBackend, TmaCopiesMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  std::vector<Program> ps = parse_source(R"(
program tma_bnhd(q: bf16[b, h, m, d], k: bf16[b, n, h, d], v: bf16[b, n, h, e]) {
  out o: f32[b, h, m, e] = sum(softmax(sum(q * k, d) / sqrt(size(d)), n) * v, n)
}
program tma_three(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], w: bf16[b, h, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  out o1: f32[b, h, m, e] = sum(softmax(s, n) * v, n)
  out o2: f32[b, h, m, e] = sum(softmax(s * 0.5, n) * v, n)
  out o3: f32[b, h, m, e] = sum(softmax(s, n) * w, n)
}
)", "tma.attn");
  struct Case { Program p; int64_t d, e, m, n; bool tma; };
  const Program gqa = example("gqa"), causal = example("causal");
  for (const Case& t : {Case{ps[0], 128, 128, 200, 300, true}, Case{ps[0], 64, 64, 130, 1000, true},
                        Case{ps[1], 64, 128, 150, 333, true}, Case{gqa, 128, 128, 70, 257, true},
                        Case{causal, 40, 64, 140, 140, true}, Case{causal, 100, 128, 140, 140, false}}) {
    const Extents ext = testing::example_extents(t.p, t.m, t.n, t.d, t.e, 2);
    SCOPED_TRACE(t.p.name + " d=" + std::to_string(t.d) + " e=" + std::to_string(t.e) +
                 " m=" + std::to_string(t.m) + " n=" + std::to_string(t.n));
    const TensorMap in = random_inputs(t.p, ext, 7 + t.n);
    std::shared_ptr<const CudaLoaded> L = cuda_load(t.p, ext);
    const TensorCoreKernel& lt = L->kernels.at(0).low.tensor_core;
    ASSERT_EQ(L->kernels.at(0).low.path, LoweredKernel::Path::tensor_core);
    const bool hopper = lt.target == Target::cuda_sm90;
    EXPECT_EQ(!lt.launch.tma.empty(), hopper && lt.launch.warp_specialized);
    const CudaBound b = cuda_bind(*L, t.p, in, ext);
    EXPECT_EQ(b.kernels.at(0).tma, hopper && t.tma);
    check_inputs(t.p, in, ext);
    // the kernel that copies by cp.async compiles only for a call that needs it
    if (L->kernels.at(0).cp_async) EXPECT_EQ(L->kernels.at(0).cp_async->compiled(), !t.tma);
  }
}

// A persistent grid (Hopper) of kernels without a tile mask: blocks walk several work items, the
// last row tile ragged, with [b, n, h, d] keys, three accumulators (value chunks), a per-row
// output, GQA, the cp.async build (d = 100) and a split key loop; every call matches the
// reference.
TEST(CudaBackend, PersistentBlocksWalkSeveralWorkItems) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  std::vector<Program> ps = parse_source(R"(
program walk_bnhd(q: bf16[b, h, m, d], k: bf16[b, n, h, d], v: bf16[b, n, h, e]) {
  out o: f32[b, h, m, e] = sum(softmax(sum(q * k, d) / sqrt(size(d)), n) * v, n)
}
program walk_three(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], w: bf16[b, h, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  out o1: f32[b, h, m, e] = sum(softmax(s, n) * v, n)
  out o2: bf16[b, h, m, e] = sum(softmax(s * 0.5, n) * v, n)
  out o3: f32[b, h, m, e] = sum(softmax(s, n) * w, n)
}
program walk_lse(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
  out lse: f32[b, h, m] = logsumexp(s, n)
}
program walk_gqa(q: bf16[b, g, r, m, d], k: bf16[b, g, n, d], v: bf16[b, g, n, e]) {
  out o: bf16[b, g, r, m, e] = sum(softmax(sum(q * k, d) / sqrt(size(d)), n) * v, n)
}
)", "walk.attn");
  // own_walk: the walking calls run a build of their own (pipelined, where the main loop is
  // not: the head dims padded to 128); tma: the call's K/V by TMA (d = 100: rows of 200 bytes,
  // which no tensor map describes, so the cp.async form)
  struct Case { Program p; int64_t d, e, m, n, batch; bool own_walk, tma; };
  const int sms = cuda_device_info().sm_count;
  for (const Case& t : {Case{ps[0], 64, 64, 600, 200, 8, false, true},
                        Case{ps[1], 64, 128, 300, 150, 6, false, true},
                        Case{ps[2], 128, 128, 520, 130, 6, true, true},
                        Case{ps[3], 64, 64, 390, 100, 4, false, true},
                        Case{example("vanilla"), 100, 100, 700, 90, 6, true, false},
                        Case{example("vanilla"), 128, 128, 200, 3000, 1, true, true}}) {
    const Extents ext = testing::example_extents(t.p, t.m, t.n, t.d, t.e, t.batch);
    SCOPED_TRACE(t.p.name + " d=" + std::to_string(t.d) + " e=" + std::to_string(t.e) +
                 " m=" + std::to_string(t.m) + " n=" + std::to_string(t.n));
    const TensorMap in = random_inputs(t.p, ext, 11 + t.m);
    std::shared_ptr<const CudaLoaded> L = cuda_load(t.p, ext);
    ASSERT_EQ(L->kernels.at(0).low.path, LoweredKernel::Path::tensor_core);
    const Sm80Launch& la = L->kernels.at(0).low.tensor_core.launch;
    const CudaBound b = cuda_bind(*L, t.p, in, ext);
    const CudaBoundKernel& bk = b.kernels.at(0);
    const bool hopper = L->kernels.at(0).low.tensor_core.target == Target::cuda_sm90;
    EXPECT_EQ(la.persistent, hopper);
    EXPECT_EQ(bk.walk, hopper);  // (at most 4 key tiles a block)
    // the walking calls run the walking build: its own entry (compiled at the first of them)
    // where its loop differs from the main build's, else the main entry
    EXPECT_EQ(!la.walk_entry.empty(), hopper && t.own_walk) << la.walk_entry;
    if (hopper) EXPECT_EQ(bk.tma, t.tma);
    if (bk.walk) {
      const int64_t m_tiles = (t.m + la.block_m - 1) / la.block_m;
      int64_t items = m_tiles * bk.key_split * la.value_split;
      for (int d : la.par_dims) items *= ext.at(t.p.dims[d]);
      EXPECT_EQ(bk.grid.x, std::min<int64_t>(items, sms * la.min_blocks));
      EXPECT_EQ(bk.grid.y * bk.grid.z, 1u);
      if (t.n < 1000) EXPECT_GT(items, bk.grid.x);  // blocks walk several items
    }
    check_inputs(t.p, in, ext);
    const CudaLoadedKernel& K = L->kernels.at(0);
    EXPECT_EQ(K.walking != nullptr, !la.walk_entry.empty());
    if (bk.walk && K.walking)
      EXPECT_TRUE((K.walking_cp_async && !bk.tma ? K.walking_cp_async : K.walking)->compiled());
  }
}

// Walking items of rows but no key tiles (the sliding window's rows past n + 256 see no key)
// still pass Q on: the compute warps free it at the item's stage of no tile, and the producer
// loads the next item's Q after that (fg_attn_sm80.cuh: q_full, q_empty; an item's last tile
// frees it otherwise). Three of the eight row tiles have no tiles; many more items than blocks;
// d = 64 (the pipelined loop) and 128; against the reference.
TEST(CudaBackend, WalkingItemsOfNoKeyTilesPassQOn) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const Program p = example("sliding_window");
  const int sms = cuda_device_info().sm_count;
  for (int64_t d : {64, 128}) {
    SCOPED_TRACE("d " + std::to_string(d));
    Extents ext = {{"b", 1}, {"h", int64_t(sms) / 4 + 1}, {"m", 1000}, {"n", 300},
                   {"d", d}, {"e", d}};
    const TensorMap in = random_inputs(p, ext, 41 + d);
    std::shared_ptr<const CudaLoaded> L = cuda_load(p, ext);
    if (L->kernels.at(0).low.tensor_core.target != Target::cuda_sm90)
      GTEST_SKIP() << "blocks walk on Hopper GPUs only";
    const Sm80Launch& la = L->kernels.at(0).low.tensor_core.launch;
    const CudaBound b = cuda_bind(*L, p, in, ext);
    const CudaBoundKernel& bk = b.kernels.at(0);
    ASSERT_TRUE(bk.walk);
    const int64_t items = (1000 + la.block_m - 1) / la.block_m * ext.at("h") * la.value_split;
    EXPECT_GT(items, 2 * int64_t(bk.grid.x));
    EXPECT_GT(1000 - (300 + 256), 2 * la.block_m);  // (items of no tiles)
    check_inputs(p, in, ext);
  }
}

// The few-rows kernel compiles at the first call that runs it: a call of many rows loads the
// program without it, a call of one row then compiles it, and both match the reference.
TEST(CudaBackend, TheFewRowsKernelCompilesAtItsFirstCall) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  // (a program of its own: no earlier test has loaded it in this process)
  Program p = parse_source(R"(
program lazy_few(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  out o: f32[b, h, m, e] = sum(softmax(sum(q * k, d) * 0.125 + 0.25, n) * v, n)
}
)", "lazy.attn").at(0);
  Extents ext = {{"b", 2}, {"h", 2}, {"m", 100}, {"n", 300}, {"d", 64}, {"e", 64}};
  std::shared_ptr<const CudaLoaded> L = cuda_load(p, ext);
  ASSERT_TRUE(L->kernels.at(0).few_rows);
  check_inputs(p, random_inputs(p, ext, 1), ext);
  EXPECT_FALSE(L->kernels.at(0).few_rows->compiled());
  ext["m"] = 1;
  check_inputs(p, random_inputs(p, ext, 2), ext);
  EXPECT_TRUE(L->kernels.at(0).few_rows->compiled());
}

// f16 operands and head dims of any extent on the tensor cores (the tiles padded to 32 columns,
// rows of odd widths gathered element by element, odd value dims stored one column at a time):
// the path is asserted, and the error is held to twice a plain implementation's in the
// operands' type.
TEST(CudaBackend, F16AndOddHeadDimsOnTheTensorCores) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  std::vector<Program> ps = parse_source(R"(
program causal_f16(q: f16[b, h, m, d], k: f16[b, h, n, d], v: f16[b, h, n, e]) {
  s = where(n <= m, sum(q * k, d) / sqrt(size(d)), -inf)
  out o: f16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program odd_bf16(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  p = softmax(sum(q * k, d) / sqrt(size(d)), n)
  out o: bf16[b, h, m, e] = sum(p * v, n)
  out lse: f32[b, h, m] = logsumexp(sum(q * k, d) / sqrt(size(d)), n)
}
program f16_to_f32(q: f16[b, m, h, d], k: f16[b, n, h, d], v: f16[b, n, h, e]) {
  out o: f32[b, h, m, e] = sum(softmax(sum(q * k, d) * 0.3, n) * v, n)
}
)", "tc.attn");
  for (const Program& p : ps)
    for (auto [d, e] : {std::pair<int64_t, int64_t>{1, 1}, {5, 7}, {33, 64}, {64, 64},
                        {100, 40}, {8, 200}}) {
      Extents ext = {{"b", 2}, {"h", 3}, {"m", 77}, {"n", 130}, {"d", d}, {"e", e}};
      SCOPED_TRACE(p.name + " d=" + std::to_string(d) + " e=" + std::to_string(e));
      for (const CudaKernelPath& k : cuda_paths(p, Target::cuda_sm90, ext))
        EXPECT_EQ(k.path, "tensor_core") << k.why;
      const bool f16 = p.params[0].type == DType::f16;
      check_inputs(p, random_inputs(p, ext, 29 + d), ext, f16 ? DType::f16 : DType::bf16);
    }
}

// Operands that are not of one 16-bit type reach the tensor cores as bf16 pieces
// (Sm80Launch::pieces): f32 anywhere, 3 pieces and f32 accuracy (the largest error against the
// f64 reference at most 2^-16 of the output's scale, where bf16 products would miss by 2^-9);
// bf16 beside f16, 2 pieces, and f8, converted to bf16, the plain 16-bit bound. Programs of other layouts (keys
// [b, n, h, d]), GQA, a logsumexp output, large logits, odd and wide head dims, a decode call
// (few rows, split key loop) and inf / NaN values at masked keys.
TEST(CudaBackend, F32AndMixedOperandsAsBf16PiecesOnTheTensorCores) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  std::vector<Program> ps = parse_source(R"(
program causal32(q: f32[b, h, m, d], k: f32[b, h, n, d], v: f32[b, h, n, e]) {
  s = where(n <= m, sum(q * k, d) / sqrt(size(d)), -inf)
  out o: f32[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program gqa32(q: f32[b, g, r, m, d], k: f32[b, n, g, d], v: f32[b, n, g, e]) {
  s = sum(q * k, d) * 0.125
  out o: f32[b, g, r, m, e] = sum(softmax(s, n) * v, n)
  out lse: f32[b, g, r, m] = logsumexp(s, n)
}
program hot32(q: f32[b, m, d], k: f32[b, n, d], v: f32[b, n, e]) {
  out o: f32[b, m, e] = sum(softmax(sum(q * k, d) * 2.0, n) * v, n)
}
program mixed32(q: bf16[b, h, m, d], k: f16[b, h, n, d], v: f32[b, h, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program mixed16(q: bf16[b, h, m, d], k: f16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = where(n <= m + 5, sum(q * k, d) / sqrt(size(d)), -inf)
  out o: f32[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program f8s(q: f8e4m3[b, h, m, d], k: f8e5m2[b, n, h, d], v: f8e4m3[b, h, n, e]) {
  out o: f32[b, h, m, e] = sum(softmax(sum(q * k, d) * 0.25, n) * v, n)
}
)", "pieces.attn");
  struct Shape { int64_t m, n, d, e; };
  int ran = 0;
  double worst = 0;
  for (const Program& p : ps) {
    const bool f32 = p.name != "mixed16" && p.name != "f8s";
    for (const Shape& sh : {Shape{77, 130, 64, 64}, Shape{333, 700, 128, 128},
                            Shape{50, 90, 40, 72}, Shape{1, 3001, 64, 64}, Shape{20, 200, 8, 256}}) {
      Extents ext = {{"b", 2}, {"h", 3}, {"g", 2}, {"r", 2}, {"m", sh.m}, {"n", sh.n},
                     {"d", sh.d}, {"e", sh.e}};
      SCOPED_TRACE(p.name + " m=" + std::to_string(sh.m) + " n=" + std::to_string(sh.n) +
                   " d=" + std::to_string(sh.d) + " e=" + std::to_string(sh.e));
      CompileOptions o;
      o.target = Target::cuda_sm90;
      o.sizes = ext;
      Compiled c = compile_program(p, o, "lower");
      ASSERT_EQ(c.lowered.kernels.size(), 1u);
      ASSERT_EQ(c.lowered.kernels[0].path, LoweredKernel::Path::tensor_core)
          << c.lowered.kernels[0].why;
      EXPECT_EQ(c.lowered.kernels[0].tensor_core.launch.pieces,
                f32 ? 3 : (p.name == "f8s" ? 1 : 2));
      TensorMap in = random_inputs(p, ext, 53 + sh.d);
      if (p.name == "hot32")  // logits up to ~100: their errors reach the weights
        for (const char* t : {"q", "k"})
          for (int64_t i = 0; i < in[t].numel(); ++i) in[t].set(i, 2 * in[t].get(i));
      if (!f32) {
        check_inputs(p, in, ext);
        ++ran;
        continue;
      }
      TensorMap want = evaluate_reference_f64(p, in);
      TensorMap got = run_cuda(p, in);
      TensorMap cpu = run_cpu(p, in);  // f32 FMA: the level f32 arithmetic reaches here
      for (const Output& out : p.outputs) {
        const Tensor& w = want.at(out.name);
        // (a 16-bit output adds its own rounding, half a unit in the last place)
        const double ulp = out.type == DType::f32 ? 0.0 : std::ldexp(1.0, -8);
        double scale = 0, err = 0, err_cpu = 0;
        for (int64_t i = 0; i < w.numel(); ++i) {
          const double a = got.at(out.name).get(i), b = w.get(i), c = cpu.at(out.name).get(i);
          ASSERT_TRUE(std::isfinite(a) == std::isfinite(b)) << out.name << "[" << i << "] " << a
                                                            << " vs " << b;
          if (!std::isfinite(b)) continue;
          scale = std::max(scale, std::abs(b));
          err = std::max(err, std::abs(a - b) - ulp * std::abs(b));
          err_cpu = std::max(err_cpu, std::abs(c - b) - ulp * std::abs(b));
        }
        EXPECT_LE(err, std::ldexp(scale, -16)) << out.name;
        if (scale > 0) {
          worst = std::max(worst, err / scale);
          std::printf("pieces: %s.%s m=%lld n=%lld d=%lld e=%lld: error %.3g of the scale "
                      "(the CPU backend in f32: %.3g)\n",
                      p.name.c_str(), out.name.c_str(), (long long)sh.m, (long long)sh.n,
                      (long long)sh.d, (long long)sh.e, err / scale, err_cpu / scale);
        }
      }
      ++ran;
    }
  }
  // inf and NaN values of V at masked keys contribute nothing (the careful build, pieces too)
  const Program& p = ps[0];
  Extents ext = {{"b", 1}, {"h", 2}, {"m", 300}, {"n", 300}, {"d", 64}, {"e", 64}};
  TensorMap in = random_inputs(p, ext, 7);
  const double inf = std::numeric_limits<double>::infinity();
  in["v"].set_at({0, 1, 200, 3}, inf);
  in["v"].set_at({0, 0, 250, 5}, std::numeric_limits<double>::quiet_NaN());
  TensorMap want = evaluate_reference_f64(p, in);
  TensorMap got = run_cuda(p, in);
  int64_t nonfinite = 0;
  for (int64_t i = 0; i < want.at("o").numel(); ++i) {
    const double a = got.at("o").get(i), b = want.at("o").get(i);
    if (!std::isfinite(b)) {
      ++nonfinite;
      EXPECT_TRUE(std::isnan(b) ? std::isnan(a) : a == b) << i;
    } else {
      ASSERT_TRUE(std::isfinite(a)) << i;
      EXPECT_LE(std::abs(a - b), 1e-4) << i;
    }
  }
  EXPECT_GT(nonfinite, 0);
  std::printf("pieces: %d calls; f32 worst error %.3g of the output's scale\n", ran, worst);
}

// Sums over keys without a softmax (plain groups: the weights are score element code as they
// are, no running max): sigmoid weights under a causal mask with their row sums, relu-power
// weights under GQA with keys [b, n, g, d], a softmax group beside a plain one, f32 inputs (in
// bf16 pieces); odd head dims, a decode call (few rows, split key loop) and a long one. On the
// tensor-core path, within 2^-6 of the output's scale for 16-bit inputs (verify's bf16
// tolerance) and 2^-14 for f32.
TEST(CudaBackend, PlainWeightsOnTheTensorCores) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  std::vector<Program> ps = parse_source(R"(
program sig_causal(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  w = where(n <= m, sigmoid(sum(q * k, d) / sqrt(size(d)) - 2.0), 0.0)
  out o: bf16[b, h, m, e] = sum(w * v, n)
  out l: f32[b, h, m] = sum(w, n)
}
program relu2_gqa(q: bf16[b, g, r, m, d], k: bf16[b, n, g, d], v: bf16[b, n, g, e]) {
  a = relu(sum(q * k, d) * 0.125)
  out o: f32[b, g, r, m, e] = sum(a * a * v, n) / (1.0 + sum(a * a, n))
}
program soft_and_sig(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = sum(q * k, d) / sqrt(size(d))
  out o: f32[b, h, m, e] = sum(softmax(s, n) * v, n) + 0.01 * sum(sigmoid(s) * v, n)
}
program sig32(q: f32[b, h, m, d], k: f32[b, h, n, d], v: f32[b, h, n, e]) {
  out o: f32[b, h, m, e] = sum(sigmoid(sum(q * k, d) / sqrt(size(d))) * v, n)
}
)", "plain.attn");
  struct Shape { int64_t m, n, d, e; };
  for (const Program& p : ps)
    for (const Shape& sh : {Shape{77, 130, 64, 64}, Shape{333, 700, 128, 128},
                            Shape{50, 90, 40, 72}, Shape{1, 3001, 64, 64}}) {
      Extents ext = {{"b", 2}, {"h", 3}, {"g", 2}, {"r", 2}, {"m", sh.m}, {"n", sh.n},
                     {"d", sh.d}, {"e", sh.e}};
      SCOPED_TRACE(p.name + " m=" + std::to_string(sh.m) + " n=" + std::to_string(sh.n) +
                   " d=" + std::to_string(sh.d) + " e=" + std::to_string(sh.e));
      CompileOptions o;
      o.target = Target::cuda_sm90;
      o.sizes = ext;
      Compiled c = compile_program(p, o, "lower");
      ASSERT_EQ(c.lowered.kernels.size(), 1u);
      ASSERT_EQ(c.lowered.kernels[0].path, LoweredKernel::Path::tensor_core)
          << c.lowered.kernels[0].why;
      int plain = 0;
      for (const auto& g : c.lowered.kernels[0].tensor_core.launch.structure.groups)
        plain += g.max_node < 0;
      EXPECT_EQ(plain, 1);
      TensorMap in = random_inputs(p, ext, 71 + sh.d);
      TensorMap want = evaluate_reference_f64(p, in);
      TensorMap got = run_cuda(p, in);
      const int bits = p.params[0].type == DType::f32 ? 14 : 6;
      for (const Output& out : p.outputs) {
        const Tensor& w = want.at(out.name);
        double scale = 0, err = 0;
        for (int64_t i = 0; i < w.numel(); ++i) {
          const double a = got.at(out.name).get(i), b = w.get(i);
          ASSERT_TRUE(std::isfinite(a) && std::isfinite(b)) << out.name << "[" << i << "] " << a
                                                            << " vs " << b;
          scale = std::max(scale, std::abs(b));
          err = std::max(err, std::abs(a - b));
        }
        EXPECT_LE(err, std::ldexp(scale, -bits)) << out.name << " scale " << scale;
      }
    }
}

// Flash-decoding: calls of few rows and long key loops split the loop across blocks and merge
// the partial states (attn_combine_sm80); at most 16 rows run the few-rows kernel. Every example
// (several groups, row outputs such as lse, masks with skipped tiles, staged tiles, GQA) at
// such shapes: the split is asserted, the answers are the reference's.
TEST(CudaBackend, SplitKeyLoopsMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const int sms = cuda_device_info().sm_count;
  for (const std::string& name : testing::example_names()) {
    Program p = example(name);
    for (auto [m, n, e] : {std::tuple<int64_t, int64_t, int64_t>{1, 3001, 64}, {16, 2000, 40},
                           {200, 4500, 64}, {200, 4500, 7}}) {
      Extents ext = extents_for(p, m, n, 64, 1);
      if (ext.count("e") && name != "diff_attn") ext["e"] = e;  // padded value columns
      SCOPED_TRACE(name + " m=" + std::to_string(m) + " n=" + std::to_string(n) +
                   " e=" + std::to_string(ext.count("e") ? ext.at("e") : 0));
      CompileOptions o;
      o.target = Target::cuda_sm90;
      o.sizes = ext;
      Compiled c = compile_program(p, o, "lower");
      // the kernels the call runs: a decode call of a program split per softmax cluster (diff_attn
      // at e = 2d) may run its one kernel (decode_runs_one_kernel)
      if (decode_runs_one_kernel(c.lowered.cluster_split, m)) {
        o.cluster_split = false;
        c = compile_program(p, o, "lower");
      }
      for (const LoweredKernel& k : c.lowered.kernels) {
        ASSERT_EQ(k.path, LoweredKernel::Path::tensor_core) << k.why;
        const Sm80Launch& la = k.tensor_core.launch;
        int64_t par = 1;
        for (int d : la.par_dims) par *= ext.at(c.plan.program.dims[d]);
        const KeySplit ks = choose_key_split(la, ext.at(c.plan.program.dims[la.row_dim]), par,
                                             ext.at(c.plan.program.dims[la.key_dim]), sms);
        EXPECT_GT(ks.split, 1);
        EXPECT_EQ(ks.few, m <= 16);
      }
      check_example(p, ext, 41 + m);
    }
  }
}

// A Hopper GPU runs the wgmma kernels where the lowering chose them, and the sm80 (mma.sync)
// kernels with FLASHGEN_CUDA_PATH=sm80; both give the reference's answers; another value of the
// variable is an error that names it. Other GPUs run the sm80 kernels either way.
TEST(CudaBackend, HopperRunsWgmmaUnlessTheSm80PathIsForced) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const bool hopper = cuda_device_info().cc_major == 9;
  struct Env {  // FLASHGEN_CUDA_PATH for the scope
    std::string saved;
    bool had;
    explicit Env(const char* v) {
      const char* old = std::getenv("FLASHGEN_CUDA_PATH");
      had = old != nullptr;
      saved = old ? old : "";
      setenv("FLASHGEN_CUDA_PATH", v, 1);
    }
    ~Env() { had ? setenv("FLASHGEN_CUDA_PATH", saved.c_str(), 1) : unsetenv("FLASHGEN_CUDA_PATH"); }
  };
  // (diff_attn at e = d: two scores, two groups, two accumulators on wgmma; a short key loop
  // that splits; d = 100 padded to 128)
  struct Case { const char* name; int64_t m, n, d, e; };
  for (const Case& c : {Case{"causal", 333, 700, 128, 128}, Case{"gqa", 333, 700, 128, 128},
                        Case{"lse", 333, 700, 128, 128}, Case{"diff_attn", 200, 300, 64, 64},
                        Case{"vanilla", 130, 4500, 64, 64}, Case{"alibi", 77, 300, 100, 128}}) {
    const char* name = c.name;
    Program p = example(name);
    Extents ext = extents_for(p, c.m, c.n, c.d, 1);
    if (ext.count("e")) ext["e"] = c.e;
    for (const std::string path : {"auto", "sm80"}) {
      SCOPED_TRACE(std::string(name) + " FLASHGEN_CUDA_PATH=" + path);
      Env env(path.c_str());
      std::shared_ptr<const CudaLoaded> L = cuda_load(p, ext, CudaBuild::plain);
      ASSERT_EQ(L->kernels.size(), 1u);
      ASSERT_EQ(L->kernels[0].low.path, LoweredKernel::Path::tensor_core);
      EXPECT_EQ(L->kernels[0].low.tensor_core.launch.wgmma, hopper && path == "auto");
      check_example(p, ext, 97);
    }
  }
  Env env("sm91");
  try {
    cuda_load(example("causal"), extents_for(example("causal"), 9, 9, 64, 1), CudaBuild::plain);
    FAIL() << "expected a BackendError";
  } catch (const BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("FLASHGEN_CUDA_PATH"), std::string::npos) << e.what();
  }
}

// Value columns too wide for wgmma's registers at the split their accumulators need: on a
// Hopper GPU the kernel takes wgmma at a wider split (each chunk recomputing the scores; the
// lowering's rule: Lower.HopperGrowsTheValueSplitWhileTensorBound), also in a split key loop
// and the walking build of short key loops. The few-rows kernel of a decode step has a value
// split of its own (Lower.TheFewRowsKernelHasAValueSplitOfItsOwn), here wider (vanilla,
// causal, lse) or narrower (diff_attn) than the full kernel's, with its own combine of split
// key loops, and per-row outputs (lse) written once.
TEST(CudaBackend, WideValueColumnsSplitAcrossBlocksMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const bool hopper = cuda_device_info().cc_major == 9;
  // the value splits on the sm90 path: the full kernel's and the few-rows kernel's own
  struct Case { const char* name; int64_t d, e; int split90, few90; };
  struct Shape { int64_t m, n, batch; };
  for (const Case& c : {Case{"vanilla", 64, 256, 1, 2}, Case{"causal", 128, 256, 1, 2},
                        Case{"lse", 128, 256, 1, 2}, Case{"diff_attn", 128, 256, 1, 2}}) {
    Program p = example(c.name);
    for (const Shape& s : {Shape{333, 700, 2}, Shape{1, 3001, 2}, Shape{200, 150, 8}}) {
      const Extents ext = testing::example_extents(p, s.m, s.n, c.d, c.e, s.batch);
      SCOPED_TRACE(std::string(c.name) + " d=" + std::to_string(c.d) + " e=" +
                   std::to_string(c.e) + " m=" + std::to_string(s.m) + " n=" + std::to_string(s.n));
      std::shared_ptr<const CudaLoaded> L = cuda_load(p, ext);
      // (diff_attn on Hopper: a kernel per softmax group, tests below; its decode calls run the
      // one kernel, whose value split is not the case's)
      for (const CudaLoadedKernel& k : L->kernels) {
        ASSERT_EQ(k.low.path, LoweredKernel::Path::tensor_core) << k.low.why;
        const Sm80Launch& la = k.low.tensor_core.launch;
        if (hopper && k.low.tensor_core.target == Target::cuda_sm90 && !L->one_kernel) {
          EXPECT_TRUE(la.wgmma) << la.products_why;
          EXPECT_EQ(la.value_split, c.split90);
          EXPECT_EQ(la.few_value_split, c.few90);
        }
      }
      check_example(p, ext, 41 + s.m);
    }
  }
}

// Four accumulators (bench/programs/four_acc.attn: two scores, one under a bottom-right causal
// mask; two value tensors): the few-rows kernel takes chunks whose accumulators fit 128
// registers a thread (two chunks of 64 at e = 128: 4 x 64 / 2), not one chunk of 128 columns;
// decode calls with split key loops and a prefill call, with bf16 operands and with f32 ones
// (bf16 pieces).
TEST(CudaBackend, SeveralAccumulatorsInTheFewRowsKernelMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  for (const bool f32 : {false, true}) {
    const char* type = f32 ? "f32" : "bf16";
    Program p = testing::source_program("bench/programs/four_acc.attn", f32);
    for (const auto& [m, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 3001}, {5, 2000}, {200, 300}}) {
      const Extents ext = {{"b", 1}, {"h", 3}, {"m", m}, {"n", n}, {"d", 64}, {"e", 128}};
      SCOPED_TRACE(std::string(type) + " m=" + std::to_string(m) + " n=" + std::to_string(n));
      std::shared_ptr<const CudaLoaded> L = cuda_load(p, ext);
      ASSERT_EQ(L->kernels.at(0).low.path, LoweredKernel::Path::tensor_core)
          << L->kernels.at(0).low.why;
      // (one kernel: decode calls, f32 operands, the sm80 path; a prefill call with bf16 on the
      // cuda-sm90 path runs a kernel per softmax group, whose accumulators fit one chunk)
      if (L->kernels.size() == 1)
        EXPECT_EQ(L->kernels.at(0).low.tensor_core.launch.few_value_split, 2);
      check_example(p, ext, 71 + m);
    }
  }
}

// Softmax clusters in kernels of their own (lower/split_clusters.cpp), on the cuda-sm90 target
// (compiled for the running GPU: sm_90a on the H200, sm_80 code of the same plan elsewhere):
// diff_attn at e = 2d (the first group's p1.v normalized through an intermediate the second
// kernel reads in its epilogue) and four_acc at d = 64, e = 256 (the first group's two outputs
// stored by the first kernel: no intermediate); prefill and short key loops (the walking
// grid) on the two kernels, decode with split key loops on the one-kernel build the runtime
// picks for it (it reads fewer K and V elements a key); bf16 and f32 operands.
// (A test per case, so that shards share them: the whole took 216 s of one shard on an H100.)
struct ClusterCase {
  const char* name;
  const char* file;
  int64_t d, e;
  size_t tmps;
  bool f32;
};
void PrintTo(const ClusterCase& c, std::ostream* os) { *os << c.name; }
class CudaClusters : public ::testing::TestWithParam<ClusterCase> {};

TEST_P(CudaClusters, SoftmaxClustersInKernelsOfTheirOwnMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const ClusterCase& c = GetParam();
  const bool f32 = c.f32;
  Program p = testing::source_program(c.file, f32);
  for (const auto& [m, n] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 3001}, {5, 2000}, {333, 700}, {200, 150}}) {
    Extents ext = testing::example_extents(p, m, n, c.d, c.e, 2);
    const std::string at = std::string(c.file) + (f32 ? " f32" : " bf16") + " d=" +
                           std::to_string(c.d) + " e=" + std::to_string(c.e) + " m=" +
                           std::to_string(m) + " n=" + std::to_string(n);
    SCOPED_TRACE(at);
    // the plan is the cuda-sm90 target's on every GPU (the split is a plan decision)
    CompileOptions opt;
    opt.target = Target::cuda_sm90;
    opt.sizes = ext;
    const Compiled planned = compile_program(p, opt, "lower");
    // with bf16 operands every case splits; with f32 ones (bf16 pieces on mma.sync) the
    // lowering decides (the one kernel may not fit shared memory, or the kernels per
    // cluster may not do 2/3 of its products)
    const bool split = planned.lowered.cluster_split.split_cost > 0;
    if (!f32) EXPECT_TRUE(split);
    const size_t kernels = split ? 2 : 1;
    EXPECT_EQ(planned.plan.kernels.size(), kernels);
    EXPECT_EQ(planned.plan.materialized().size(), split ? c.tmps : 0);
    std::shared_ptr<const CudaLoaded> L = cuda_load(p, ext);
    if (L->kernels.at(0).low.tensor_core.target == Target::cuda_sm90) {  // (not forced sm80)
      // decode calls run the one kernel where it reads fewer K and V elements a key
      const bool one = decode_runs_one_kernel(planned.lowered.cluster_split, m);
      if (!f32) EXPECT_EQ(one, m <= 16);
      EXPECT_EQ(L->one_kernel, one);
      ASSERT_EQ(L->kernels.size(), one ? 1u : kernels);
      for (const CudaLoadedKernel& k : L->kernels)
        EXPECT_EQ(k.low.path, LoweredKernel::Path::tensor_core) << k.low.why;
    }
    check_example(p, ext, 97 + m);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Programs, CudaClusters,
    ::testing::Values(ClusterCase{"diff_attn_d128", "examples/diff_attn.attn", 128, 128, 1, false},
                      ClusterCase{"diff_attn_d128_f32", "examples/diff_attn.attn", 128, 128, 1, true},
                      ClusterCase{"diff_attn_e256", "examples/diff_attn.attn", 64, 256, 1, false},
                      ClusterCase{"diff_attn_e256_f32", "examples/diff_attn.attn", 64, 256, 1, true},
                      ClusterCase{"four_acc", "bench/programs/four_acc.attn", 64, 256, 0, false},
                      ClusterCase{"four_acc_f32", "bench/programs/four_acc.attn", 64, 256, 0, true}),
    [](const ::testing::TestParamInfo<ClusterCase>& i) { return std::string(i.param.name); });

// Cuts between softmax clusters: a bf16 cut (its rounded value through the f32 intermediate),
// one over [b, h, e, m], a per-row output of the first group (its logsumexp, stored by the first
// kernel), three softmaxes (three kernels; a decode call the one kernel of three scores on
// mma.sync, which reads K and V once), and a bool cut at its float argument. A test per program.
class CudaClusterCuts : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaClusterCuts, CutsBetweenSoftmaxClustersMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const Program p = testing::source_program(std::string("bench/programs/") + GetParam() + ".attn");
  for (const auto& [m, n] :
       std::vector<std::pair<int64_t, int64_t>>{{333, 700}, {200, 150}, {1, 3001}}) {
    SCOPED_TRACE(p.name + " m=" + std::to_string(m) + " n=" + std::to_string(n));
    check_example(p, testing::example_extents(p, m, n, 128, 256, 2), 131 + m);
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, CudaClusterCuts,
                         ::testing::Values("three_softmax", "diff_lse", "bf16_cut", "cut_e_first",
                                           "bool_cut"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

// The calls the tests of a kind of program run it at, d = e = 64 and 128: decode calls (the
// few-rows kernel), split key loops, walking blocks and long loops; `salt` varies the inputs'
// seed by shape.
void for_each_call_shape(const Program& p,
                         const std::function<void(const Extents& ext, int64_t salt)>& fn) {
  for (const int64_t d : {64, 128})
    for (const auto& [m, n] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 3001}, {5, 2000}, {333, 700}, {200, 150}, {1000, 1000}}) {
      SCOPED_TRACE(p.name + " d=" + std::to_string(d) + " m=" + std::to_string(m) +
                   " n=" + std::to_string(n));
      fn(testing::example_extents(p, m, n, d, d, 2), m + d);
      if (::testing::Test::HasFatalFailure()) return;  // (an ASSERT in fn stops the shapes)
    }
}

// A query's and a key's norm over the head dim (tests/programs/norms.attn: cosine attention; a
// key norm under a causal mask; a row norm that only the epilogue reads, beside a per-row
// output of the norms' kernel; a weighted contraction, which stays one element-path kernel):
// kernels of their own compute the norms (lower/cut_head_reductions.cpp) and the attention
// kernel runs on the tensor cores, reading them (the key norm staged with its K/V tile) --
// decode calls (the few-rows kernel), split key loops, walking blocks and long loops, at
// d = 64 and 128, against the reference. A test per program, so that shards share them (the four
// in one test took 176 s of one shard on an H100).
class CudaNorms : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaNorms, NormsOverTheHeadDimRunInKernelsOfTheirOwn) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const std::vector<Program> ps = parse_file(testing::source_path("tests/programs/norms.attn"));
  auto it = std::find_if(ps.begin(), ps.end(),
                         [&](const Program& p) { return p.name == GetParam(); });
  ASSERT_NE(it, ps.end()) << GetParam();
  const Program& p = *it;
  for_each_call_shape(p, [&](const Extents& ext, int64_t salt) {
    // (weighted: one kernel on the element path; the others: the norms' kernels, then the
    // attention on the tensor cores)
    std::shared_ptr<const CudaLoaded> L = cuda_load(p, ext);
    ASSERT_EQ(L->kernels.size() == 1, p.name == "weighted");
    EXPECT_EQ(L->kernels.back().low.path, p.name == "weighted"
                                              ? LoweredKernel::Path::element
                                              : LoweredKernel::Path::tensor_core)
        << L->kernels.back().low.why;
    TensorMap in = random_inputs(p, ext, 151 + salt);
    if (in.count("tau")) {  // temperatures as cosine attention learns them
      Tensor tau(DType::f32, {ext.at("h")});
      for (int64_t i = 0; i < ext.at("h"); ++i) tau.set(i, 0.05 + 0.03 * i);
      in["tau"] = tau;
    }
    check_inputs(p, in, ext);
  });
}

INSTANTIATE_TEST_SUITE_P(Programs, CudaNorms,
                         ::testing::Values("cosine", "out_scale", "weighted", "causal_knorm"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

// (a program of a tests/programs file; gtest prints a failing case's parameter with PrintTo)
struct ProgramCase {
  const char* file;
  const char* program;
};
void PrintTo(const ProgramCase& c, std::ostream* os) { *os << c.file << ":" << c.program; }

// Two kernels, the attention's first, on the tensor cores over its own grid, at every call
// shape of for_each_call_shape against the reference:
// - tests/programs/partials.attn: an output over fewer dims than the attention beside it,
//   reduced over a dim the attention keeps in its grid (passes/partial_reductions.cpp): the
//   attention's kernel stores the partial and a kernel of its own reduces it (head_norm's
//   output reads the reduction over heads: its o is materialized, as below, and the second
//   kernel computes o and the max over heads and keys);
// - tests/programs/after_attention.attn: a reduction of the attention's result over a dim its
//   kernel keeps in the grid (passes/fuse.cpp): the result is stored on that grid and the
//   second kernel reads it.
class CudaPartials : public ::testing::TestWithParam<ProgramCase> {};

TEST_P(CudaPartials, TheAttentionKeepsItsGrid) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const std::vector<Program> ps =
      parse_file(testing::source_path(std::string("tests/programs/") + GetParam().file));
  auto it = std::find_if(ps.begin(), ps.end(),
                         [&](const Program& p) { return p.name == GetParam().program; });
  ASSERT_NE(it, ps.end()) << GetParam().program;
  const Program& p = *it;
  for_each_call_shape(p, [&](const Extents& ext, int64_t salt) {
    std::shared_ptr<const CudaLoaded> L = cuda_load(p, ext);
    ASSERT_EQ(L->kernels.size(), 2u);
    EXPECT_EQ(L->kernels[0].low.path, LoweredKernel::Path::tensor_core) << L->kernels[0].low.why;
    check_inputs(p, random_inputs(p, ext, 191 + salt), ext);
  });
}

INSTANTIATE_TEST_SUITE_P(
    Programs, CudaPartials,
    ::testing::Values(ProgramCase{"partials.attn", "head_count"},
                      ProgramCase{"partials.attn", "head_peak"},
                      ProgramCase{"partials.attn", "mean_lse"},
                      ProgramCase{"partials.attn", "group_min"},
                      ProgramCase{"partials.attn", "int_count"},
                      ProgramCase{"partials.attn", "head_mix"},
                      ProgramCase{"partials.attn", "row_count"},
                      ProgramCase{"partials.attn", "head_norm"},
                      ProgramCase{"after_attention.attn", "row_center"},
                      ProgramCase{"after_attention.attn", "mix_only"},
                      ProgramCase{"after_attention.attn", "head_softmax"},
                      ProgramCase{"after_attention.attn", "group_norm"},
                      ProgramCase{"after_attention.attn", "norm_peak"},
                      ProgramCase{"after_attention.attn", "pad_norm"}),
    [](const ::testing::TestParamInfo<ProgramCase>& i) { return std::string(i.param.program); });

// One program of a tests/programs file at every call shape of for_each_call_shape: one kernel
// on the tensor cores against the reference. A test per program, so that shards share them.
// gates.attn: probabilities weighed before they multiply the values (key gates, a dropout mask
// under a causal mask, grouped queries with a gate per shared key, one weighted softmax read by
// two value tensors with a per-row and a per-key factor, one softmax read plain and gated, a mask
// written as a factor, the entropy's row sum weighed by the scores: the group's P.V weights);
// value_sums.attn: values computed per key (sums the online rewrite distributes into plain P.V
// and row sums); key_values.attn: score values computed once per key of a tile; mixed_kinds.attn:
// variants written to check the path's generality (a symmetric ALiBi under a softcap and a key
// mask, a gated output beside a hand-written log-sum-exp, chunked local attention);
// masks_and_outputs.attn: more of them (a causal mask offset by the key count, a dilated
// window, block-causal chunks of 12, a clipped score with a per-query temperature,
// multi-query K/V beside the log-sum-exp, a gated output plus a residual; masks for the
// element loop's mask pass and clamped keys: a row-dependent stride, a gather by a clamped
// distance under per-batch lengths, a mask that reads the score, a divisor read per key;
// masks only a weight per diagonal or per key reads, which the mask pass reads itself; mask
// data read by name, which the tile classifier bounds: a scalar window, a key padding, a
// per-row limit; a count of kept keys by a bool cast, in f32 and in i64; a row's smallest kept
// score; a count and a capped max whose conditions share the attention's mask as a conjunct);
// groups.attn: kernels of three to five groups (softmax at several temperatures, a max and a
// min beside the attention, counts, sigmoid and relu weights, grouped queries);
// scores_only.attn: kernels of no P.V accumulator (a log-sum-exp, the largest and smallest
// logit, a count and a max under key padding, sigmoid sums, f32 operands in pieces, a softmax
// weighted by m - n, a min under a per-batch key mask).
class CudaPrograms : public ::testing::TestWithParam<ProgramCase> {};

TEST_P(CudaPrograms, OneTensorCoreKernelMatchesTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const std::vector<Program> ps =
      parse_file(testing::source_path(std::string("tests/programs/") + GetParam().file));
  auto it = std::find_if(ps.begin(), ps.end(),
                         [&](const Program& p) { return p.name == GetParam().program; });
  ASSERT_NE(it, ps.end()) << GetParam().program;
  const Program& p = *it;
  for_each_call_shape(p, [&](const Extents& ext, int64_t salt) {
    std::shared_ptr<const CudaLoaded> L = cuda_load(p, ext);
    ASSERT_EQ(L->kernels.size(), 1u);
    ASSERT_EQ(L->kernels[0].low.path, LoweredKernel::Path::tensor_core) << L->kernels[0].low.why;
    check_inputs(p, random_inputs(p, ext, 171 + salt), ext);
  });
}

INSTANTIATE_TEST_SUITE_P(
    Programs, CudaPrograms,
    ::testing::Values(ProgramCase{"gates.attn", "key_gate"}, ProgramCase{"gates.attn", "dropout"},
                      ProgramCase{"gates.attn", "gqa_gate"}, ProgramCase{"gates.attn", "two_values"},
                      ProgramCase{"gates.attn", "gated_and_not"},
                      ProgramCase{"gates.attn", "mult_mask"}, ProgramCase{"gates.attn", "entropy"},
                      ProgramCase{"value_sums.attn", "value_bias"},
                      ProgramCase{"value_sums.attn", "value_mix"},
                      ProgramCase{"value_sums.attn", "key_offset"},
                      ProgramCase{"key_values.attn", "key_tanh"},
                      ProgramCase{"key_values.attn", "key_bucket"},
                      ProgramCase{"key_values.attn", "alibi_gate"},
                      ProgramCase{"key_values.attn", "gqa_key_exp"},
                      ProgramCase{"key_values.attn", "temp_gate"},
                      ProgramCase{"key_values.attn", "cross_bias"},
                      ProgramCase{"mixed_kinds.attn", "sym_alibi"},
                      ProgramCase{"mixed_kinds.attn", "two_out"},
                      ProgramCase{"mixed_kinds.attn", "chunked"},
                      ProgramCase{"masks_and_outputs.attn", "cache_causal"},
                      ProgramCase{"masks_and_outputs.attn", "dilated"},
                      ProgramCase{"masks_and_outputs.attn", "block_causal"},
                      ProgramCase{"masks_and_outputs.attn", "clip_temp"},
                      ProgramCase{"masks_and_outputs.attn", "mqa_lse"},
                      ProgramCase{"masks_and_outputs.attn", "gated_residual"},
                      ProgramCase{"masks_and_outputs.attn", "stride_mask"},
                      ProgramCase{"masks_and_outputs.attn", "bucket_len"},
                      ProgramCase{"masks_and_outputs.attn", "score_thresh"},
                      ProgramCase{"masks_and_outputs.attn", "mod_keys"},
                      ProgramCase{"masks_and_outputs.attn", "hidden_diag"},
                      ProgramCase{"masks_and_outputs.attn", "hidden_key"},
                      ProgramCase{"masks_and_outputs.attn", "win_scalar"},
                      ProgramCase{"masks_and_outputs.attn", "pad_by_name"},
                      ProgramCase{"masks_and_outputs.attn", "row_limit"},
                      ProgramCase{"masks_and_outputs.attn", "count_cast"},
                      ProgramCase{"masks_and_outputs.attn", "count_i64"},
                      ProgramCase{"masks_and_outputs.attn", "row_min"},
                      ProgramCase{"masks_and_outputs.attn", "count_where"},
                      ProgramCase{"masks_and_outputs.attn", "capped_peak"},
                      ProgramCase{"groups.attn", "row_stats"},
                      ProgramCase{"groups.attn", "temperatures"},
                      ProgramCase{"groups.attn", "gqa_mixed"},
                      ProgramCase{"groups.attn", "three_weights"},
                      ProgramCase{"groups.attn", "window_five"},
                      ProgramCase{"groups.attn", "f32_five"},
                      ProgramCase{"groups.attn", "doc_mix"},
                      ProgramCase{"groups.attn", "lse3"},
                      ProgramCase{"groups.attn", "alibi_stats"},
                      ProgramCase{"groups.attn", "four_out"},
                      ProgramCase{"groups.attn", "relu_sq"},
                      ProgramCase{"scores_only.attn", "lse_causal"},
                      ProgramCase{"scores_only.attn", "logit_range"},
                      ProgramCase{"scores_only.attn", "max_sim"},
                      ProgramCase{"scores_only.attn", "gqa_window"},
                      ProgramCase{"scores_only.attn", "lse_f32"},
                      ProgramCase{"scores_only.attn", "exp_dist"},
                      ProgramCase{"scores_only.attn", "kept_min"}),
    [](const ::testing::TestParamInfo<ProgramCase>& i) { return std::string(i.param.program); });

// Three score maps over three value tensors and five P.V accumulators (groups.attn's
// three_maps): a kernel per map where that pays (d = 128; every map alone takes wgmma on a
// Hopper GPU), else one kernel of three scores (d = 64 on the sm80 path), on the tensor cores
// at every call shape against the reference.
TEST(CudaBackend, ThreeScoreMapsMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const std::vector<Program> ps = parse_file(testing::source_path("tests/programs/groups.attn"));
  auto it = std::find_if(ps.begin(), ps.end(),
                         [](const Program& p) { return p.name == "three_maps"; });
  ASSERT_NE(it, ps.end());
  int three_scores = 0;
  for_each_call_shape(*it, [&](const Extents& ext, int64_t salt) {
    std::shared_ptr<const CudaLoaded> L = cuda_load(*it, ext);
    ASSERT_TRUE(L->kernels.size() == 1 || L->kernels.size() == 3) << L->kernels.size();
    for (const CudaLoadedKernel& k : L->kernels) {
      ASSERT_EQ(k.low.path, LoweredKernel::Path::tensor_core) << k.low.why;
      three_scores += k.low.tensor_core.scores.size() == 3;
    }
    check_inputs(*it, random_inputs(*it, ext, 181 + salt), ext);
  });
  const char* path = std::getenv("FLASHGEN_CUDA_PATH");
  if (path && std::string(path) == "sm80") EXPECT_GT(three_scores, 0);
}

// Scores over head dims of their own (tests/programs/score_dims.attn: MLA's per-head and shared
// rotary dims summed into one logit, its log-sum-exp with grouped queries, two softmaxes of
// different widths) on the tensor cores against the reference: the narrower score's tiles read
// as 0 past its columns and its products stop there. Widths (d, r): 128 and 64 (MLA's), 64 and
// 32, 96 and 40 (mma.sync on sm90: tiles of 96), 40 and 128 (the narrower score first); decode
// calls, split key loops, walking blocks and long loops. A test per program, so that shards
// share them (the three in one test ran past 110 s of one shard on an H100).
class CudaScoreDims : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaScoreDims, ScoresOverHeadDimsOfTheirOwnMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const std::vector<Program> ps =
      parse_file(testing::source_path("tests/programs/score_dims.attn"));
  auto it = std::find_if(ps.begin(), ps.end(),
                         [&](const Program& p) { return p.name == GetParam(); });
  ASSERT_NE(it, ps.end()) << GetParam();
  const Program& p = *it;
  {
    for (const auto& [d, r] : std::vector<std::pair<int64_t, int64_t>>{{128, 64}, {64, 32},
                                                                       {96, 40}, {40, 128}})
      for (const auto& [m, n] : std::vector<std::pair<int64_t, int64_t>>{
               {1, 3001}, {5, 2000}, {333, 700}, {1000, 1000}}) {
        SCOPED_TRACE(p.name + " d=" + std::to_string(d) + " r=" + std::to_string(r) +
                     " m=" + std::to_string(m) + " n=" + std::to_string(n));
        Extents ext = testing::example_extents(p, m, n, d, 64, 2);
        ext["r"] = r;
        std::shared_ptr<const CudaLoaded> L = cuda_load(p, ext);
        ASSERT_EQ(L->kernels.size(), 1u);
        ASSERT_EQ(L->kernels[0].low.path, LoweredKernel::Path::tensor_core) << L->kernels[0].low.why;
        check_inputs(p, random_inputs(p, ext, 191 + m + d), ext);
        if (::testing::Test::HasFatalFailure()) return;
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Programs, CudaScoreDims, ::testing::Values("mla", "mla_lse", "two_widths"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

// Weights that are not finite (tests/programs/gates.attn) against the reference:
// gates of inf and NaN at keys the causal mask removes, of 0 over values of inf, of inf over
// values of 0, negative ones over values of inf.
TEST(CudaBackend, WeightedProbabilitiesMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const std::vector<Program> ps = parse_file(testing::source_path("tests/programs/gates.attn"));
  // Non-finite gates: at keys the causal mask removes for every row (probability 0) an inf or
  // NaN gate contributes nothing, and a gate of 0 over values of inf contributes 0 (the strong
  // zero; the careful build).
  const Program gqa = ps.at(2);
  const Extents ext = testing::example_extents(gqa, 200, 300, 64, 64, 2);
  TensorMap in = random_inputs(gqa, ext, 5);
  Tensor& w = in.at("w");
  Tensor& v = in.at("v");
  const int64_t N = ext.at("n"), E = ext.at("e");
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int64_t key = i % N;
    if (key == 250) w.set(i, std::numeric_limits<double>::infinity());  // (rows < 200)
    if (key == 251) w.set(i, std::numeric_limits<double>::quiet_NaN());
    if (key == 7) {  // a gate of 0 over values of inf
      w.set(i, 0.0);
      for (int64_t e = 0; e < E; ++e) v.set((i / N) * N * E + key * E + e, std::numeric_limits<double>::infinity());
    }
  }
  check_inputs(gqa, in, ext);
  // Weights of inf and negative weights (two_values: c[n] * sigmoid(t)) at keys every row
  // sees: a gate of inf over values of 0 is 0 by the strong zero (the tensor cores would give
  // NaN), over other values +-inf; a negative gate over values of +inf gives -inf (the careful
  // build: add_nonfinite_weights, and the sign in add_nonfinite_values).
  const Program two = ps.at(3);
  const Extents ext2 = testing::example_extents(two, 200, 300, 64, 64, 2);
  TensorMap in2 = random_inputs(two, ext2, 6);
  Tensor& c = in2.at("c");
  Tensor& v2 = in2.at("v");
  c.set(9, std::numeric_limits<double>::infinity());
  c.set(5, -2.0);
  const int64_t N2 = ext2.at("n"), E2 = ext2.at("e");
  for (int64_t bh = 0; bh < v2.numel() / (N2 * E2); ++bh)
    for (int64_t e = 0; e < E2; ++e) {
      if (e % 2 == 0) v2.set(bh * N2 * E2 + 9 * E2 + e, 0.0);
      if (e < 4) v2.set(bh * N2 * E2 + 5 * E2 + e, std::numeric_limits<double>::infinity());
    }
  check_inputs(two, in2, ext2);
}

// Random template-shaped programs (tests/support/random_program.h): every one runs against the
// reference, on the tensor-core path where the template takes it and the element path elsewhere.
TEST(CudaProperty, RandomProgramsMatchTheReference) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  uint64_t seed = 20261130;  // fixed; printed below
  if (const char* e = std::getenv("FLASHGEN_PROPERTY_SEED")) seed = std::strtoull(e, nullptr, 10);
  int count = 40;  // FLASHGEN_CUDA_PROPERTY_COUNT: fewer under compute-sanitizer
  if (const char* e = std::getenv("FLASHGEN_CUDA_PROPERTY_COUNT")) count = std::atoi(e);
  testing::RandomProgramOptions opt;
  opt.cuda_shaped = true;
  int ran = 0;
  for (int i = 0; i < count; ++i) {
    testing::GeneratedProgram g = testing::random_attention_program(seed + i, i, opt);
    SCOPED_TRACE("FLASHGEN_PROPERTY_SEED=" + std::to_string(seed + i) + "\n" + g.text);
    Program p = parse_source(g.text, "random.attn").at(0);
    check_example(p, g.sizes, seed + 7919 * i);
    ++ran;
  }
  std::printf("cuda property: %d random programs on the GPU (seed %llu)\n", ran,
              static_cast<unsigned long long>(seed));
}

TEST(CudaBackend, ModuloByZeroIsACallError) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  Program p = parse_source(kUnseen, "unseen.attn").at(2);
  Extents ext = {{"h", 2}, {"m", 9}, {"n", 9}, {"d", 64}, {"e", 64}};
  TensorMap in = random_inputs(p, ext, 4);
  in["p"] = Tensor(DType::i32, {2});  // zeros
  try {
    run_cuda(p, in, {});
    FAIL() << "expected a CallError";
  } catch (const CallError& e) {
    EXPECT_NE(std::string(e.what()).find("modulo by zero"), std::string::npos) << e.what();
  }
}


// Masked keys contribute nothing (docs/language.md §8): NaN and +-inf values of v at keys that a
// causal mask removes for a whole tile (skipped) change nothing; rows that attend them see
// them. Rows that share a 128-row block with such a key are left out: there the key sits in a
// partial tile, where the tensor-core p.v product follows IEEE (the documented deviation).
TEST(CudaBackend, NonFiniteValuesOfMaskedKeysContributeNothing) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  Program p = parse_source(
      "program c(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e]) {\n"
      "  s = where(n <= m, sum(q * k, d) / sqrt(size(d)), -inf)\n"
      "  out o: bf16[h, m, e] = sum(softmax(s, n) * v, n)\n"
      "}\n", "t.attn").at(0);
  const int64_t H = 2, M = 640, E = 64;
  Extents ext = {{"h", H}, {"m", M}, {"n", M}, {"d", 64}, {"e", E}};
  TensorMap in = random_inputs(p, ext, 99);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Plant { int64_t key, col; double value; };
  const std::vector<Plant> plants = {{300, 3, nan}, {100, 5, inf}, {450, 7, -inf}, {600, 9, nan}};
  for (int64_t h = 0; h < H; ++h)
    for (const Plant& x : plants) in["v"].set_at({h, x.key, x.col}, x.value);
  TensorMap want = evaluate_reference_f64(p, in);
  TensorMap got = run_cuda(p, in);
  const Tensor& w = want.at("o");
  const Tensor& g = got.at("o");
  double scale = 0, err = 0;
  int compared = 0, nonfinite = 0;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t m = 0; m < M; ++m) {
      // Rows in the block of a planted key too: there the key sits in a partial tile, masked for
      // the rows above it and attended by the rows below.
      for (int64_t e = 0; e < E; ++e) {
        const double a = g.at({h, m, e}), b = w.at({h, m, e});
        ++compared;
        if (!std::isfinite(b)) {
          ++nonfinite;
          EXPECT_TRUE(std::isnan(b) ? std::isnan(a) : a == b) << h << ", " << m << ", " << e;
          continue;
        }
        ASSERT_TRUE(std::isfinite(a)) << "o[" << h << ", " << m << ", " << e << "] = " << a;
        scale = std::max(scale, std::abs(b));
        err = std::max(err, std::abs(a - b));
      }
    }
  EXPECT_GT(compared, 0);
  EXPECT_GT(nonfinite, 0);  // rows after a planted key attend it
  EXPECT_LE(err, std::ldexp(1.0, -6) * scale);
}

// The same rule for every example mask, with values planted where partial tiles hold them
// (around the diagonal, the window's far edge, document edges, the prefix's end), compared with
// the reference by verify: every non-finite output must match it, finite ones within bf16.
TEST(CudaBackend, NonFiniteValuesInPartialTilesFollowTheReferenceOnEveryMask) {
  if (!have_gpu()) GTEST_SKIP() << "no CUDA GPU";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const testing::ExampleMask& c : testing::example_masks()) {
    Program p = testing::example_program(c.example);
    Extents ext = testing::example_extents(p, 777, 700, 64, 64, 2);
    TensorMap in = random_inputs(p, ext, 5);
    if (p.find_param("doc") >= 0) in["doc"] = testing::document_ids(ext.at("t"));
    struct Plant { int64_t key, col; double value; };
    const std::vector<Plant> plants = {{130, 3, nan}, {201, 5, inf},  {255, 7, -inf},
                                       {256, 9, nan}, {399, 11, inf}, {433, 11, -inf},
                                       {600, 13, nan}};
    for (int64_t b = 0; b < ext.at("b"); ++b)
      for (int64_t h = 0; h < ext.at("h"); ++h)
        for (const Plant& x : plants) in["v"].set_at({b, h, x.key, x.col}, x.value);
    VerifyReport r = verify(p, in);
    const BackendCheck& cuda = r.backends.back();
    ASSERT_EQ(cuda.backend, Backend::cuda);
    ASSERT_TRUE(cuda.ran) << cuda.why_not;
    ASSERT_EQ(cuda.outputs.size(), 1u);
    EXPECT_EQ(cuda.outputs[0].nonfinite_mismatch, 0) << c.example << "\n"
                                                     << verify_text(p, r, bind_extents(p, in));
    EXPECT_TRUE(cuda.ok()) << c.example << "\n" << verify_text(p, r, bind_extents(p, in));
  }
}

}  // namespace
}  // namespace flashgen
