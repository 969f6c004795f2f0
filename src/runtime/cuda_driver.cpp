// The CUDA driver API through dlopen: see cuda_driver.h.
// Tests: tests/gpu/cuda_driver_test.cpp.
#include "runtime/cuda_driver.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "flashgen/error.h"
#include "runtime/nvrtc.h"

#ifdef FLASHGEN_HAVE_CUDA
#include <cuda.h>
#include <dlfcn.h>
#endif

namespace flashgen {

#ifndef FLASHGEN_HAVE_CUDA

namespace {
const char* kNoCuda =
    "CUDA is unavailable: flashgen was built without the CUDA toolkit (install it and re-run "
    "CMake so find_package(CUDAToolkit) finds it)";
[[noreturn]] void no_cuda() { throw BackendError(kNoCuda); }
}  // namespace

bool cuda_available(std::string* why) {
  if (why) *why = kNoCuda;
  return false;
}
void cuda_require() { no_cuda(); }
const CudaDeviceInfo& cuda_device_info() { no_cuda(); }
std::string cuda_device_arch() { no_cuda(); }
void cuda_memory_info(std::size_t*, std::size_t*) { no_cuda(); }
void cuda_synchronize() { no_cuda(); }
struct CudaKernel::State {};
struct CudaModule::Handle {};
CudaKernelInfo CudaKernel::info() const { no_cuda(); }
void CudaKernel::launch(Dim3, Dim3, std::size_t, CudaStreamHandle, void**) const { no_cuda(); }
CudaModule::CudaModule(std::string_view) { no_cuda(); }
CudaKernel CudaModule::kernel(const std::string&) const { no_cuda(); }
DeviceBuffer::DeviceBuffer(std::size_t) { no_cuda(); }
DeviceBuffer::~DeviceBuffer() = default;
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), size_(o.size_) {
  o.ptr_ = 0;
  o.size_ = 0;
}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(ptr_, o.ptr_);
  std::swap(size_, o.size_);
  return *this;
}
void DeviceBuffer::release() noexcept {}
void DeviceBuffer::upload(const void*, std::size_t, std::size_t) { no_cuda(); }
void DeviceBuffer::download(void*, std::size_t, std::size_t) const { no_cuda(); }
void DeviceBuffer::memset(std::uint8_t) { no_cuda(); }
void DeviceBuffer::fill_u32(std::uint32_t) { no_cuda(); }
CudaStream::CudaStream() { no_cuda(); }
CudaStream::~CudaStream() = default;
void CudaStream::synchronize() const { no_cuda(); }
CudaEvent::CudaEvent() { no_cuda(); }
CudaEvent::~CudaEvent() = default;
void CudaEvent::record(CudaStreamHandle) { no_cuda(); }
void CudaEvent::synchronize() const { no_cuda(); }
float CudaEvent::elapsed_ms_since(const CudaEvent&) const { no_cuda(); }
CudaTiming cuda_time(const std::function<void(CudaStreamHandle)>&, int, int, CudaStreamHandle) {
  no_cuda();
}
DevicePtr cuda_alloc_async(std::size_t, CudaStreamHandle) { no_cuda(); }
void cuda_free_async(DevicePtr, CudaStreamHandle) { no_cuda(); }
CudaTensorMap cuda_tensor_map_16bit(DevicePtr, int, const std::uint64_t*, const std::uint64_t*,
                                    const std::uint32_t*, bool) {
  no_cuda();
}

#else  // FLASHGEN_HAVE_CUDA

