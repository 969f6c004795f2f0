// Every example's generated CUDA (sm80 path) compiles through NVRTC for sm_80 and sm_90a, at
// d = e = 64 (diff_attn e = 2d; evoformer d = 32); d = 128 is compiled by the GPU tests.
// NVRTC needs no GPU, so CI catches a broken GPU path on every submission; SKIPs only when the
// build has no CUDA toolkit. Also: a program that does not fit the template takes the element
// path and says why, and the emitted source depends on head dims only (not on long extents).
#include <gtest/gtest.h>
#include <set>

#include <tuple>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>

#include "compiler/cuda_call.h"
#include "flashgen/compile.h"
#include "flashgen/error.h"
#include "flashgen/frontend.h"
#include "codegen/cuda/embedded_headers.h"
#include "lower/launch.h"
#include "compiler/pipeline.h"
#include "lower/tensor_core.h"
#include "runtime/nvrtc.h"
#include "support/support.h"

namespace flashgen {
namespace {

Program example(const std::string& name) { return testing::example_program(name); }

Extents heads(const std::string& name, int64_t d) {
  if (name == "diff_attn") return {{"d", d}, {"e", 2 * d}};
  if (name.rfind("evoformer", 0) == 0) return {{"d", 32}};
  return {{"d", d}, {"e", d}};
}

// NVRTC options of the runtime's plain sm_90a build, with `macros` (or other options).
NvrtcOptions sm90a_options(const std::vector<std::string>& macros) {
  NvrtcOptions o;
  o.arch = "sm_90a";
  o.options = {"-std=c++17", "-default-device", "--disable-warnings", "--use_fast_math"};
  o.options.insert(o.options.end(), macros.begin(), macros.end());
  o.cuda_include = false;
  int n = 0;
  const cuda::EmbeddedHeader* h = cuda::embedded_headers(&n);
  for (int i = 0; i < n; ++i) o.headers.push_back({h[i].name, h[i].source});
  return o;
}

// ptxas -v's properties line of `entry` in an NVRTC log ("... N bytes spill stores, ..."), or
// empty when the log has no such entry.
std::string ptxas_properties(const std::string& log, const std::string& entry) {
  const size_t at = log.find("Function properties for " + entry + "\n");
  if (at == std::string::npos) return "";
  const size_t line = log.find('\n', at) + 1;
  return log.substr(line, log.find('\n', line) - line);
}

class NvrtcExamples : public ::testing::TestWithParam<std::string> {};

// NVRTC's disk cache may hold a test's kernels already; a fresh cache folder for the test's
// lifetime makes it compile (and NVRTC's log is only there for a compilation).
struct FreshCache {
  testing::TempDir dir;
  std::string saved;
  bool had = false;
  FreshCache() {
    const char* old = std::getenv("FLASHGEN_CACHE_DIR");
    had = old != nullptr;
    saved = old ? old : "";
    setenv("FLASHGEN_CACHE_DIR", dir.path().c_str(), 1);
  }
  ~FreshCache() { had ? setenv("FLASHGEN_CACHE_DIR", saved.c_str(), 1) : unsetenv("FLASHGEN_CACHE_DIR"); }
};

TEST_P(NvrtcExamples, CompilesForSm80AndSm90a) {
  std::string why;
  FreshCache cache;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  const std::string name = GetParam();
  Program p = example(name);
  for (int64_t d : {64}) {
    for (const char* arch : {"sm_80", "sm_90a"}) {
      std::string cubin;
      ASSERT_NO_THROW(cubin = compile_cuda_cubin(p, Target::cuda_sm80, heads(name, d), arch))
          << name << " d=" << d << " " << arch;
      ASSERT_GT(cubin.size(), 64u);
      EXPECT_EQ(cubin.substr(1, 3), "ELF");
    }
  }
}

// The cuda-sm90 kernels at d = 64 and 128: where the lowering chose wgmma, ptxas keeps the main
// and walking kernels free of spills and
// wgmma instructions asynchronous. (It serializes every wgmma of a kernel, with a "Potential
// Performance Loss" advisory in its -v output, when ordinary code touches a wgmma's registers
// before the wait or a wgmma is issued under a branch.)
TEST_P(NvrtcExamples, Sm90KernelsKeepWgmmaAsynchronous) {
  std::string why;
  FreshCache cache;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  const std::string name = GetParam();
  Program p = example(name);
  int wgmma_kernels = 0;
  for (int64_t d : {64, 128}) {
    CompileOptions opt;
    opt.target = Target::cuda_sm90;
    opt.sizes = heads(name, d);
    const Compiled compiled = compile_to_target(p, opt);
    bool any = false;
    // each kernel's source (diff_attn at d = 128 runs a kernel per softmax cluster)
    for (size_t ki = 0; ki < compiled.sources.size(); ++ki) {
      const std::string& src = compiled.sources[ki];
      if (src.find("kWgmma = true") == std::string::npos) continue;
      any = true;
      const NvrtcOptions o = sm90a_options({"--ptxas-options=-v"});
      Cubin c;
      ASSERT_NO_THROW(c = nvrtc_compile(src, o)) << name << " d=" << d;
      ASSERT_NE(c.log.find("Used"), std::string::npos) << "no ptxas report in the log:\n" << c.log;
      EXPECT_EQ(c.log.find("Potential Performance Loss"), std::string::npos)
          << name << " d=" << d << ":\n" << c.log;
      // the warp-specialized kernel's register moves between warpgroups take effect (ptxas warns
      // C7508 when it ignores setmaxnreg)
      if (src.find("kWarpSpecialized = true") != std::string::npos) {
        EXPECT_EQ(c.log.find("setmaxnreg"), std::string::npos) << name << " d=" << d << ":\n" << c.log;
        EXPECT_EQ(c.log.find("C7508"), std::string::npos) << name << " d=" << d << ":\n" << c.log;
      }
      // the lowering's register rules (choose_wgmma, choose_pipelining) leave the main and the
      // walking kernels without spills (ptxas: "Function properties for F", then "... N bytes
      // spill stores"); the few-rows kernel (255 registers, mma.sync) is not held to it
      int checked = 0;
      const std::string k = name + "_k" + std::to_string(ki);
      for (const std::string entry : {k, k + "_walk"}) {
        const std::string props = ptxas_properties(c.log, entry);
        if (props.empty()) continue;
        ++checked;
        EXPECT_NE(props.find(" 0 bytes spill stores"), std::string::npos)
            << entry << " d=" << d << ": " << props;
      }
      EXPECT_GE(checked, 1) << name << " d=" << d << ":\n" << c.log;
    }
    wgmma_kernels += any;
  }
  // every example but the ones whose tiles do not line up (d = 32) takes wgmma at both sizes
  // (diff_attn in a kernel per softmax group, whose one kernel would run mma.sync at d = 64 and
  // split its values in 4 at d = 128)
  const int expect = name.rfind("evoformer", 0) == 0 ? 0 : 2;
  EXPECT_EQ(wgmma_kernels, expect) << name;
}

// The few-rows (decode) build as the runtime compiles it (few_rows_build_options: its entries
// only, ptxas -O1) for every example's tensor-core kernels on sm_90a at d = 128: both entries
// are there, and the few-rows kernel spills no more than at ptxas's default -O3 (which spills
// 56 to 60 bytes in most examples' few-rows kernels).
TEST_P(NvrtcExamples, TheFewRowsBuildSpillsNoMoreThanAtO3) {
  std::string why;
  FreshCache cache;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  const std::string name = GetParam();
  CompileOptions opt;
  opt.target = Target::cuda_sm90;
  opt.sizes = heads(name, 128);
  const Compiled compiled = compile_to_target(example(name), opt);
  auto spill_bytes = [](const std::string& props) {
    const size_t at = props.find(" bytes spill stores");
    const size_t from = props.rfind(' ', at - 1) + 1;
    return at == std::string::npos ? -1 : std::stoi(props.substr(from, at - from));
  };
  for (size_t ki = 0; ki < compiled.sources.size(); ++ki) {
    const LoweredKernel& k = compiled.lowered.kernels[ki];
    if (k.path != LoweredKernel::Path::tensor_core) continue;
    std::vector<std::string> runtime = few_rows_build_options();
    runtime.push_back("--ptxas-options=-v");
    Cubin few, o3;
    ASSERT_NO_THROW(few = nvrtc_compile(compiled.sources[ki], sm90a_options(runtime))) << name;
    ASSERT_NO_THROW(o3 = nvrtc_compile(compiled.sources[ki],
                                       sm90a_options({"-DFG_ONLY_FEW", "--ptxas-options=-v"})))
        << name;
    for (const std::string& entry : {k.entry + "_few", k.entry + "_few_combine"})
      EXPECT_NE(few.bytes.find(entry + '\0'), std::string::npos) << entry;
    EXPECT_EQ(few.bytes.find(k.entry + '\0'), std::string::npos) << k.entry;  // not the main
    const int at_o1 = spill_bytes(ptxas_properties(few.log, k.entry + "_few"));
    const int at_o3 = spill_bytes(ptxas_properties(o3.log, k.entry + "_few"));
    ASSERT_GE(at_o1, 0) << few.log;
    ASSERT_GE(at_o3, 0) << o3.log;
    EXPECT_LE(at_o1, at_o3) << k.entry << "_few";
  }
}

// Kernels whose key tiles are classified by data walk in their main build with a producer of
// Sm80Launch::producer_regs (88) registers, so their compute warpgroups have 208, not 224: the
// wgmma shapes the lowering picks for them (up to 176 live registers: e = 256 in one chunk)
// still compile without spills at head dims beyond the examples' 64 and 128.
TEST(CudaEmit, DataClassifiedKernelsKeepTheirRegistersAtWideHeads) {
  std::string why;
  FreshCache cache;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  const Program doc_full = parse_source(R"(
program document_full(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], doc: i32[t]) {
  s = where(doc[m] == doc[n], sum(q * k, d) / sqrt(size(d)), -inf)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
)", "document_full.attn").at(0);
  const std::vector<std::tuple<Program, int64_t, int64_t>> cases = {
      {example("document"), 192, 192}, {example("document"), 256, 256},
      {example("document"), 128, 256}, {doc_full, 64, 256}, {doc_full, 192, 192}};
  for (const auto& [p, d, e] : cases) {
    CompileOptions opt;
    opt.target = Target::cuda_sm90;
    opt.sizes = {{"d", d}, {"e", e}};
    const Compiled compiled = compile_to_target(p, opt);
    ASSERT_EQ(compiled.sources.size(), 1u) << p.name;
    const Sm80Launch& la = compiled.lowered.kernels.at(0).tensor_core.launch;
    ASSERT_TRUE(la.persistent && la.walk_entry.empty()) << p.name << " d=" << d << " e=" << e;
    ASSERT_EQ(la.producer_regs, 88) << p.name;
    // the TMA build, and the cp.async one (calls whose tensors no map describes), whose
    // producer computes every K/V copy address and is held to the advisories only (it spills
    // at d = 128 with a producer of 88, as at 56 before: the rare path)
    for (const char* kv : {"", "-DFG_KV_CP_ASYNC"}) {
      std::vector<std::string> macros = {"--ptxas-options=-v", "-DFG_ONLY_MAIN"};
      if (*kv) macros.push_back(kv);
      Cubin c;
      ASSERT_NO_THROW(c = nvrtc_compile(compiled.sources[0], sm90a_options(macros)))
          << p.name << " d=" << d << " e=" << e << " " << kv;
      const std::string props = ptxas_properties(c.log, p.name + "_k0");
      ASSERT_FALSE(props.empty()) << c.log;
      if (!*kv)
        EXPECT_NE(props.find(" 0 bytes spill stores"), std::string::npos)
            << p.name << " d=" << d << " e=" << e << ": " << props;
      EXPECT_EQ(c.log.find("Potential Performance Loss"), std::string::npos) << c.log;
      // (ptxas warns C7508 where it ignores setmaxnreg)
      EXPECT_EQ(c.log.find("C7508"), std::string::npos) << c.log;
      EXPECT_EQ(c.log.find("setmaxnreg"), std::string::npos) << c.log;
    }
  }
}

// The other builds of each kernel (compile_cuda_cubin is the plain one): the tile-counting build
// of `flashgen profile` and the careful build that runs after a non-finite accumulator.
TEST_P(NvrtcExamples, TheTileCountingAndCarefulBuildsCompileForSm80AndSm90a) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  const std::string name = GetParam();
  Program p = example(name);
  // (cuda-sm90 for sm_90a: the wgmma Specs' careful build runs their shape by mma.sync)
  for (CudaBuild b : {CudaBuild::count_tiles, CudaBuild::careful})
    for (auto [target, arch] : {std::pair{Target::cuda_sm80, "sm_80"},
                                std::pair{Target::cuda_sm80, "sm_90a"},
                                std::pair{Target::cuda_sm90, "sm_90a"}}) {
      std::vector<std::string> cubins;
      ASSERT_NO_THROW(cubins = cuda_compile_build(p, target, heads(name, 64), arch, b))
          << name << " build " << static_cast<int>(b) << " " << arch;
      // (diff_attn on cuda-sm90: a kernel per softmax group)
      ASSERT_EQ(cubins.size(), name == "diff_attn" && target == Target::cuda_sm90 ? 2u : 1u);
      for (const std::string& c : cubins) EXPECT_EQ(c.substr(1, 3), "ELF");
    }
  // at d = 128 an unmasked kernel has a walking entry of its own: its builds compile too (the
  // full source holds every entry)
  CompileOptions opt;
  opt.target = Target::cuda_sm90;
  opt.sizes = heads(name, 128);
  const Compiled c = compile_to_target(p, opt);
  bool walks = false;
  for (const LoweredKernel& k : c.lowered.kernels)
    walks = walks || (k.path == LoweredKernel::Path::tensor_core &&
                      !k.tensor_core.launch.walk_entry.empty());
  if (!walks) return;
  for (CudaBuild b : {CudaBuild::count_tiles, CudaBuild::careful}) {
    std::vector<std::string> cubins;
    ASSERT_NO_THROW(cubins =
                        cuda_compile_build(p, Target::cuda_sm90, heads(name, 128), "sm_90a", b))
        << name << " build " << static_cast<int>(b) << " d=128";
    ASSERT_EQ(cubins.size(), c.sources.size());
    for (const std::string& cb : cubins) EXPECT_EQ(cb.substr(1, 3), "ELF");
  }
}

// The runtime compiles a tensor-core kernel's entry points in separate programs (FG_ONLY_MAIN:
// the full kernel and the combine kernel, at load; FG_ONLY_FEW: the few-rows kernel, and
// FG_ONLY_WALK: the walking kernel of an unmasked Hopper kernel, each at its first call);
// without a macro the source holds all of them (the ahead-of-time cubin). A Hopper
// kernel whose producer copies K/V by TMA also compiles with FG_KV_CP_ASYNC (the build for
// calls no tensor map describes), for every example.
TEST_P(NvrtcExamples, TheCpAsyncBuildOfTmaKernelsCompiles) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  const std::string name = GetParam();
  Program p = example(name);
  CompileOptions opt;
  opt.target = Target::cuda_sm90;
  opt.sizes = heads(name, 128);
  const Compiled c = compile_to_target(p, opt);
  for (size_t i = 0; i < c.sources.size(); ++i) {
    const LoweredKernel& k = c.lowered.kernels[i];
    if (k.path != LoweredKernel::Path::tensor_core || k.tensor_core.launch.tma.empty()) continue;
    const std::string bin =
        nvrtc_compile(c.sources[i], sm90a_options({"-DFG_ONLY_MAIN", "-DFG_KV_CP_ASYNC"})).bytes;
    EXPECT_EQ(bin.substr(1, 3), "ELF") << name;
    EXPECT_NE(bin.find(k.entry + '\0'), std::string::npos) << name;
  }
}

