// NVRTC compilation to cubins: see nvrtc.h. Tests: tests/runtime/nvrtc_test.cpp.
#include "runtime/nvrtc.h"

#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <future>
#include <regex>

#include "flashgen/error.h"
#include "runtime/compile_cache.h"

#ifdef FLASHGEN_HAVE_CUDA
#include <dlfcn.h>
#include <nvrtc.h>
#endif

namespace flashgen {

std::string cuda_arch_for(int major, int minor) {
  std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  if (major == 9 && minor == 0) arch += "a";
  return arch;
}

std::vector<Cubin> nvrtc_compile_each(const std::vector<NvrtcJob>& jobs) {
  std::vector<std::future<Cubin>> pending;
  for (size_t i = 1; i < jobs.size(); ++i)
    // (async where a thread starts, else compiled at get(): libstdc++'s fallback)
    pending.push_back(std::async(std::launch::async | std::launch::deferred, [&jobs, i] {
      return nvrtc_compile(jobs[i].source, jobs[i].options);
    }));
  std::vector<Cubin> out(jobs.size());
  std::exception_ptr failed;
  try {
    if (!jobs.empty()) out[0] = nvrtc_compile(jobs[0].source, jobs[0].options);  // this thread
  } catch (...) {
    failed = std::current_exception();
  }
  for (size_t i = 1; i < jobs.size(); ++i) {
    try {
      out[i] = pending[i - 1].get();
    } catch (...) {
      if (!failed) failed = std::current_exception();
    }
  }
  if (failed) std::rethrow_exception(failed);
  return out;
}

#ifndef FLASHGEN_HAVE_CUDA

namespace {
[[noreturn]] void no_cuda() {
  throw BackendError(
      "NVRTC is unavailable: flashgen was built without the CUDA toolkit (install it and "
      "re-run CMake so find_package(CUDAToolkit) finds it)");
}
}  // namespace

bool nvrtc_available(std::string* why) {
  if (why) *why = "flashgen was built without the CUDA toolkit";
  return false;
}
std::string nvrtc_version() { no_cuda(); }
std::vector<std::string> nvrtc_supported_archs() { no_cuda(); }
std::string nvrtc_cuda_include_dir() { return {}; }
Cubin nvrtc_compile(std::string_view, const NvrtcOptions&) { no_cuda(); }

#else

namespace {

namespace fs = std::filesystem;

void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) {
    throw BackendError(std::string("NVRTC call ") + what + " failed: " + nvrtcGetErrorString(r));
  }
}

// Frees the program on every path out of nvrtc_compile.
struct ProgramGuard {
  nvrtcProgram prog = nullptr;
  ~ProgramGuard() {
    if (prog) nvrtcDestroyProgram(&prog);
  }
};

std::string find_cuda_include() {
  std::vector<fs::path> candidates;
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) && info.dli_fname) {
    std::error_code ec;
    fs::path lib = fs::canonical(info.dli_fname, ec);
    if (ec) lib = info.dli_fname;
    candidates.push_back(lib.parent_path().parent_path() / "include");  // lib/
    candidates.push_back(lib.parent_path().parent_path().parent_path() /
                         "include");  // targets/*/lib
  }
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* v = std::getenv(var); v && *v) candidates.push_back(fs::path(v) / "include");
  }
  candidates.push_back("/usr/local/cuda/include");
  for (const fs::path& dir : candidates) {
    std::error_code ec;
    if (fs::exists(dir / "cuda_fp16.h", ec)) return dir.string();
  }
  return {};
}

// The numeric part of "sm_90a" (90), or -1 if the name is not a real architecture.
int arch_number(const std::string& arch) {
  static const std::regex re("sm_([0-9]+)[af]?");
  std::smatch m;
  if (!std::regex_match(arch, m, re)) return -1;
  return std::stoi(m[1].str());
}

std::string join(const std::vector<std::string>& words, const char* sep) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) out += (i ? sep : "") + words[i];
  return out;
}

}  // namespace