namespace {

std::string format_bytes(std::size_t bytes) {
  char buf[64];
  if (bytes >= (1ull << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  } else if (bytes >= (1ull << 20)) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1ull << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%zu bytes", bytes);
  }
  return std::string(buf) + (bytes >= (1ull << 20) ? " (" + std::to_string(bytes) + " bytes)" : "");
}

// Every driver entry point flashgen uses. The names go through cuda.h's macros (cuMemAlloc ->
// cuMemAlloc_v2), so FG_STR gives the exported symbol that matches the declared signature.
#define FG_STR2(x) #x
#define FG_STR(x) FG_STR2(x)
// clang-format off
#define FG_CU_FUNCTIONS(X) \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount) \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem) \
  X(cuDevicePrimaryCtxRetain) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxSynchronize) \
  X(cuModuleLoadDataEx) X(cuModuleUnload) X(cuModuleGetFunction) X(cuFuncGetAttribute) \
  X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuMemAlloc) X(cuMemFree) X(cuMemGetInfo) \
  X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemsetD8) X(cuMemsetD32) X(cuStreamCreate) \
  X(cuStreamDestroy) X(cuStreamSynchronize) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) \
  X(cuEventSynchronize) X(cuEventElapsedTime) X(cuMemAllocAsync) X(cuMemFreeAsync)
// clang-format on

struct Api {
#define FG_MEMBER(name) decltype(&::name) name = nullptr;
  FG_CU_FUNCTIONS(FG_MEMBER)
#undef FG_MEMBER
  // Optional (drivers of CUDA 12 and later): only the sm90 tile operations' tensor maps need it.
  decltype(&::cuTensorMapEncodeTiled) cuTensorMapEncodeTiled = nullptr;
  decltype(&::cuThreadExchangeStreamCaptureMode) cuThreadExchangeStreamCaptureMode = nullptr;
};

struct Driver {
  bool ok = false;
  std::string why;  // when !ok
  Api api;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CudaDeviceInfo info;
};

std::string result_text(const Api& api, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(r, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(r, &text);
  std::string out = name ? name : "CUDA error " + std::to_string(static_cast<int>(r));
  if (text) out += std::string(" (") + text + ")";
  return out;
}

// Loads the driver, initializes device 0 and retains its primary context; never throws.
void init(Driver& d) {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = ::dlerror();
    d.why = std::string(
                "the NVIDIA driver library libcuda.so.1 could not be loaded (is an NVIDIA "
                "driver installed?): ") +
            (e ? e : "unknown error");
    return;
  }
#define FG_LOAD(name)                                                                              \
  d.api.name = reinterpret_cast<decltype(d.api.name)>(::dlsym(lib, FG_STR(name)));                 \
  if (!d.api.name) {                                                                               \
    d.why = "the NVIDIA driver lacks " FG_STR(name) " (driver older than CUDA " +                  \
            std::to_string(CUDA_VERSION / 1000) + "." + std::to_string(CUDA_VERSION % 1000 / 10) + \
            "?)";                                                                                  \
    return;                                                                                        \
  }
  FG_CU_FUNCTIONS(FG_LOAD)
#undef FG_LOAD
  d.api.cuTensorMapEncodeTiled = reinterpret_cast<decltype(d.api.cuTensorMapEncodeTiled)>(
      ::dlsym(lib, "cuTensorMapEncodeTiled"));
  d.api.cuThreadExchangeStreamCaptureMode =
      reinterpret_cast<decltype(d.api.cuThreadExchangeStreamCaptureMode)>(
          ::dlsym(lib, "cuThreadExchangeStreamCaptureMode"));
  const Api& a = d.api;
  auto fail = [&](const char* what, CUresult r) {
    d.why = std::string(what) + " failed: " + result_text(a, r);
  };
  if (CUresult r = a.cuInit(0); r != CUDA_SUCCESS) return fail("cuInit", r);
  int count = 0;
  if (CUresult r = a.cuDeviceGetCount(&count); r != CUDA_SUCCESS) {
    return fail("cuDeviceGetCount", r);
  }
  if (count == 0) {
    d.why = "no CUDA device is visible (check CUDA_VISIBLE_DEVICES)";
    return;
  }
  if (CUresult r = a.cuDeviceGet(&d.device, 0); r != CUDA_SUCCESS) return fail("cuDeviceGet", r);
  if (CUresult r = a.cuDevicePrimaryCtxRetain(&d.context, d.device); r != CUDA_SUCCESS) {
    return fail("cuDevicePrimaryCtxRetain", r);
  }
  CudaDeviceInfo& info = d.info;
  char name[256] = {};
  a.cuDeviceGetName(name, sizeof name, d.device);
  info.name = name;
  auto attr = [&](CUdevice_attribute at) {
    int v = 0;
    a.cuDeviceGetAttribute(&v, at, d.device);
    return v;
  };
  info.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  info.max_smem_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  info.max_smem_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  info.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  info.clock_khz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  info.memory_clock_khz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  info.memory_bus_bits = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  a.cuDeviceTotalMem(&info.total_memory, d.device);
  a.cuDriverGetVersion(&info.driver_version);
  d.ok = true;
}

Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] { init(d); });
  return d;
}

