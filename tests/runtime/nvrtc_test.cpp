// NVRTC: cubins for sm_80 and sm_90a without a GPU, in-memory headers, the toolkit's headers,
// the disk cache (hits, corruption), and errors that carry NVRTC's log and the saved source.
#include "runtime/nvrtc.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "flashgen/error.h"
#include "runtime/compile_cache.h"
#include "runtime/runtime_test_util.h"

namespace flashgen {
namespace {

namespace fs = std::filesystem;
using testing_runtime::message_of;
using testing_runtime::TempCacheDir;

const char* kKernel = R"(
#include "scale.h"
extern "C" __global__ void saxpy(float a, const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] * kScale + y[i];
}
)";

bool is_cuda_elf(const std::string& bytes) {
  // ELF magic, and e_machine (offset 18, little endian) == EM_CUDA (190).
  return bytes.size() > 64 &&
         bytes.compare(0, 4,
                       "\x7f"
                       "ELF") == 0 &&
         static_cast<unsigned char>(bytes[18]) == 190 && bytes[19] == 0;
}

#define SKIP_WITHOUT_NVRTC()                                         \
  do {                                                               \
    std::string why;                                                 \
    if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why; \
  } while (0)

TEST(Nvrtc, ArchForComputeCapability) {
  EXPECT_EQ(cuda_arch_for(8, 0), "sm_80");
  EXPECT_EQ(cuda_arch_for(8, 6), "sm_86");
  EXPECT_EQ(cuda_arch_for(8, 9), "sm_89");
  EXPECT_EQ(cuda_arch_for(9, 0), "sm_90a");
  EXPECT_EQ(cuda_arch_for(12, 0), "sm_120");
}

TEST(Nvrtc, CompilesForSm80AndSm90aWithoutAGpu) {
  SKIP_WITHOUT_NVRTC();
  TempCacheDir dir;
  std::mt19937 rng(5);
  std::string header = "constexpr float kScale = " + std::to_string(1 + rng() % 9) + ".0f;\n";
  std::string keys[2];
  int i = 0;
  for (const char* arch : {"sm_80", "sm_90a"}) {
    NvrtcOptions opt;
    opt.arch = arch;
    opt.headers = {{"scale.h", header}};
    Cubin c = nvrtc_compile(kKernel, opt);
    EXPECT_TRUE(is_cuda_elf(c.bytes)) << arch;
    EXPECT_FALSE(c.from_cache);
    EXPECT_GT(c.compile_ms, 0) << arch;  // NVRTC's time, which profile reports per build
    EXPECT_EQ(c.arch, arch);
    // The second time comes from the disk cache, byte for byte, and costs NVRTC nothing.
    Cubin again = nvrtc_compile(kKernel, opt);
    EXPECT_TRUE(again.from_cache);
    EXPECT_EQ(again.compile_ms, 0);
    EXPECT_EQ(again.bytes, c.bytes);
    EXPECT_EQ(again.key, c.key);
    keys[i++] = c.key;
  }
  EXPECT_NE(keys[0], keys[1]);  // the arch is part of the key
}

TEST(Nvrtc, KeyCoversOptionsAndHeaders) {
  SKIP_WITHOUT_NVRTC();
  TempCacheDir dir;
  NvrtcOptions base;
  base.headers = {{"scale.h", "constexpr float kScale = 2.0f;\n"}};
  Cubin a = nvrtc_compile(kKernel, base);
  NvrtcOptions fast = base;
  fast.options.push_back("--use_fast_math");
  Cubin b = nvrtc_compile(kKernel, fast);
  EXPECT_NE(a.key, b.key);
  EXPECT_FALSE(b.from_cache);
  NvrtcOptions other_header = base;
  other_header.headers = {{"scale.h", "constexpr float kScale = 3.0f;\n"}};
  Cubin c = nvrtc_compile(kKernel, other_header);
  EXPECT_NE(a.key, c.key);
  EXPECT_FALSE(c.from_cache);
}

TEST(Nvrtc, ToolkitHeadersAreAvailable) {
  SKIP_WITHOUT_NVRTC();
  TempCacheDir dir;
  const char* src = R"(
#include <cuda_bf16.h>
#include <cuda_fp16.h>
extern "C" __global__ void cvt(const float* x, __nv_bfloat16* y, __half* z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { y[i] = __float2bfloat16(x[i]); z[i] = __float2half(x[i]); }
}
)";
  for (const char* arch : {"sm_80", "sm_90a"}) {
    NvrtcOptions opt;
    opt.arch = arch;
    EXPECT_TRUE(is_cuda_elf(nvrtc_compile(src, opt).bytes)) << arch;
  }
  EXPECT_FALSE(nvrtc_cuda_include_dir().empty());
}

TEST(Nvrtc, CorruptCacheEntryIsRebuilt) {
  SKIP_WITHOUT_NVRTC();
  TempCacheDir dir;
  NvrtcOptions opt;
  opt.headers = {{"scale.h", "constexpr float kScale = 5.0f;\n"}};
  Cubin first = nvrtc_compile(kKernel, opt);
  std::string path = *cache_lookup(first.key, ".cubin");
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  Cubin second = nvrtc_compile(kKernel, opt);
  EXPECT_FALSE(second.from_cache);
  EXPECT_EQ(second.bytes, first.bytes);
  EXPECT_TRUE(nvrtc_compile(kKernel, opt).from_cache);
}

