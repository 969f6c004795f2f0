// The CUDA driver API, as flashgen uses it: device query, modules, launches, device memory,
// events and timing.
//
// libcuda.so.1 is opened with dlopen on first use (not linked), so flashgen and its tests start
// on machines without an NVIDIA driver; cuda_available() then says why CUDA cannot be used and
// every other call throws BackendError with that reason. No call falls back to anything: errors
// carry the CUresult's name and text and what was being done. Device 0 (as CUDA_VISIBLE_DEVICES
// orders them) with its primary context, made current on whichever thread calls in.
// Not usable without FLASHGEN_HAVE_CUDA (CMake found no toolkit): cuda_available() is false.
// Tests: tests/gpu/cuda_driver_test.cpp (SKIPs the GPU parts when no GPU is present).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace flashgen {

// True if a CUDA device can be used; otherwise false and the reason in *why (no driver, no
// device, cuInit failure, built without CUDA).
bool cuda_available(std::string* why = nullptr);
// Throws BackendError with the reason when !cuda_available().
void cuda_require();

struct CudaDeviceInfo {
  int ordinal = 0;
  std::string name;  // "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int max_threads_per_block = 0;
  int max_smem_per_block_optin = 0;  // bytes a block may get after raising its dynamic limit
  int max_smem_per_sm = 0;           // bytes of shared memory per multiprocessor
  int l2_bytes = 0;
  int clock_khz = 0;         // the SMs' peak clock
  int memory_clock_khz = 0;  // device memory's peak clock (two transfers per clock)
  int memory_bus_bits = 0;
  std::size_t total_memory = 0;
  int driver_version = 0;  // e.g. 13000
};
const CudaDeviceInfo& cuda_device_info();
// cuda_arch_for(compute capability): "sm_90a" on Hopper, "sm_80" on A100...
std::string cuda_device_arch();
// Free and total device memory in bytes.
void cuda_memory_info(std::size_t* free_bytes, std::size_t* total_bytes);
// Waits for all work on the device (cuCtxSynchronize); a kernel fault surfaces here.
void cuda_synchronize();

// Opaque CUstream; nullptr is the legacy default stream.
using CudaStreamHandle = void*;
using DevicePtr = std::uint64_t;  // CUdeviceptr

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct CudaKernelInfo {
  int num_regs = 0;
  int static_smem_bytes = 0;
  int local_bytes = 0;  // per thread; non-zero means register spills or stack arrays
  int max_threads_per_block = 0;
};

class CudaModule;

// A __global__ function of a loaded module (keeps the module loaded).
class CudaKernel {
 public:
  const std::string& name() const { return name_; }
  CudaKernelInfo info() const;

  // Launches with argument addresses `args` (one per kernel parameter, as cuLaunchKernel wants).
  // dynamic_smem above 48 KB raises the function's limit first; more than the device allows is
  // a BackendError. Launch errors throw; faults inside the kernel surface at the next sync.
  void launch(Dim3 grid, Dim3 block, std::size_t dynamic_smem, CudaStreamHandle stream,
              void** args) const;
  // The same with the arguments by value: k(grid, block, smem, stream, ptr, n, 0.5f).
  template <class... Args>
  void operator()(Dim3 grid, Dim3 block, std::size_t dynamic_smem, CudaStreamHandle stream,
                  const Args&... args) const {
    void* addrs[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
    launch(grid, block, dynamic_smem, stream, addrs);
  }

 private:
  friend class CudaModule;
  struct State;
  std::shared_ptr<State> state_;
  std::string name_;
};

// A cubin loaded into the primary context (cuModuleLoadDataEx); unloaded when the last handle
// (module or kernel) goes away. Loading and looking up kernels run in the relaxed stream-capture
// mode, so a kernel compiled at its first call may load while the caller captures a CUDA graph.
class CudaModule {
 public:
  explicit CudaModule(std::string_view cubin);
  CudaKernel kernel(const std::string& name) const;  // BackendError if absent