// The API with device 0's primary context current on this thread; throws when unavailable.
const Api& api() {
  Driver& d = driver();
  if (!d.ok) throw BackendError("CUDA is unavailable: " + d.why);
  CUcontext current = nullptr;
  if (d.api.cuCtxGetCurrent(&current) != CUDA_SUCCESS || current != d.context) {
    CUresult r = d.api.cuCtxSetCurrent(d.context);
    if (r != CUDA_SUCCESS) {
      throw BackendError("cuCtxSetCurrent failed: " + result_text(d.api, r));
    }
  }
  return d.api;
}

void check(CUresult r, const std::string& what) {
  if (r != CUDA_SUCCESS) {
    throw BackendError("CUDA driver call " + what + " failed: " + result_text(driver().api, r));
  }
}

}  // namespace

bool cuda_available(std::string* why) {
  Driver& d = driver();
  if (!d.ok && why) *why = d.why;
  return d.ok;
}

void cuda_require() { api(); }

const CudaDeviceInfo& cuda_device_info() {
  api();
  return driver().info;
}

std::string cuda_device_arch() {
  const CudaDeviceInfo& info = cuda_device_info();
  return cuda_arch_for(info.cc_major, info.cc_minor);
}

void cuda_memory_info(std::size_t* free_bytes, std::size_t* total_bytes) {
  std::size_t f = 0, t = 0;
  check(api().cuMemGetInfo(&f, &t), "cuMemGetInfo");
  if (free_bytes) *free_bytes = f;
  if (total_bytes) *total_bytes = t;
}

void cuda_synchronize() { check(api().cuCtxSynchronize(), "cuCtxSynchronize"); }

// ---- modules and kernels ----

struct CudaModule::Handle {
  CUmodule module = nullptr;
  ~Handle() {
    if (module && driver().ok) driver().api.cuModuleUnload(module);
  }
};

struct CudaKernel::State {
  std::shared_ptr<CudaModule::Handle> module;  // keeps the module loaded
  CUfunction function = nullptr;
  std::mutex mutex;
  std::size_t dynamic_smem_limit = 48 * 1024;  // what the function currently allows
};

namespace {
// This thread's stream-capture mode set to relaxed for the guard's scope: loading a module (a
// kernel compiled at its first call, which may come while the caller captures a CUDA graph)
// is not an operation of the captured stream, and the default (global) mode would invalidate
// the capture for it. A no-op without the entry point.
class RelaxedCapture {
 public:
  explicit RelaxedCapture(const Api& a) : a_(a) {
    if (a_.cuThreadExchangeStreamCaptureMode) a_.cuThreadExchangeStreamCaptureMode(&mode_);
  }
  ~RelaxedCapture() {
    if (a_.cuThreadExchangeStreamCaptureMode) a_.cuThreadExchangeStreamCaptureMode(&mode_);
  }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  const Api& a_;
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
};
}  // namespace