TEST(CudaEmit, EntryPointsCompileApartOrTogether) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  Program p = example("causal");
  const std::string src = emit_cuda(p, Target::cuda_sm90, {{"d", 64}, {"e", 64}});
  auto entries = [&](const char* macro) {
    const std::string bin =
        nvrtc_compile(src, sm90a_options(*macro ? std::vector<std::string>{macro}
                                                : std::vector<std::string>{}))
            .bytes;
    std::set<std::string> found;  // entry names as NUL-terminated symbols of the ELF
    for (const char* e : {"causal_k0", "causal_k0_few", "causal_k0_combine", "causal_k0_few_combine"})
      if (bin.find(std::string(e) + '\0') != std::string::npos) found.insert(e);
    return found;
  };
  using Set = std::set<std::string>;
  EXPECT_EQ(entries("-DFG_ONLY_MAIN"), (Set{"causal_k0", "causal_k0_combine"}));
  EXPECT_EQ(entries("-DFG_ONLY_FEW"), (Set{"causal_k0_few", "causal_k0_few_combine"}));
  EXPECT_EQ(entries(""),
            (Set{"causal_k0", "causal_k0_few", "causal_k0_combine", "causal_k0_few_combine"}));
  // an unmasked kernel has a walking build too (FG_ONLY_WALK: calls of short key loops), with
  // K/V by TMA or, for calls no tensor map describes, by cp.async
  const std::string vsrc =
      emit_cuda(example("vanilla"), Target::cuda_sm90, {{"d", 128}, {"e", 128}});
  auto ventries = [&](const std::vector<std::string>& macros) {
    const std::string bin = nvrtc_compile(vsrc, sm90a_options(macros)).bytes;
    std::set<std::string> found;
    for (const char* e : {"vanilla_k0", "vanilla_k0_few", "vanilla_k0_combine", "vanilla_k0_walk"})
      if (bin.find(std::string(e) + '\0') != std::string::npos) found.insert(e);
    return found;
  };
  EXPECT_EQ(ventries({"-DFG_ONLY_MAIN"}), (Set{"vanilla_k0", "vanilla_k0_combine"}));
  EXPECT_EQ(ventries({"-DFG_ONLY_WALK"}), (Set{"vanilla_k0_walk"}));
  EXPECT_EQ(ventries({"-DFG_ONLY_WALK", "-DFG_KV_CP_ASYNC"}), (Set{"vanilla_k0_walk"}));
  EXPECT_EQ(ventries({"-DFG_ONLY_FEW"}), (Set{"vanilla_k0_few"}));
  EXPECT_EQ(ventries({}), (Set{"vanilla_k0", "vanilla_k0_few", "vanilla_k0_combine",
                               "vanilla_k0_walk"}));
}