bool nvrtc_available(std::string* why) {
  int major = 0, minor = 0;
  nvrtcResult r = nvrtcVersion(&major, &minor);
  if (r != NVRTC_SUCCESS) {
    if (why) *why = std::string("nvrtcVersion failed: ") + nvrtcGetErrorString(r);
    return false;
  }
  return true;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> nvrtc_supported_archs() {
  int n = 0;
  check(nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(static_cast<size_t>(n));
  check(nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  std::vector<std::string> out;
  for (int a : archs) out.push_back("sm_" + std::to_string(a));
  return out;
}

std::string nvrtc_cuda_include_dir() {
  static const std::string dir = find_cuda_include();
  return dir;
}

Cubin nvrtc_compile(std::string_view source, const NvrtcOptions& opt) {
  const std::string version = nvrtc_version();
  int number = arch_number(opt.arch);
  std::vector<std::string> supported = nvrtc_supported_archs();
  bool ok = false;
  for (const std::string& s : supported) ok = ok || s == "sm_" + std::to_string(number);
  if (number < 0 || !ok) {
    throw BackendError("NVRTC " + version + " cannot compile for '" + opt.arch +
                       "': expected a real architecture such as sm_80 or sm_90a; NVRTC supports " +
                       join(supported, ", ") + " (with an 'a' suffix for arch-specific features)");
  }

  std::vector<std::string> options = {"--gpu-architecture=" + opt.arch};
  options.insert(options.end(), opt.options.begin(), opt.options.end());
  if (opt.cuda_include) {
    std::string inc = nvrtc_cuda_include_dir();
    if (!inc.empty()) options.push_back("-I" + inc);
  }
  std::string header_blob;
  for (const auto& [name, text] : opt.headers) {
    header_blob +=
        std::to_string(name.size()) + ":" + name + std::to_string(text.size()) + ":" + text;
  }
  std::string key =
      cache_key({"nvrtc", source, opt.name, header_blob, version, join(options, "\n"), opt.arch});

  Cubin out;
  out.arch = opt.arch;
  out.key = key;
  if (std::optional<std::string> cached = cache_read(key, ".cubin")) {
    out.bytes = std::move(*cached);
    out.from_cache = true;
    return out;
  }

  std::vector<const char*> header_texts, header_names;
  for (const auto& [name, text] : opt.headers) {
    header_names.push_back(name.c_str());
    header_texts.push_back(text.c_str());
  }
  std::string src(source);  // NVRTC wants a NUL-terminated string
  ProgramGuard guard;
  check(nvrtcCreateProgram(&guard.prog, src.c_str(), opt.name.c_str(),
                           static_cast<int>(header_names.size()), header_texts.data(),
                           header_names.data()),
        "nvrtcCreateProgram");
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  nvrtcResult result = nvrtcCompileProgram(guard.prog, static_cast<int>(argv.size()), argv.data());
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  size_t log_size = 0;
  check(nvrtcGetProgramLogSize(guard.prog, &log_size), "nvrtcGetProgramLogSize");
  std::string log(log_size, '\0');
  if (log_size > 0) check(nvrtcGetProgramLog(guard.prog, log.data()), "nvrtcGetProgramLog");
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (result != NVRTC_SUCCESS) {
    std::string saved = cache_save_source(key, ".cu", source);
    std::string msg = "NVRTC " + version + " failed to compile " + opt.name + " for " + opt.arch +
                      " (" + nvrtcGetErrorString(result) + ")\noptions: " + join(options, " ") +
                      "\nlog:\n" + log + "\ngenerated source saved at " + saved;
    if (!opt.headers.empty()) {
      msg += "\nin-memory headers:";
      for (const auto& h : opt.headers) msg += " " + h.first;
    }
    throw BackendError(msg);
  }
  size_t cubin_size = 0;
  check(nvrtcGetCUBINSize(guard.prog, &cubin_size), "nvrtcGetCUBINSize");
  if (cubin_size == 0) {
    throw BackendError("NVRTC produced no cubin for " + opt.arch + " (is it a real architecture?)");
  }
  out.bytes.resize(cubin_size);
  check(nvrtcGetCUBIN(guard.prog, out.bytes.data()), "nvrtcGetCUBIN");
  out.log = std::move(log);
  cache_store(key, ".cubin", out.bytes);
  return out;
}

#endif  // FLASHGEN_HAVE_CUDA

}  // namespace flashgen