CudaModule::CudaModule(std::string_view cubin) {
  const Api& a = api();
  const RelaxedCapture relaxed(a);
  std::string image(cubin);  // cuModuleLoadData wants its own (aligned, stable) copy
  char error_log[8192] = {};
  CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {error_log,
                    reinterpret_cast<void*>(static_cast<std::uintptr_t>(sizeof error_log))};
  auto handle = std::make_shared<Handle>();
  CUresult r = a.cuModuleLoadDataEx(&handle->module, image.data(), 2, opts, values);
  if (r != CUDA_SUCCESS) {
    handle->module = nullptr;
    const CudaDeviceInfo& info = driver().info;
    std::string msg = "cannot load a CUDA module (" + std::to_string(cubin.size()) + " bytes) on " +
                      info.name + " (" + cuda_arch_for(info.cc_major, info.cc_minor) +
                      "): cuModuleLoadDataEx failed: " + result_text(a, r);
    if (error_log[0]) msg += "\n" + std::string(error_log);
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU) {
      msg += "\nthe cubin was compiled for another architecture; compile for " +
             cuda_arch_for(info.cc_major, info.cc_minor);
    }
    throw BackendError(msg);
  }
  handle_ = std::move(handle);
}

CudaKernel CudaModule::kernel(const std::string& name) const {
  const Api& a = api();
  auto state = std::make_shared<CudaKernel::State>();
  state->module = handle_;
  const RelaxedCapture relaxed(a);
  CUresult r = a.cuModuleGetFunction(&state->function, handle_->module, name.c_str());
  if (r != CUDA_SUCCESS) {
    throw BackendError("kernel '" + name + "' not found in the CUDA module: " + result_text(a, r) +
                       " (is it declared extern \"C\" __global__?)");
  }
  CudaKernel k;
  k.state_ = std::move(state);
  k.name_ = name;
  return k;
}

CudaKernelInfo CudaKernel::info() const {
  const Api& a = api();
  CudaKernelInfo out;
  auto get = [&](CUfunction_attribute at, int* v, const char* what) {
    check(a.cuFuncGetAttribute(v, at, state_->function),
          std::string("cuFuncGetAttribute(") + what + ") of " + name_);
  };
  get(CU_FUNC_ATTRIBUTE_NUM_REGS, &out.num_regs, "NUM_REGS");
  get(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &out.static_smem_bytes, "SHARED_SIZE_BYTES");
  get(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, &out.local_bytes, "LOCAL_SIZE_BYTES");
  get(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &out.max_threads_per_block, "MAX_THREADS_PER_BLOCK");
  return out;
}

void CudaKernel::launch(Dim3 grid, Dim3 block, std::size_t dynamic_smem, CudaStreamHandle stream,
                        void** args) const {
  if (!state_) throw BackendError("launch of an empty CudaKernel");
  const Api& a = api();
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (dynamic_smem > state_->dynamic_smem_limit) {
      int static_smem = 0;
      check(
          a.cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, state_->function),
          "cuFuncGetAttribute(SHARED_SIZE_BYTES) of " + name_);
      const CudaDeviceInfo& info = driver().info;
      if (dynamic_smem + static_smem > static_cast<std::size_t>(info.max_smem_per_block_optin)) {
        throw BackendError("kernel " + name_ + " asks for " + std::to_string(dynamic_smem) +
                           " bytes of dynamic shared memory (+" + std::to_string(static_smem) +
                           " static); " + info.name + " allows at most " +
                           std::to_string(info.max_smem_per_block_optin) + " per block");
      }
      check(a.cuFuncSetAttribute(state_->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 static_cast<int>(dynamic_smem)),
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES=" + std::to_string(dynamic_smem) +
                ") of " + name_);
      state_->dynamic_smem_limit = dynamic_smem;
    }
  }
  CUresult r = a.cuLaunchKernel(state_->function, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                static_cast<unsigned>(dynamic_smem), static_cast<CUstream>(stream),
                                args, nullptr);
  if (r != CUDA_SUCCESS) {
    throw BackendError("launch of kernel " + name_ + " (grid " + std::to_string(grid.x) + "x" +
                       std::to_string(grid.y) + "x" + std::to_string(grid.z) + ", block " +
                       std::to_string(block.x) + "x" + std::to_string(block.y) + "x" +
                       std::to_string(block.z) + ", dynamic smem " + std::to_string(dynamic_smem) +
                       ") failed: " + result_text(a, r));
  }
}