// A gather proved in range (ir/index_range.h) compiles both ways: unchecked (the plain build)
// and checked per element (FG_CHECK_GATHERS: the careful build, and builds for calls outside
// the proof's extent conditions).
TEST(CudaEmit, ProvedGathersCompileCheckedAndUnchecked) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  Program p = parse_source(R"(
program rel(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], table: f32[h, r]) {
  s = sum(q * k, d) + table[h, clamp(n - m + 64, 0, size(r) - 1)]
  out o: bf16[b, h, m, e] = sum(softmax(where(n <= m, s, -inf), n) * v, n)
}
)", "rel.attn").at(0);
  for (CudaBuild b : {CudaBuild::plain, CudaBuild::careful})
    for (auto [target, arch] : {std::pair{Target::cuda_sm80, "sm_80"},
                                std::pair{Target::cuda_sm90, "sm_90a"}}) {
      std::vector<std::string> cubins;
      ASSERT_NO_THROW(cubins = cuda_compile_build(p, target, {{"d", 64}, {"e", 64}}, arch, b))
          << arch;
      ASSERT_EQ(cubins.size(), 1u);
      EXPECT_EQ(cubins[0].substr(1, 3), "ELF");
    }
}

// A Spec whose checks read the scores (kChecksReadScores: the partial tile's score code only at
// real keys; Lower.ChecksThatReadScoresKeepTheScoreCodeAtRealKeys) compiles in every build on
// both targets, at 64 and 128 head columns.
TEST(CudaEmit, ChecksThatReadScoresCompileInEveryBuild) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  Program p = parse_source(R"(
program bucket(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], table: f32[u]) {
  s = sum(q * k, d)
  out o: bf16[b, h, m, e] = sum(softmax(where(n <= m, s + table[i32(s == 0.0) * 100], -inf), n) * v, n)
}
)", "bucket.attn").at(0);
  for (int64_t d : {64, 128})
    for (CudaBuild b : {CudaBuild::plain, CudaBuild::careful})
      for (auto [target, arch] : {std::pair{Target::cuda_sm80, "sm_80"},
                                  std::pair{Target::cuda_sm90, "sm_90a"}}) {
        CompileOptions opt;
        opt.target = target;
        opt.sizes = {{"d", d}, {"e", d}};
        ASSERT_NE(compile_to_target(p, opt).sources.at(0).find("kChecksReadScores = true"),
                  std::string::npos) << arch;
        std::vector<std::string> cubins;
        ASSERT_NO_THROW(cubins = cuda_compile_build(p, target, {{"d", d}, {"e", d}}, arch, b))
            << arch << " d=" << d;
        ASSERT_EQ(cubins.size(), 1u);
        EXPECT_EQ(cubins[0].substr(1, 3), "ELF");
      }
  // the template reads the flag (FG_OPTIONAL_FLAG falls back to false on a misspelled member):
  // the Spec's source with a static_assert on it compiles, that of a program without one not
  Program plain = parse_source(R"(
program plain(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  out o: bf16[b, h, m, e] = sum(softmax(sum(q * k, d), n) * v, n)
}
)", "plain.attn").at(0);
  for (const Program* prog : {&p, &plain}) {
    CompileOptions opt;
    opt.target = Target::cuda_sm90;
    opt.sizes = {{"d", 64}, {"e", 64}};
    const NvrtcOptions o = sm90a_options({"-DFG_ONLY_MAIN"});
    const std::string src = compile_to_target(*prog, opt).sources.at(0) +
                            "\nstatic_assert(fg::ChecksReadScoresOf<Spec>::value, \"flag\");\n";
    if (prog == &p)
      EXPECT_NO_THROW(nvrtc_compile(src, o));
    else
      EXPECT_ANY_THROW(nvrtc_compile(src, o));
  }
}