 private:
  friend class CudaKernel;
  struct Handle;
  std::shared_ptr<Handle> handle_;
};

// Device memory, freed on destruction. Move-only. A zero-byte buffer has ptr() == 0.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // BackendError on failure; out of memory says how much was requested and how much is free.
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  DevicePtr ptr() const { return ptr_; }
  std::size_t size() const { return size_; }

  // Synchronous copies of `bytes` at byte `offset` (range-checked: BackendError). Uploads and
  // fills are complete on the device when they return: the driver's copy from pageable memory
  // and its memsets run on the legacy stream and may still be in flight at return, where a
  // kernel on a non-blocking stream (CudaStream) would race with them.
  void upload(const void* host, std::size_t bytes, std::size_t offset = 0);
  void download(void* host, std::size_t bytes, std::size_t offset = 0) const;
  template <class T>
  void upload(const std::vector<T>& v) {
    upload(v.data(), v.size() * sizeof(T));
  }
  template <class T>
  std::vector<T> download_as() const {
    std::vector<T> v(size_ / sizeof(T));
    download(v.data(), v.size() * sizeof(T));
    return v;
  }
  void memset(std::uint8_t value);       // every byte
  void fill_u32(std::uint32_t pattern);  // every 4-byte word (e.g. a NaN to poison outputs)

 private:
  void release() noexcept;
  DevicePtr ptr_ = 0;
  std::size_t size_ = 0;
};

// Stream-ordered device memory (cuMemAllocAsync / cuMemFreeAsync): usable by work queued on
// `stream` after the allocation and before the free; recorded by a CUDA graph capture. For the
// scratch and intermediates of a launch that does not synchronize.
DevicePtr cuda_alloc_async(std::size_t bytes, CudaStreamHandle stream);

// A TMA tensor map (CUtensorMap: 128 opaque bytes, 64-byte aligned), passed to sm_90 kernels by
// value (`const __grid_constant__ fg::TmaDesc`, fg_sm90.cuh) for cp.async.bulk.tensor copies.
struct alignas(64) CudaTensorMap {
  std::uint64_t words[16] = {};
};
// The map of a row-major bf16/f16 tensor with `rank` dims (1..5), `dims` innermost first (in
// elements), `strides_bytes` of dims 1.. (multiples of 16), copied in boxes of `box` elements
// per dim (the innermost box at most 128 bytes with swizzle128), zero-filled out of bounds,
// swizzled by 128 bytes (the layout wgmma's 128B-swizzle descriptors read) or not. `base` must
// be 16-byte aligned. BackendError from the driver otherwise.
CudaTensorMap cuda_tensor_map_16bit(DevicePtr base, int rank, const std::uint64_t* dims,
                                    const std::uint64_t* strides_bytes, const std::uint32_t* box,
                                    bool swizzle128);
void cuda_free_async(DevicePtr p, CudaStreamHandle stream);

class CudaStream {
 public:
  CudaStream();  // a non-blocking stream
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  CudaStreamHandle get() const { return handle_; }
  void synchronize() const;

 private:
  CudaStreamHandle handle_ = nullptr;
};

class CudaEvent {
 public:
  CudaEvent();
  ~CudaEvent();
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  void record(CudaStreamHandle stream = nullptr);
  void synchronize() const;
  // Milliseconds from `start` to this event (both recorded and complete).
  float elapsed_ms_since(const CudaEvent& start) const;

 private:
  void* handle_ = nullptr;
};

struct CudaTiming {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  std::vector<double> samples_ms;  // one per timed run, in order
  std::vector<double> start_offsets_ms;  // each run's start after the first run's start
};
// Runs `fn(stream)` `warmup` times untimed, then `iters` times each between two events on
// `stream`; returns the median (and spread) of the timed runs. fn must only enqueue work.
CudaTiming cuda_time(const std::function<void(CudaStreamHandle)>& fn, int warmup = 3,
                     int iters = 20, CudaStreamHandle stream = nullptr);

}  // namespace flashgen