// ---- device memory ----

namespace {
// The error of an allocation the device could not make: what was asked, what is free.
BackendError out_of_memory(std::size_t bytes) {
  std::size_t free_bytes = 0, total = 0;
  api().cuMemGetInfo(&free_bytes, &total);
  return BackendError("out of device memory: requested " + format_bytes(bytes) + ", " +
                      format_bytes(free_bytes) + " free of " + format_bytes(total) + " on " +
                      driver().info.name);
}
}  // namespace

DeviceBuffer::DeviceBuffer(std::size_t bytes) {
  const Api& a = api();
  if (bytes == 0) return;
  CUdeviceptr p = 0;
  CUresult r = a.cuMemAlloc(&p, bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) throw out_of_memory(bytes);
  check(r, "cuMemAlloc(" + std::to_string(bytes) + " bytes)");
  ptr_ = p;
  size_ = bytes;
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), size_(o.size_) {
  o.ptr_ = 0;
  o.size_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    release();
    ptr_ = o.ptr_;
    size_ = o.size_;
    o.ptr_ = 0;
    o.size_ = 0;
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  // Errors are ignored: a destructor cannot throw, and at process exit the driver may be gone.
  if (ptr_ && driver().ok) driver().api.cuMemFree(ptr_);
  ptr_ = 0;
  size_ = 0;
}

DevicePtr cuda_alloc_async(std::size_t bytes, CudaStreamHandle stream) {
  if (bytes == 0) return 0;
  const Api& a = api();
  CUdeviceptr p = 0;
  CUresult r = a.cuMemAllocAsync(&p, bytes, static_cast<CUstream>(stream));
  if (r == CUDA_ERROR_OUT_OF_MEMORY) throw out_of_memory(bytes);
  check(r, "cuMemAllocAsync(" + std::to_string(bytes) + " bytes)");
  return p;
}

void cuda_free_async(DevicePtr p, CudaStreamHandle stream) {
  if (p) check(api().cuMemFreeAsync(p, static_cast<CUstream>(stream)), "cuMemFreeAsync");
}