// The one element loop (Sm80Launch::keep_pass, clamp_keys): a mask that runs as a pass, one
// that reads a score (the score code keeps it: keep() sees no products), a clamped gather by a
// computed index under the mask, a divisor over the key dim and a plain group's mask compile in
// every build on both targets; the template reads both flags (a static_assert on each).
TEST(CudaEmit, MasksAsAPassAndClampedKeysCompileInEveryBuild) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  const std::vector<Program> programs = parse_source(R"(
program pass_doc(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], doc: i32[t]) {
  s = where(doc[m] == doc[n] and n <= m, sum(q * k, d) / sqrt(size(d)), -inf)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program score_mask(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = sum(q * k, d)
  out o: bf16[b, h, m, e] = sum(softmax(where(s > 0.0 and n <= m, s, -inf), n) * v, n)
}
program clamped(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], table: f32[u], w: i32[n]) {
  s = where(n <= m, sum(q * k, d) + table[m * 3 + n] + f32((m + n) % w[n]), -inf)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program plain_pass(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = sum(q * k, d)
  out o: f32[b, h, m, e] = sum(where(n <= m, sigmoid(s), 0.0) * v, n)
}
)", "pass.attn");
  struct Want { bool keep, clamp; };
  const Want want[] = {{true, false}, {false, false}, {true, true}, {true, false}};
  for (size_t i = 0; i < programs.size(); ++i) {
    const Program& p = programs[i];
    for (auto [target, arch] : {std::pair{Target::cuda_sm80, "sm_80"},
                                std::pair{Target::cuda_sm90, "sm_90a"}}) {
      CompileOptions opt;
      opt.target = target;
      opt.sizes = {{"d", 64}, {"e", 64}};
      const Compiled c = compile_to_target(p, opt);
      ASSERT_EQ(c.lowered.kernels.at(0).path, LoweredKernel::Path::tensor_core) << p.name;
      const Sm80Launch& la = c.lowered.kernels.at(0).tensor_core.launch;
      EXPECT_EQ(la.keep_pass, want[i].keep) << p.name;
      EXPECT_EQ(la.clamp_keys, want[i].clamp) << p.name;
      for (CudaBuild b : {CudaBuild::plain, CudaBuild::careful}) {
        std::vector<std::string> cubins;
        ASSERT_NO_THROW(cubins = cuda_compile_build(p, target, {{"d", 64}, {"e", 64}}, arch, b))
            << p.name << " " << arch;
        ASSERT_EQ(cubins.size(), 1u);
        EXPECT_EQ(cubins[0].substr(1, 3), "ELF");
      }
      if (target != Target::cuda_sm90) continue;
      const NvrtcOptions o = sm90a_options({"-DFG_ONLY_MAIN"});
      const std::string src = c.sources.at(0) + "\nstatic_assert(fg::KeepOf<Spec>::value == " +
                              (want[i].keep ? "true" : "false") +
                              " && fg::ClampKeysOf<Spec>::value == " +
                              (want[i].clamp ? "true" : "false") + ", \"flags\");\n";
      EXPECT_NO_THROW(nvrtc_compile(src, o)) << p.name;
    }
  }
}

// Every example with f16 and with f32 in place of bf16, and at head dims that are no multiple of 32 (padded
// tiles; d = 5 rows are not 16-byte aligned and load element by element), compiles for sm_90a
// on the tensor-core path.
TEST_P(NvrtcExamples, F16AndOddHeadDimsCompileOnTheTensorCorePath) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  const std::string name = GetParam();
  std::string text = testing::read_text_file(testing::source_path("examples/" + name + ".attn"));
  for (size_t at = text.find("bf16"); at != std::string::npos; at = text.find("bf16", at))
    text.replace(at, 4, "f16");
  const Program f16 = parse_source(text, name + ".attn").at(0);
  std::string text32 = text;  // f32 operands: split into bf16 pieces on the device
  for (size_t at = text32.find("f16"); at != std::string::npos; at = text32.find("f16", at))
    text32.replace(at, 3, "f32");
  const Program f32 = parse_source(text32, name + ".attn").at(0);
  const Program bf16 = example(name);
  // (80, 256): a padded head dim beside a value dim split across blocks (two accumulators
  // in diff_attn, so its chunks are whole and unpadded).
  for (auto [p, d, e] : {std::tuple<const Program*, int64_t, int64_t>{&f16, 64, 64},
                         {&f32, 64, 64}, {&bf16, 5, 7}, {&bf16, 40, 100}, {&bf16, 80, 256}}) {
    const Extents ext = {{"d", d}, {"e", e}};
    SCOPED_TRACE(p->name + " d=" + std::to_string(d) + " e=" + std::to_string(e));
    for (const CudaKernelPath& k : cuda_paths(*p, Target::cuda_sm90, ext))
      EXPECT_EQ(k.path, "tensor_core") << k.why;
    std::vector<std::string> cubins;
    ASSERT_NO_THROW(cubins = compile_cuda_cubins(*p, Target::cuda_sm90, ext));
    for (const std::string& c : cubins) EXPECT_EQ(c.substr(1, 3), "ELF");
  }
}

INSTANTIATE_TEST_SUITE_P(All, NvrtcExamples, ::testing::ValuesIn(testing::example_names()));

// Operands in bf16 pieces (f32 q, k, v) compile in every build, for sm_80 and sm_90a, with the
// split kernel beside the others; at an odd head dim too.
TEST(CudaEmit, OperandsInPiecesCompileInEveryBuild) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  Program p = parse_source(R"(
program causal32(q: f32[b, h, m, d], k: f32[b, h, n, d], v: f32[b, h, n, e]) {
  s = where(n <= m, sum(q * k, d) / sqrt(size(d)), -inf)
  out o: f32[b, h, m, e] = sum(softmax(s, n) * v, n)
  out lse: f32[b, h, m] = logsumexp(s, n)
}
)", "causal32.attn").at(0);
  for (auto [target, arch] : {std::pair{Target::cuda_sm80, "sm_80"},
                              std::pair{Target::cuda_sm90, "sm_90a"}})
    for (CudaBuild b : {CudaBuild::plain, CudaBuild::careful, CudaBuild::count_tiles}) {
      std::vector<std::string> cubins;
      ASSERT_NO_THROW(cubins = cuda_compile_build(p, target, {{"d", 128}, {"e", 128}}, arch, b))
          << arch;
      ASSERT_EQ(cubins.size(), 1u);
      EXPECT_EQ(cubins[0].substr(1, 3), "ELF");
    }
  std::vector<std::string> cubins;
  ASSERT_NO_THROW(cubins = compile_cuda_cubins(p, Target::cuda_sm90, {{"d", 40}, {"e", 72}}));
  for (const std::string& c : cubins) EXPECT_EQ(c.substr(1, 3), "ELF");
}

