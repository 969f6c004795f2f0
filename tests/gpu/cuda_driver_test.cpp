// The CUDA driver layer. Without a GPU: cuda_available() says why and every call is a clear
// BackendError. With one (else SKIP): NVRTC -> module -> launch at odd sizes with poisoned
// outputs, dynamic shared memory above 48 KB, out-of-memory and wrong-arch errors, timing.
// In the GPU test binary, so scripts/gpu_check runs it on the GPU machine.
#include "runtime/cuda_driver.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "flashgen/error.h"
#include "runtime/nvrtc.h"
#include "runtime/runtime_test_util.h"

namespace flashgen {
namespace {

using testing_runtime::message_of;
using testing_runtime::TempCacheDir;

#define SKIP_WITHOUT_GPU()                                                  \
  do {                                                                      \
    std::string why;                                                        \
    if (!cuda_available(&why)) GTEST_SKIP() << "no CUDA GPU here: " << why; \
  } while (0)

const char* kKernels = R"(
extern "C" __global__ void saxpy(float a, const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
// Reverses x through dynamic shared memory (n floats, n <= smem / 4), one block.
extern "C" __global__ void reverse_smem(const float* x, float* y, int n) {
  extern __shared__ float buf[];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = x[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) y[i] = buf[n - 1 - i];
}
)";

TEST(CudaDriver, WithoutAGpuEveryCallIsAClearError) {
  std::string why;
  if (cuda_available(&why)) GTEST_SKIP() << "a GPU is present; this checks machines without one";
  EXPECT_FALSE(why.empty());
  for (const std::function<void()>& fn : std::vector<std::function<void()>>{
           [] { cuda_require(); }, [] { cuda_device_info(); }, [] { DeviceBuffer b(1024); },
           [] { CudaModule m("not a cubin"); }, [] { cuda_synchronize(); }, [] { CudaEvent e; }}) {
    std::string msg = message_of(fn);
    EXPECT_NE(msg.find("CUDA is unavailable"), std::string::npos) << msg;
    EXPECT_NE(msg.find(why), std::string::npos) << msg;
  }
}

TEST(CudaDriver, DeviceInfoIsSane) {
  SKIP_WITHOUT_GPU();
  const CudaDeviceInfo& info = cuda_device_info();
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.cc_major, 7);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GE(info.max_smem_per_block_optin, 48 * 1024);
  EXPECT_GE(info.max_smem_per_sm, info.max_smem_per_block_optin);
  EXPECT_GT(info.total_memory, std::size_t{1} << 30);
  std::size_t free_bytes = 0, total = 0;
  cuda_memory_info(&free_bytes, &total);
  EXPECT_GT(free_bytes, 0u);
  EXPECT_LE(free_bytes, total);
  EXPECT_EQ(cuda_device_arch(), cuda_arch_for(info.cc_major, info.cc_minor));
}

TEST(CudaDriver, SaxpyAtOddSizesWritesEveryElement) {
  SKIP_WITHOUT_GPU();
  TempCacheDir dir;
  NvrtcOptions opt;
  opt.arch = cuda_device_arch();
  CudaModule module(nvrtc_compile(kKernels, opt).bytes);
  CudaKernel saxpy = module.kernel("saxpy");
  CudaKernelInfo ki = saxpy.info();
  EXPECT_GT(ki.num_regs, 0);
  EXPECT_GE(ki.max_threads_per_block, 256);
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> u(-2, 2);
  for (long long n : {1LL, 7LL, 77LL, 1000LL, 1000003LL}) {
    std::vector<float> x(n), y(n);
    for (auto& v : x) v = u(rng);
    for (auto& v : y) v = u(rng);
    float a = u(rng);
    DeviceBuffer dx(n * sizeof(float)), dy(n * sizeof(float));
    dx.upload(x);
    dy.fill_u32(0x7fc00000u);  // NaN poison: a missed element would show
    std::vector<float> poisoned = dy.download_as<float>();
    EXPECT_TRUE(std::isnan(poisoned[n - 1]));
    dy.upload(y);
    DevicePtr px = dx.ptr(), py = dy.ptr();
    unsigned blocks = static_cast<unsigned>((n + 255) / 256);
    saxpy({blocks}, {256}, 0, nullptr, a, px, py, n);
    cuda_synchronize();
    std::vector<float> out = dy.download_as<float>();
    // The device contracts a * x + y into one FMA (one rounding, NVRTC's default), the host
    // rounds twice: near cancellation they differ by more than a few ulps of the result, never
    // by more than a rounding of the terms.
    for (long long i = 0; i < n; ++i) {
      const float want = a * x[i] + y[i];
      const float tol = 2.4e-7f * (std::fabs(a * x[i]) + std::fabs(y[i]));  // 2^-22
      ASSERT_NEAR(out[i], want, tol) << "n=" << n << " i=" << i;
    }
  }
}

TEST(CudaDriver, DynamicSharedMemoryAbove48KB) {
  SKIP_WITHOUT_GPU();
  TempCacheDir dir;
  NvrtcOptions opt;
  opt.arch = cuda_device_arch();
  CudaModule module(nvrtc_compile(kKernels, opt).bytes);
  CudaKernel rev = module.kernel("reverse_smem");
  const CudaDeviceInfo& info = cuda_device_info();
  std::size_t smem = std::min<std::size_t>(info.max_smem_per_block_optin, 100 * 1024);
  int n = static_cast<int>(smem / sizeof(float)) - 3;  // odd, not a multiple of the block
  std::vector<float> x(n);
  std::mt19937 rng(3);
  for (auto& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  DeviceBuffer dx(n * sizeof(float)), dy(n * sizeof(float));
  dx.upload(x);
  dy.fill_u32(0x7fc00000u);
  CudaStream stream;
  rev({1}, {128}, smem, stream.get(), dx.ptr(), dy.ptr(), n);
  stream.synchronize();
  std::vector<float> out = dy.download_as<float>();
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], x[n - 1 - i]) << i;
  // More than the device allows is refused with the numbers.
  std::string msg = message_of([&] {
    rev({1}, {128}, info.max_smem_per_block_optin + 1024, nullptr, dx.ptr(), dy.ptr(), n);
  });
  EXPECT_NE(msg.find(std::to_string(info.max_smem_per_block_optin)), std::string::npos) << msg;
}