TEST(Nvrtc, FailingKernelGivesTheLogAndTheSavedSource) {
  SKIP_WITHOUT_NVRTC();
  TempCacheDir dir;
  const std::string bad =
      "extern \"C\" __global__ void broken(float* y) { y[0] = not_declared_anywhere; }\n";
  for (const char* arch : {"sm_80", "sm_90a"}) {
    NvrtcOptions opt;
    opt.arch = arch;
    std::string msg = message_of([&] { nvrtc_compile(bad, opt); });
    EXPECT_NE(msg.find("not_declared_anywhere"), std::string::npos) << msg;  // NVRTC's log
    EXPECT_NE(msg.find("is undefined"), std::string::npos) << msg;
    EXPECT_NE(msg.find(arch), std::string::npos) << msg;
    size_t at = msg.find("generated source saved at ");
    ASSERT_NE(at, std::string::npos) << msg;
    std::string path = msg.substr(at + std::string("generated source saved at ").size());
    path = path.substr(0, path.find('\n'));
    EXPECT_EQ(read_file_bytes(path), bad);
  }
  // A missing in-memory header is reported by name.
  std::string msg = message_of([] { nvrtc_compile(kKernel); });
  EXPECT_NE(msg.find("scale.h"), std::string::npos) << msg;
}

// nvrtc_compile_each compiles several programs at once (a thread each): every cubin comes back
// in its job's place, as the same bytes one nvrtc_compile of that job gives (from the cache
// after), and a failing job is thrown, by its own log, after the others have compiled (each
// is in the cache then).
TEST(Nvrtc, SeveralProgramsCompileAtOnce) {
  SKIP_WITHOUT_NVRTC();
  TempCacheDir dir;
  std::vector<std::string> sources;
  for (int i = 0; i < 4; ++i)
    sources.push_back("extern \"C\" __global__ void job_kernel_" + std::to_string(i) +
                      "(float* y) { y[threadIdx.x] *= " + std::to_string(i + 2) + ".0f; }\n");
  std::vector<NvrtcJob> jobs;
  for (const std::string& s : sources) {
    NvrtcOptions opt;
    opt.arch = jobs.size() % 2 ? "sm_90a" : "sm_80";
    jobs.push_back({s, opt});
  }
  const std::vector<Cubin> cubins = nvrtc_compile_each(jobs);
  ASSERT_EQ(cubins.size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(is_cuda_elf(cubins[i].bytes)) << i;
    EXPECT_FALSE(cubins[i].from_cache) << i;
    EXPECT_EQ(cubins[i].arch, jobs[i].options.arch) << i;
    for (size_t j = 0; j < jobs.size(); ++j)  // its own entry, no other
      EXPECT_EQ(cubins[i].bytes.find("job_kernel_" + std::to_string(j)) != std::string::npos, i == j)
          << i << " " << j;
    const Cubin one = nvrtc_compile(jobs[i].source, jobs[i].options);
    EXPECT_TRUE(one.from_cache) << i;
    EXPECT_EQ(one.bytes, cubins[i].bytes) << i;
  }
  EXPECT_TRUE(nvrtc_compile_each({}).empty());
  const std::string bad = "extern \"C\" __global__ void broken(float* y) { y[0] = nowhere_k2; }\n";
  std::vector<NvrtcJob> failing = jobs;
  failing[2].source = bad;
  failing[3].options.options.push_back("-DFRESH");  // a new key: compiled now, beside the failure
  const std::string msg = message_of([&] { nvrtc_compile_each(failing); });
  EXPECT_NE(msg.find("nowhere_k2"), std::string::npos) << msg;
  EXPECT_TRUE(nvrtc_compile(failing[3].source, failing[3].options).from_cache);
}

TEST(Nvrtc, UnsupportedArchIsAClearError) {
  SKIP_WITHOUT_NVRTC();
  TempCacheDir dir;
  for (const char* arch : {"sm_10", "compute_80", "ampere", ""}) {
    NvrtcOptions opt;
    opt.arch = arch;
    opt.headers = {{"scale.h", "constexpr float kScale = 1.0f;\n"}};
    std::string msg = message_of([&] { nvrtc_compile(kKernel, opt); });
    EXPECT_NE(msg.find("cannot compile for '" + std::string(arch) + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sm_80"), std::string::npos) << msg;
  }
}

#ifndef FLASHGEN_HAVE_CUDA
TEST(Nvrtc, WithoutTheToolkitEveryCallSaysSo) {
  std::string why;
  EXPECT_FALSE(nvrtc_available(&why));
  EXPECT_NE(why.find("without the CUDA toolkit"), std::string::npos);
  std::string msg = message_of([] { nvrtc_compile("__global__ void k() {}"); });
  EXPECT_NE(msg.find("without the CUDA toolkit"), std::string::npos) << msg;
}
#endif

}  // namespace
}  // namespace flashgen