// Probabilities weighed before P.V (tests/programs/gates.attn): the plain and careful builds
// (the careful one adds the products of inf or NaN weights on the CUDA cores:
// add_nonfinite_weights) compile for sm_90a, a program of two groups of one running max also
// for sm_80, and a gate over f16 operands (bf16 pieces: the weighted probabilities are
// unbounded) in the careful build; a weight read from the score through a checked gather; the
// programs of values computed per key (tests/programs/value_sums.attn) and of score values
// computed once per key of a tile (tests/programs/key_values.attn); the variants of
// tests/programs/mixed_kinds.attn, masks_and_outputs.attn, partials.attn,
// after_attention.attn, groups.attn (kernels of three to five groups), scores_only.attn
// (kernels of no P.V accumulator) and score_dims.attn (scores over head dims of their own).
TEST(CudaEmit, WeightedProbabilitiesCompileInEveryBuild) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  const std::vector<Program> ps = parse_file(testing::source_path("tests/programs/gates.attn"));
  const Extents heads = {{"d", 64}, {"e", 64}};
  auto compiles = [&](const Program& p, Target target, const char* arch, CudaBuild b,
                      size_t kernels = 1) {
    std::vector<std::string> cubins;
    ASSERT_NO_THROW(cubins = cuda_compile_build(p, target, heads, arch, b))
        << p.name << " " << arch << " build " << static_cast<int>(b);
    ASSERT_EQ(cubins.size(), kernels) << p.name;
    for (const std::string& c : cubins) EXPECT_EQ(c.substr(1, 3), "ELF");
  };
  for (const Program& p : ps)
    for (CudaBuild b : {CudaBuild::plain, CudaBuild::careful})
      compiles(p, Target::cuda_sm90, "sm_90a", b);
  compiles(ps.at(4), Target::cuda_sm80, "sm_80", CudaBuild::careful);  // gated_and_not
  // values computed per key, distributed into plain P.V and row sums (value_sums.attn)
  for (const Program& p : parse_file(testing::source_path("tests/programs/value_sums.attn")))
    for (CudaBuild b : {CudaBuild::plain, CudaBuild::careful})
      compiles(p, Target::cuda_sm90, "sm_90a", b);
  // values computed once per key of a tile (key_values.attn), warp-specialized and on sm_80
  for (const Program& p : parse_file(testing::source_path("tests/programs/key_values.attn"))) {
    for (CudaBuild b : {CudaBuild::plain, CudaBuild::careful})
      compiles(p, Target::cuda_sm90, "sm_90a", b);
    compiles(p, Target::cuda_sm80, "sm_80", CudaBuild::plain);
  }
  // variants written to check the path's generality (mixed_kinds.attn, masks_and_outputs.attn,
  // partials.attn; the latter two on sm_80 too)
  for (const char* file : {"tests/programs/mixed_kinds.attn", "tests/programs/masks_and_outputs.attn",
                           "tests/programs/partials.attn", "tests/programs/after_attention.attn"})
    for (const Program& p : parse_file(testing::source_path(file))) {
      // (partials.attn: the attention's kernel and the one that reduces its partial;
      // after_attention.attn: the attention's kernel and the one reading its result)
      const size_t kernels = std::string(file).find("partials") != std::string::npos ||
                                     std::string(file).find("after_attention") != std::string::npos
                                 ? 2
                                 : 1;
      for (CudaBuild b : {CudaBuild::plain, CudaBuild::careful})
        compiles(p, Target::cuda_sm90, "sm_90a", b, kernels);
      if (std::string(file).find("mixed_kinds") == std::string::npos)
        compiles(p, Target::cuda_sm80, "sm_80", CudaBuild::plain, kernels);
    }
  // kernels of three to five groups, and three score maps (groups.attn: one kernel, or a
  // kernel per map where that pays); kernels of no accumulator (scores_only.attn)
  // (and at d = e = 32: keys in tiles of 32 for f32_five's pieces)
  std::vector<Program> grouped = parse_file(testing::source_path("tests/programs/groups.attn"));
  for (const Program& p : parse_file(testing::source_path("tests/programs/scores_only.attn")))
    grouped.push_back(p);
  for (const Program& p : grouped)
    for (const auto& [target, arch] : {std::pair{Target::cuda_sm90, "sm_90a"},
                                       std::pair{Target::cuda_sm80, "sm_80"}}) {
      CompileOptions o;
      o.target = target;
      o.sizes = heads;
      const size_t kernels = compile_to_target(p, o).sources.size();
      for (CudaBuild b : {CudaBuild::plain, CudaBuild::careful})
        compiles(p, target, arch, b, kernels);
      if (p.name == "f32_five") {
        std::vector<std::string> cubins;
        ASSERT_NO_THROW(cubins = cuda_compile_build(p, target, {{"d", 32}, {"e", 32}}, arch,
                                                    CudaBuild::plain))
            << arch;
        EXPECT_EQ(cubins.size(), 1u);
      }
    }
  // scores over head dims of their own (score_dims.attn): MLA's 128 and 64 in every build of
  // both targets, and a narrower score first (40 beside 128) on sm90
  for (const Program& p : parse_file(testing::source_path("tests/programs/score_dims.attn"))) {
    for (const auto& [target, arch] : {std::pair{Target::cuda_sm90, "sm_90a"},
                                       std::pair{Target::cuda_sm80, "sm_80"}}) {
      std::vector<std::string> cubins;
      for (CudaBuild b : {CudaBuild::plain, CudaBuild::careful}) {
        ASSERT_NO_THROW(cubins = cuda_compile_build(p, target, {{"d", 128}, {"r", 64}, {"e", 128}},
                                                    arch, b))
            << p.name << " " << arch;
        ASSERT_EQ(cubins.size(), 1u);
        EXPECT_EQ(cubins[0].substr(1, 3), "ELF");
      }
    }
    std::vector<std::string> cubins;
    ASSERT_NO_THROW(cubins = cuda_compile_build(p, Target::cuda_sm90,
                                                {{"d", 40}, {"r", 128}, {"e", 64}}, "sm_90a",
                                                CudaBuild::plain))
        << p.name;
    EXPECT_EQ(cubins.size(), 1u);
  }
  const Program f16 = parse_source(R"(
program gate16(q: f16[h, m, d], k: f16[h, n, d], v: f16[h, n, e], g: f32[n]) {
  out o: f16[h, m, e] = sum(softmax(sum(q * k, d), n) * g * v, n)
}
)", "gate16.attn").at(0);
  compiles(f16, Target::cuda_sm90, "sm_90a", CudaBuild::careful);
  // a weight that reads the score through a checked gather: held with the scores, computed at
  // real keys only (the check reads the products)
  const Program checked = parse_source(R"(
program wgather(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e], tbl: f32[t]) {
  s = sum(q * k, d)
  out o: f32[h, m, e] = sum(softmax(s, n) * tbl[i32(s)] * v, n)
}
)", "wgather.attn").at(0);
  CompileOptions opt;
  opt.target = Target::cuda_sm90;
  opt.sizes = heads;
  const Compiled c = compile_to_target(checked, opt);
  ASSERT_EQ(c.lowered.kernels.size(), 1u);
  const TensorCoreKernel& tc = c.lowered.kernels[0].tensor_core;
  ASSERT_EQ(c.lowered.kernels[0].path, LoweredKernel::Path::tensor_core) << c.lowered.kernels[0].why;
  EXPECT_TRUE(tc.launch.checks_read_scores);
  ASSERT_EQ(tc.groups.size(), 1u);
  EXPECT_TRUE(tc.groups[0].weight_reads_scores);
  for (CudaBuild b : {CudaBuild::plain, CudaBuild::careful})
    compiles(checked, Target::cuda_sm90, "sm_90a", b);
}

TEST(CudaEmit, WideValuesSplitIntoColumnChunks) {
  // diff_attn at d = 128, e = 256: two 256-wide accumulators do not fit the registers, so
  // blocks take 128-column chunks of e (a grid factor) and per-row outputs come from chunk 0.
  // vanilla at e = 256 keeps one chunk in the full kernel, while the few-rows kernel (one
  // warp) takes chunks of 128 of its own, with its own combine. Both compile for sm_90a.
  const Extents sizes = {{"d", 128}, {"e", 256}};
  CompileOptions o;
  o.target = Target::cuda_sm80;
  o.sizes = sizes;
  struct Case { Program p; int split, few_split; std::vector<std::string> printed; };
  Program diff = example("diff_attn"), van = example("vanilla");
  for (const Case& c :
       {Case{diff, 2, 2, {"kValueDim = 128", "kValueSplit = 2;", "if (ctx.e_begin != 0) return;"}},
        Case{van, 1, 2, {"kValueDim = 128, kValueSplit = 2;",
                         "_few_combine(const Params p) { fg::attn_combine_sm80<SpecFew>(p); }"}}}) {
    const Sm80Launch la = compile_program(c.p, o, "lower").lowered.kernels.at(0).tensor_core.launch;
    ASSERT_EQ(la.value_split, c.split) << c.p.name;
    ASSERT_EQ(la.few_value_split, c.few_split) << c.p.name;
    const std::string src = emit_cuda(c.p, Target::cuda_sm80, sizes);
    for (const std::string& line : c.printed)
      EXPECT_NE(src.find(line), std::string::npos) << c.p.name << ": " << line;
  }
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  for (const Program* p : {&diff, &van}) {
    std::string cubin = compile_cuda_cubin(*p, Target::cuda_sm80, sizes, "sm_90a");
    EXPECT_EQ(cubin.substr(1, 3), "ELF") << p->name;
  }
}

