// NVRTC: CUDA C++ source text -> cubin (SASS) for one architecture, cached on disk.
//
// Needs no GPU: CI compiles every example for sm_80 and sm_90a this way. Kernels must be
// declared extern "C" so their names are not mangled (module_function looks them up by name).
// Headers the source includes can be given in memory (name -> text); the CUDA toolkit's own
// include folder (for <cuda_bf16.h>, <cuda_fp16.h>, ...) is added unless disabled. The disk
// cache key is (source, headers, NVRTC version, options, arch, toolkit include folder).
// When flashgen is built without the CUDA toolkit (FLASHGEN_HAVE_CUDA unset), every call throws
// BackendError saying so. A failed compilation throws BackendError with NVRTC's log and the
// path of the saved source.
// Tests: tests/runtime/nvrtc_test.cpp.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flashgen {

struct NvrtcOptions {
  std::string arch = "sm_80";  // a real architecture: sm_80, sm_86, sm_90a...
  std::vector<std::string> options = {"-std=c++17"};         // passed to NVRTC as given
  std::vector<std::pair<std::string, std::string>> headers;  // #include name -> text
  bool cuda_include = true;                 // add -I<toolkit include> (for cuda_bf16.h and friends)
  std::string name = "flashgen_kernel.cu";  // the file name NVRTC reports in its log
};

struct Cubin {
  std::string bytes;  // the cubin (an ELF file), ready for cuModuleLoadData
  std::string arch;   // as requested, e.g. "sm_90a"
  std::string key;    // disk cache key
  std::string log;    // NVRTC's log (warnings) when it was compiled now; empty from cache
  bool from_cache = false;
  double compile_ms = 0;  // NVRTC's wall time for this cubin (0 from the cache)
};

// Compiles `source` (or fetches it from the disk cache).
Cubin nvrtc_compile(std::string_view source, const NvrtcOptions& opt = {});
// Compiles every (source, options) at once, a thread each (NVRTC compiles separate programs
// concurrently), and returns the cubins in order; the first failure in order is thrown after
// every compile has ended.
struct NvrtcJob {
  std::string_view source;
  NvrtcOptions options;
};
std::vector<Cubin> nvrtc_compile_each(const std::vector<NvrtcJob>& jobs);

// True when NVRTC can be used; otherwise false with the reason in *why.
bool nvrtc_available(std::string* why = nullptr);
// "13.0" (BackendError without NVRTC).
std::string nvrtc_version();
// The architectures NVRTC can target, as "sm_XX" (BackendError without NVRTC).
std::vector<std::string> nvrtc_supported_archs();
// The toolkit include folder added by cuda_include (empty if none was found).
std::string nvrtc_cuda_include_dir();

// The arch to compile for on a device of compute capability major.minor: "sm_90a" for 9.0 (so
// Hopper-only instructions are available), "sm_<major><minor>" otherwise.
std::string cuda_arch_for(int major, int minor);

}  // namespace flashgen