TEST(CudaDriver, ErrorsAreClear) {
  SKIP_WITHOUT_GPU();
  TempCacheDir dir;
  const CudaDeviceInfo& info = cuda_device_info();
  // Out of memory: says how much was requested and how much is free.
  std::string oom = message_of([&] { DeviceBuffer huge(info.total_memory * 4); });
  EXPECT_NE(oom.find("out of device memory"), std::string::npos) << oom;
  EXPECT_NE(oom.find("requested"), std::string::npos) << oom;
  EXPECT_NE(oom.find("free"), std::string::npos) << oom;
  // A kernel that is not in the module.
  NvrtcOptions opt;
  opt.arch = cuda_device_arch();
  CudaModule module(nvrtc_compile(kKernels, opt).bytes);
  std::string missing = message_of([&] { module.kernel("no_such_kernel"); });
  EXPECT_NE(missing.find("no_such_kernel"), std::string::npos) << missing;
  EXPECT_NE(missing.find("CUDA_ERROR_NOT_FOUND"), std::string::npos) << missing;
  // Not a cubin at all.
  std::string garbage = message_of([] { CudaModule m(std::string(4096, 'x')); });
  EXPECT_NE(garbage.find("cuModuleLoadDataEx"), std::string::npos) << garbage;
  EXPECT_NE(garbage.find("CUDA_ERROR_"), std::string::npos) << garbage;
  // A cubin for another major architecture.
  const char* other = info.cc_major == 9 ? "sm_80" : info.cc_major == 8 ? "sm_90a" : nullptr;
  if (other) {
    NvrtcOptions o2;
    o2.arch = other;
    std::string wrong = message_of([&] { CudaModule m(nvrtc_compile(kKernels, o2).bytes); });
    EXPECT_NE(wrong.find("CUDA_ERROR_"), std::string::npos) << wrong;
  }
  // Copies outside the buffer.
  DeviceBuffer small(64);
  std::vector<char> host(128);
  EXPECT_NE(message_of([&] { small.upload(host.data(), 65); }).find("exceeds"), std::string::npos);
  EXPECT_NE(message_of([&] { small.download(host.data(), 8, 60); }).find("exceeds"),
            std::string::npos);
}

TEST(CudaDriver, TimingGivesAMedianOfWarmRuns) {
  SKIP_WITHOUT_GPU();
  TempCacheDir dir;
  NvrtcOptions opt;
  opt.arch = cuda_device_arch();
  CudaModule module(nvrtc_compile(kKernels, opt).bytes);
  CudaKernel saxpy = module.kernel("saxpy");
  long long n = 1 << 24;
  DeviceBuffer dx(n * sizeof(float)), dy(n * sizeof(float));
  dx.memset(0);
  dy.memset(0);
  DevicePtr px = dx.ptr(), py = dy.ptr();
  CudaStream stream;
  CudaTiming t = cuda_time(
      [&](CudaStreamHandle s) {
        saxpy({static_cast<unsigned>(n / 256)}, {256}, 0, s, 1.5f, px, py, n);
      },
      2, 9, stream.get());
  ASSERT_EQ(t.samples_ms.size(), 9u);
  EXPECT_GT(t.min_ms, 0);
  EXPECT_LE(t.min_ms, t.median_ms);
  EXPECT_LE(t.median_ms, t.max_ms);
  // 128 MiB of traffic: well under a second, and not implausibly fast (< 100 TB/s).
  EXPECT_LT(t.median_ms, 1000);
  EXPECT_GT(t.median_ms, 3.0 * n * 4 / 1e14 * 1e3);
}

}  // namespace
}  // namespace flashgen