// Kernels per softmax cluster (lower/split_clusters.cpp) pass a cut value through an
// intermediate, which a tensor-core kernel writes as f32 (device_storage): a bf16 cut (rounded,
// stored as its value, not as bf16 bits) and one whose value dim is not innermost ([b, h, e, m])
// compile for sm_90a in every kernel of the plan; the first kernel's store converts to float
// and the second kernel preloads the cut (fg::PreOf) before its stores.
TEST(CudaEmit, CutValuesOfAnyTypeAndLayoutCompile) {
  const std::vector<Program> ps = {testing::source_program("bench/programs/bf16_cut.attn"),
                                   testing::source_program("bench/programs/cut_e_first.attn")};
  std::string why;
  const bool nvrtc = nvrtc_available(&why);
  for (const Program& p : ps) {
    CompileOptions opt;
    opt.target = Target::cuda_sm90;
    opt.sizes = {{"d", 128}, {"e", 256}};
    const Compiled c = compile_to_target(p, opt);
    ASSERT_EQ(c.sources.size(), 2u) << p.name;
    const int t = c.plan.materialized().at(0);
    const PlanBuffer& tmp = c.plan.buffers.at(t);
    EXPECT_EQ(tmp.type, DType::bf16) << p.name;
    ASSERT_EQ(c.lowered.storage.size(), c.plan.buffers.size());
    EXPECT_EQ(c.lowered.storage[t], DType::f32) << p.name;
    // the first kernel writes it as a float; no bf16 store of it
    const std::string b = "ctx.B" + std::to_string(t);
    EXPECT_NE(c.sources[0].find("    float* B" + std::to_string(t) + ";"), std::string::npos)
        << p.name;
    EXPECT_NE(c.sources[0].find("] = (float)("), std::string::npos) << p.name;
    EXPECT_EQ(c.sources[0].find("fg::store_bf16x2(&" + b), std::string::npos) << p.name;
    EXPECT_NE(c.sources[1].find("pre.x" + std::to_string(t) + "[j] = ((float)" + b + "["),
              std::string::npos)
        << p.name;
    if (!nvrtc) continue;
    for (const std::string& entry : compile_cuda_cubins(p, Target::cuda_sm90, opt.sizes, "sm_90a"))
      EXPECT_EQ(entry.substr(1, 3), "ELF") << p.name;
  }
  // three softmaxes: the last kernel computes (t1 + t2) from two intermediates before the
  // epilogue's own (a value of the prologue phase, printed into store())
  const Program three = testing::source_program("bench/programs/three_softmax.attn");
  CompileOptions opt;
  opt.target = Target::cuda_sm90;
  opt.sizes = {{"d", 64}, {"e", 64}};
  const Compiled c3 = compile_to_target(three, opt);
  ASSERT_EQ(c3.sources.size(), 3u);
  for (const LoweredKernel& k : c3.lowered.kernels)
    EXPECT_EQ(k.path, LoweredKernel::Path::tensor_core) << k.why;
  if (!nvrtc) GTEST_SKIP() << "no NVRTC: " << why;
  const std::vector<std::string> cubins = compile_cuda_cubins(three, Target::cuda_sm90, opt.sizes, "sm_90a");
  ASSERT_EQ(cubins.size(), 3u);
  for (const std::string& cb : cubins) EXPECT_EQ(cb.substr(1, 3), "ELF");
}

TEST(CudaEmit, OutputDimOrderIsFree) {
  // The grid follows the output's memory order ([h, b, m]), not the dims' declaration order.
  Program p = parse_source(
      "program t(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {\n"
      "  out o: bf16[h, m, b, e] = sum(softmax(sum(q * k, d), n) * v, n)\n}\n", "t.attn").at(0);
  std::string src;
  ASSERT_NO_THROW(src = emit_cuda(p, Target::cuda_sm80, {{"d", 64}, {"e", 64}}));
  EXPECT_NE(src.find("ctx.g0"), std::string::npos);  // b and h are both parallel
  EXPECT_NE(src.find("ctx.g1"), std::string::npos);
}

// The tensor-core stores divide by a group's row sum through the row's reciprocal (RowStats::
// rcp_l, once a row): `o / l` multiplies by it, `div_or_zero(o, l)` is fg_div0_r
// (0 where the reciprocal is infinite) -- softmax groups and plain ones (whose sums may be
// negative) alike, a group's own reciprocal each.
TEST(CudaEmit, StoresMultiplyByTheRowReciprocal) {
  const Program plain = parse_source(
      "program plain(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {\n"
      "  s = sum(q * k, d)\n"
      "  out o: bf16[b, h, m, e] = sum(s * v, n) / sum(s, n)\n}\n", "plain.attn").at(0);
  const std::vector<std::tuple<Program, std::vector<std::string>>> cases = {
      {example("vanilla"), {"fg_div0_r(((float)(oj[0])), st.rcp_l[0])"}},
      {plain, {"(((float)(oj[0])) * st.rcp_l[0])"}},
      {example("diff_attn"),
       {"fg_div0_r(((float)(oj[0])), st.rcp_l[0])", "fg_div0_r(((float)(oj[1])), st.rcp_l[1])"}}};
  for (const auto& [p, uses] : cases) {
    std::string src;
    ASSERT_NO_THROW(src = emit_cuda(p, Target::cuda_sm90, {{"d", 64}, {"e", 64}})) << p.name;
    const size_t at = src.find("static __device__ void store(const Ctx& ctx, int m, int e0, const float (&o)");
    ASSERT_NE(at, std::string::npos) << p.name;
    const std::string store = src.substr(at, src.find("\n  }\n", at) - at);
    for (const std::string& u : uses) EXPECT_NE(store.find(u), std::string::npos) << p.name << ":\n" << store;
    EXPECT_EQ(store.find("st.l["), std::string::npos) << p.name << ":\n" << store;
    EXPECT_EQ(store.find("fg_div0("), std::string::npos) << p.name << ":\n" << store;
  }
}

TEST(CudaEmit, OnlyInlineInputCodeIsHoisted) {
  // max(kb, n) is over parallel dims only but is a reduction of the key loop (the second
  // group's running max): it must stay in the loop, not move into make_ctx.
  Program p = parse_source(
      "program r1(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], kb: f32[b, h, n],"
      " w: f32[h]) {\n"
      "  s = sum(q * k, d) + kb * w\n"
      "  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)\n"
      "  out z: f32[b, h, m] = max(kb, n) + f32(m)\n}\n", "r1.attn").at(0);
  std::string src;
  ASSERT_NO_THROW(src = emit_cuda(p, Target::cuda_sm80, {{"d", 64}, {"e", 64}}));
  EXPECT_NE(src.find("st.mx[1]"), std::string::npos);
  EXPECT_NE(src.find("  // %"), std::string::npos);  // w[h] is hoisted into Ctx
}

TEST(CudaEmit, ExplainReportsTheLaunchShapeOrWhyNot) {
  CompileOptions opt;
  opt.target = Target::cuda_sm80;
  opt.sizes = {{"b", 4}, {"h", 16}, {"m", 4096}, {"n", 4096}, {"d", 128}, {"e", 256}};
  std::string text = explain(example("diff_attn"), opt);
  EXPECT_NE(text.find("value columns split in 2 chunks of 128"), std::string::npos) << text;
  EXPECT_NE(text.find("once per block: %"), std::string::npos) << text;  // lam
  nlohmann::json j = nlohmann::json::parse(explain_json(example("diff_attn"), opt));
  EXPECT_EQ(j["kernels"][0]["cuda"]["fits"], true);
  EXPECT_EQ(j["kernels"][0]["cuda"]["value_split"], 2);
  EXPECT_EQ(j["kernels"][0]["cuda"]["head_dims"]["e"], 256);
  // Without head dims, or for a program that does not fit: the element path and why.
  opt.sizes = {};
  EXPECT_NE(explain(example("causal"), opt).find("element path (256 threads per block, one block "
                                                 "per grid point): the extents of its head dims"),
            std::string::npos) << explain(example("causal"), opt);
  // (a contraction weighted along the head dim: no q.k product of the tensor cores)
  Program qw = parse_source(
      "program qw(q: bf16[m, d], k: bf16[n, d], v: bf16[n, e], w: f32[d]) {\n"
      "  s = sum(q * w * k, d)\n"
      "  out o: f32[m, e] = sum(softmax(s, n) * v, n)\n}\n", "qw.attn").at(0);
  opt.sizes = {{"d", 64}, {"e", 64}};
  nlohmann::json u = nlohmann::json::parse(explain_json(qw, opt));
  EXPECT_EQ(u["kernels"][0]["cuda"]["fits"], false);
  EXPECT_EQ(u["kernels"][0]["cuda"]["path"], "element");
  // Its workspace per block at these sizes: q rows, k and v tiles, scores, the accumulator and
  // the row statistics, in shared memory.
  EXPECT_GT(u["kernels"][0]["cuda"]["workspace_bytes"].get<int64_t>(), 16 * 64 * 4);
  EXPECT_EQ(u["kernels"][0]["cuda"]["workspace_in"], "shared");
  EXPECT_NE(explain(qw, opt).find(" bytes per block in shared memory): "), std::string::npos)
      << explain(qw, opt);
  EXPECT_NE(u["kernels"][0]["cuda"]["why"].get<std::string>().find("does not fit"),
            std::string::npos);
  // The CPU target reports no CUDA section.
  opt.target = Target::cpu;
  EXPECT_EQ(explain(qw, opt).find("cuda:"), std::string::npos);
}