CudaTensorMap cuda_tensor_map_16bit(DevicePtr base, int rank, const std::uint64_t* dims,
                                    const std::uint64_t* strides_bytes, const std::uint32_t* box,
                                    bool swizzle128) {
  static_assert(sizeof(CudaTensorMap) == sizeof(CUtensorMap), "CUtensorMap is 128 bytes");
  if (rank < 1 || rank > 5) throw BackendError("a tensor map takes 1 to 5 dims");
  if (!api().cuTensorMapEncodeTiled)
    throw BackendError("the NVIDIA driver lacks cuTensorMapEncodeTiled (TMA needs a driver of "
                       "CUDA 12 or later)");
  CUtensorMap m;
  cuuint64_t gdim[5], gstr[4];
  cuuint32_t bx[5], es[5];
  for (int i = 0; i < rank; ++i) {
    gdim[i] = dims[i];
    bx[i] = box[i];
    es[i] = 1;
    if (i > 0) gstr[i - 1] = strides_bytes[i - 1];
  }
  check(api().cuTensorMapEncodeTiled(
            &m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, static_cast<cuuint32_t>(rank),
            reinterpret_cast<void*>(base), gdim, gstr, bx, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
            CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
        "cuTensorMapEncodeTiled");
  CudaTensorMap out;
  std::memcpy(out.words, &m, sizeof m);
  return out;
}

namespace {
void check_range(std::size_t size, std::size_t bytes, std::size_t offset, const char* what) {
  if (offset > size || bytes > size - offset) {
    throw BackendError(std::string("DeviceBuffer::") + what + " of " + std::to_string(bytes) +
                       " bytes at offset " + std::to_string(offset) + " exceeds the buffer (" +
                       std::to_string(size) + " bytes)");
  }
}
}  // namespace

void DeviceBuffer::upload(const void* host, std::size_t bytes, std::size_t offset) {
  check_range(size_, bytes, offset, "upload");
  if (bytes == 0) return;
  check(api().cuMemcpyHtoD(ptr_ + offset, host, bytes), "cuMemcpyHtoD");
  check(api().cuStreamSynchronize(nullptr), "cuStreamSynchronize");  // (the header says why)
}

void DeviceBuffer::download(void* host, std::size_t bytes, std::size_t offset) const {
  check_range(size_, bytes, offset, "download");
  if (bytes == 0) return;
  check(api().cuMemcpyDtoH(host, ptr_ + offset, bytes), "cuMemcpyDtoH");
}

void DeviceBuffer::memset(std::uint8_t value) {
  if (size_ == 0) return;
  check(api().cuMemsetD8(ptr_, value, size_), "cuMemsetD8");
  check(api().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
}

void DeviceBuffer::fill_u32(std::uint32_t pattern) {
  if (size_ % 4 != 0) {
    throw BackendError("DeviceBuffer::fill_u32 on a buffer of " + std::to_string(size_) +
                       " bytes (not a multiple of 4)");
  }
  if (size_ == 0) return;
  check(api().cuMemsetD32(ptr_, pattern, size_ / 4), "cuMemsetD32");
  check(api().cuStreamSynchronize(nullptr), "cuStreamSynchronize");
}

// ---- streams, events, timing ----

CudaStream::CudaStream() {
  CUstream s = nullptr;
  check(api().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  handle_ = s;
}

CudaStream::~CudaStream() {
  if (handle_ && driver().ok) driver().api.cuStreamDestroy(static_cast<CUstream>(handle_));
}

void CudaStream::synchronize() const {
  check(api().cuStreamSynchronize(static_cast<CUstream>(handle_)), "cuStreamSynchronize");
}

CudaEvent::CudaEvent() {
  CUevent e = nullptr;
  check(api().cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  handle_ = e;
}

CudaEvent::~CudaEvent() {
  if (handle_ && driver().ok) driver().api.cuEventDestroy(static_cast<CUevent>(handle_));
}

void CudaEvent::record(CudaStreamHandle stream) {
  check(api().cuEventRecord(static_cast<CUevent>(handle_), static_cast<CUstream>(stream)),
        "cuEventRecord");
}

void CudaEvent::synchronize() const {
  check(api().cuEventSynchronize(static_cast<CUevent>(handle_)), "cuEventSynchronize");
}

float CudaEvent::elapsed_ms_since(const CudaEvent& start) const {
  float ms = 0;
  check(api().cuEventElapsedTime(&ms, static_cast<CUevent>(start.handle_),
                                 static_cast<CUevent>(handle_)),
        "cuEventElapsedTime");
  return ms;
}

CudaTiming cuda_time(const std::function<void(CudaStreamHandle)>& fn, int warmup, int iters,
                     CudaStreamHandle stream) {
  if (iters < 1) throw BackendError("cuda_time needs at least one timed run");
  api();
  for (int i = 0; i < warmup; ++i) fn(stream);
  // One event pair per run, all recorded before any is read, so timing adds no host syncs.
  std::vector<CudaEvent> starts(static_cast<size_t>(iters)), ends(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    starts[i].record(stream);
    fn(stream);
    ends[i].record(stream);
  }
  CudaTiming t;
  for (int i = 0; i < iters; ++i) {
    ends[i].synchronize();
    t.samples_ms.push_back(ends[i].elapsed_ms_since(starts[i]));
    t.start_offsets_ms.push_back(starts[i].elapsed_ms_since(starts[0]));
  }
  std::vector<double> sorted = t.samples_ms;
  std::sort(sorted.begin(), sorted.end());
  size_t n = sorted.size();
  t.median_ms = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  t.min_ms = sorted.front();
  t.max_ms = sorted.back();
  return t;
}

#endif  // FLASHGEN_HAVE_CUDA

}  // namespace flashgen