TEST(CudaEmit, SmallHeadsTakeMoreBlocksPerSM) {
  // d = 32: 16 rows per warp and 5 blocks per SM (the element code dominates; measured in
  // bench/RESULTS.md) where the staged tiles fit 5 blocks (H100/H200's 228 KiB
  // per SM), else 4 blocks with them (an A100's 164 KiB: staging is worth more than a fifth
  // block); d = 64 keeps 32 rows per warp and 2 blocks.
  std::string evo = emit_cuda(example("evoformer_row"), Target::cuda_sm90, {{"d", 32}});
  EXPECT_NE(evo.find("kWarpMBlocks = 1, kBlockN = 64, kMinBlocks = 5"), std::string::npos);
  CompileOptions opt;
  opt.target = Target::cuda_sm90;
  opt.sizes = {{"d", 32}};
  EXPECT_NE(explain(example("evoformer_row"), opt).find("5 blocks per SM"), std::string::npos);
  std::string a100 = emit_cuda(example("evoformer_row"), Target::cuda_sm80, {{"d", 32}});
  EXPECT_NE(a100.find("kMinBlocks = 4"), std::string::npos);
  EXPECT_NE(a100.find("kNumStaged = 2"), std::string::npos);
  std::string doc = emit_cuda(example("document"), Target::cuda_sm80, {{"d", 64}, {"e", 64}});
  EXPECT_NE(doc.find("kWarpMBlocks = 2, kBlockN = 64, kMinBlocks = 2"), std::string::npos);
  // The block's parallel index splits in 32-bit arithmetic (the host bounds P by INT32_MAX).
  EXPECT_NE(evo.find("unsigned rem = (unsigned)par;"), std::string::npos);
  EXPECT_EQ(evo.find("int64_t rem"), std::string::npos);
}

TEST(CudaEmit, MaskDataIsBoundedPerTile) {
  // doc[m] and doc[n] in the mask: bounded by the values the tile reads (one warp pass each),
  // the rows' once per block (block_rows), the keys' at every classify call.
  std::string doc = emit_cuda(example("document"), Target::cuda_sm80, {{"d", 64}, {"e", 64}});
  EXPECT_NE(doc.find("fg::warp_range<int>([&](int i) { return (int)G"), std::string::npos);
  EXPECT_NE(doc.find(", m0, m1, ctx.r"), std::string::npos);
  EXPECT_NE(doc.find("static constexpr bool kBlockRows = true;"), std::string::npos);
  EXPECT_NE(doc.find(", n0, n1, r"), std::string::npos);
  CompileOptions opt;
  opt.target = Target::cuda_sm80;
  opt.sizes = {{"d", 64}, {"e", 64}};
  std::string text = explain(example("document"), opt);
  EXPECT_NE(text.find("bounded by the data each tile reads: %"), std::string::npos) << text;
  EXPECT_NE(text.find("(per tile of n)"), std::string::npos) << text;
  nlohmann::json j = nlohmann::json::parse(explain_json(example("document"), opt));
  EXPECT_EQ(j["kernels"][0]["mask_data_bounded_per_tile"].size(), 2u);
  // A gather over both the row and the key dim (a 2-D box per tile) stays unknown.
  Program p = parse_source(
      "program pm(q: bf16[m, d], k: bf16[n, d], v: bf16[n, e], keep: bool[m, n]) {\n"
      "  out o: f32[m, e] = sum(softmax(where(keep[m, n], sum(q * k, d), -inf), n) * v, n)\n"
      "}\n", "pm.attn").at(0);
  std::string pm = emit_cuda(p, Target::cuda_sm80, {{"d", 64}, {"e", 64}});
  EXPECT_NE(pm.find("fg::kTileEmpty"), std::string::npos);
  EXPECT_EQ(pm.find("warp_range"), std::string::npos);
}

TEST(CudaEmit, RowAndKeyGathersAreStagedWhileSharedMemoryAllows) {
  // evoformer_row: the pair bias pair[b, h, m, n] (a rows x keys tile) and the key mask
  // keep[b, s, n] (a keys tile) travel with K/V through shared memory. (cuda-sm90: an
  // H100/H200's shared memory; run_cuda uses the running device's.)
  CompileOptions opt;
  opt.target = Target::cuda_sm90;
  opt.sizes = {{"d", 32}};
  nlohmann::json j = nlohmann::json::parse(explain_json(example("evoformer_row"), opt));
  ASSERT_EQ(j["kernels"][0]["cuda"]["staged_gathers"].size(), 2u) << j.dump(2);
  EXPECT_NE(j["kernels"][0]["cuda"]["staged_gathers"][0].get<std::string>().find("pair["),
            std::string::npos);
  EXPECT_NE(explain(example("evoformer_row"), opt).find("staged through shared memory"),
            std::string::npos);
  std::string evo = emit_cuda(example("evoformer_row"), Target::cuda_sm90, {{"d", 32}});
  EXPECT_NE(evo.find("kNumStaged = 2"), std::string::npos);
  EXPECT_NE(evo.find("fg::staged_at<uint16_t>(tv.p[0]"), std::string::npos);
  // document: doc[n] is staged, doc[m] (one value per row) and the classifier's reads are not.
  std::string doc = emit_cuda(example("document"), Target::cuda_sm90, {{"d", 64}, {"e", 64}});
  EXPECT_NE(doc.find("kNumStaged = 1"), std::string::npos);
  EXPECT_NE(doc.find("fg::staged_at<int>(tv.p[0], fg::staged_pitch(4, tv.bn), 0, n - tv.n0)"),
            std::string::npos);
  // A computed index (bias[h, m, n - 1]) is not staged; w[n, m] is (plain indices in any
  // order), and so is a plain parameter over (h, m, n); at d = 128 with 32 rows per warp the
  // 128 x 64 tiles would cost a block per SM: not staged.
  Program p = parse_source(
      "program g(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e], bias: bf16[h, i, j],\n"
      "          w: bf16[j, i]) {\n"
      "  s = sum(q * k, d) + bias[h, m, clamp(n - 1, 0, size(n) - 1)] + w[n, m]\n"
      "  out o: f32[h, m, e] = sum(softmax(s, n) * v, n)\n}\n", "g.attn").at(0);
  std::string g64 = emit_cuda(p, Target::cuda_sm90, {{"d", 64}, {"e", 64}});
  EXPECT_NE(g64.find("kNumStaged = 1"), std::string::npos) << g64;
  EXPECT_NE(g64.find("staged_at<uint16_t>(tv.p[0]"), std::string::npos);
  // On an A100 (cuda-sm80: 164 KiB per SM) the 128 x 64 tile would cost a block: not staged.
  EXPECT_EQ(emit_cuda(p, Target::cuda_sm80, {{"d", 64}, {"e", 64}}).find("kNumStaged"),
            std::string::npos);
  Program b = parse_source(
      "program b(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e], bias: bf16[h, m, n]) {\n"
      "  out o: f32[h, m, e] = sum(softmax(sum(q * k, d) + bias, n) * v, n)\n}\n",
      "b.attn").at(0);
  EXPECT_NE(emit_cuda(b, Target::cuda_sm90, {{"d", 64}, {"e", 64}}).find("kNumStaged = 1"),
            std::string::npos);
  EXPECT_EQ(emit_cuda(b, Target::cuda_sm90, {{"d", 128}, {"e", 128}}).find("kNumStaged"),
            std::string::npos);
  // The same tile read through a gather by a non-plain index (size(n): out of range) is not
  // the staged tile: it stays a checked gather that reports the index.
  Program oob = parse_source(
      "program oob(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e], bias: bf16[h, m, n]) {\n"
      "  s = sum(q * k, d) + bias + bias[h, m, size(n)]\n"
      "  out o: f32[h, m, e] = sum(softmax(s, n) * v, n)\n}\n", "oob.attn").at(0);
  std::string o = emit_cuda(oob, Target::cuda_sm90, {{"d", 64}, {"e", 64}});
  EXPECT_NE(o.find("kNumStaged = 1"), std::string::npos) << o;
  EXPECT_NE(o.find("fg_report(ctx.err, 1"), std::string::npos);
  EXPECT_NE(o.find("+ ((float)((G3(ctx, "), std::string::npos) << o;
}

TEST(CudaEmit, StagedTilesFitTheDevicesSharedMemory) {
  // Staged tiles fit the shared memory of the device the kernel is for (run_cuda passes the
  // running device's; SmemBudget): at d = 96 the pair tile (2 x 18 KiB) fits an H100 but not
  // an sm_86 (99 KiB per block); at d = 256 not an A100 (163 KiB per block).
  Program b = parse_source(
      "program b(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e], pair: bf16[h, i, j]) {\n"
      "  out o: f32[h, m, e] = sum(softmax(sum(q * k, d) + pair[h, m, n], n) * v, n)\n}\n",
      "b.attn").at(0);
  CompileOptions copt;
  copt.target = Target::cuda_sm80;
  Plan plan = compile_program(b, copt).plan;
  const SmemBudget sm86{100 * 1024, 99 * 1024}, a100{164 * 1024, 163 * 1024},
      h100{228 * 1024, 227 * 1024};
  auto emit = [&](int64_t d, const SmemBudget& budget) {
    return lower_tensor_core(plan, 0, Target::cuda_sm80, {{"d", d}, {"e", d}}, budget).launch;
  };
  Sm80Launch l = emit(96, h100);
  EXPECT_EQ(l.staged.size(), 1u);
  EXPECT_LE(l.smem_bytes, h100.per_block);
  l = emit(96, sm86);
  EXPECT_TRUE(l.staged.empty());
  EXPECT_LE(l.smem_bytes, sm86.per_block);
  l = emit(256, a100);
  EXPECT_TRUE(l.staged.empty());
  EXPECT_LE(l.smem_bytes, a100.per_block);
}

TEST(CudaEmit, SourceDependsOnHeadDimsOnly) {
  // (no NVRTC needed: emission only)
  Program p = example("causal");
  std::string a = emit_cuda(p, Target::cuda_sm80, {{"d", 64}, {"e", 64}, {"m", 7}, {"n", 9}});
  std::string b = emit_cuda(p, Target::cuda_sm80, {{"d", 64}, {"e", 64}, {"m", 4096}});
  EXPECT_EQ(a, b);
  std::string c = emit_cuda(p, Target::cuda_sm80, {{"d", 128}, {"e", 128}});
  EXPECT_NE(a, c);
  // Derived tile classes, no pattern: the classifier is interval code over the mask.
  EXPECT_NE(a.find("fg::kTileEmpty"), std::string::npos);
  EXPECT_NE(a.find("m0"), std::string::npos);
}

// What the tensor-core template does not take is lowered to the element path, and the lowered
// kernel says why (the template's own reason).
std::string element_why(const Program& p, const Extents& sizes, bool strict = false) {
  CompileOptions o;
  o.target = Target::cuda_sm80;
  o.sizes = sizes;
  o.strict = strict;
  Compiled c = compile_to_target(p, o);
  EXPECT_EQ(c.lowered.kernels.size(), 1u);
  EXPECT_EQ(c.lowered.kernels[0].path, LoweredKernel::Path::element);
  EXPECT_NE(c.sources[0].find("CUDA element path"), std::string::npos);
  return c.lowered.kernels[0].why;
}

TEST(CudaEmit, UnfitProgramsTakeTheElementPathAndSayWhy) {
  // Nine groups beside one another (a softmax and eight counts over the key dim): their
  // weights of a key tile would not fit the registers even at 32 keys a tile. (Three -- a
  // softmax, a min and a max of another expression -- take the template:
  // Lower.EveryGroupOfAKernelIsOneOfItsTemplateGroups.)
  std::string counts;
  for (int i = 0; i < 8; ++i)
    counts += "  out c" + std::to_string(i) + ": f32[m] = sum(f32(sum(q * k, d) > " +
              std::to_string(i) + ".0), n)\n";
  Program p = parse_source(
      "program f(q: bf16[m, d], k: bf16[n, d], v: bf16[n, e]) {\n"
      "  out o: f32[m, e] = sum(softmax(sum(q * k, d), n) * v, n)\n" + counts + "}\n",
      "f.attn").at(0);
  const std::string why = element_why(p, {{"d", 64}, {"e", 64}}, /*strict=*/true);
  EXPECT_NE(why.find("does not fit the CUDA sm80 attention template"), std::string::npos) << why;
  EXPECT_NE(why.find("9 groups: their weights"), std::string::npos) << why;
  Program three = parse_source(
      "program f(q: bf16[m, d], k: bf16[n, d], v: bf16[n, e]) {\n"
      "  out o: f32[m, e] = sum(softmax(sum(q * k, d), n) * v, n)\n"
      "  out lo: f32[m] = min(sum(q * k, d), n)\n"
      "  out hi: f32[m] = max(tanh(sum(q * k, d)), n)\n}\n", "f.attn").at(0);
  CompileOptions o3;
  o3.target = Target::cuda_sm80;
  o3.sizes = {{"d", 64}, {"e", 64}};
  o3.strict = true;
  const Compiled c3 = compile_to_target(three, o3);
  ASSERT_EQ(c3.lowered.kernels.size(), 1u);
  EXPECT_EQ(c3.lowered.kernels[0].path, LoweredKernel::Path::tensor_core) << c3.lowered.kernels[0].why;
  EXPECT_EQ(c3.lowered.kernels[0].tensor_core.groups.size(), 3u);
  // A per-row norm of q (a reduction before the key loop) has no place in the template: in one
  // kernel (--strict) the element path; otherwise the norm runs in a kernel of its own
  // (Lower.HeadDimReductionsPerRowOrKeyRunInKernelsOfTheirOwn).
  Program qn = parse_source(
      "program qn(q: bf16[m, d], k: bf16[n, d], v: bf16[n, e]) {\n"
      "  s = sum(q / sqrt(sum(q * q, d) + 0.001) * k, d)\n"
      "  out o: f32[m, e] = sum(softmax(s, n) * v, n)\n}\n", "qn.attn").at(0);
  EXPECT_NE(element_why(qn, {{"d", 64}, {"e", 64}}, /*strict=*/true)
                .find("a reduction other than the key loop's"),
            std::string::npos);
  // Head dims past 256 (any extent up to it is padded to the tile).
  EXPECT_NE(element_why(example("vanilla"), {{"d", 300}, {"e", 64}}).find("1 to 256"),
            std::string::npos);
  // Integer operands (float ones of any type reach the tensor cores, in bf16 pieces where
  // needed: Lower.OperandsOfMixedTypesBecomeBf16Pieces).
  Program ints = parse_source(
      "program ints(q: i32[m, d], k: bf16[n, d], v: bf16[n, e]) {\n"
      "  out o: f32[m, e] = sum(softmax(sum(q * k, d), n) * v, n)\n}\n", "i.attn").at(0);
  EXPECT_NE(element_why(ints, {{"d", 64}, {"e", 64}}).find("'q' is i32; the tensor-core path takes float operands"),
            std::string::npos) << element_why(ints, {{"d", 64}, {"e", 64}});
}

}  // namespace
}  // namespace flashgen
