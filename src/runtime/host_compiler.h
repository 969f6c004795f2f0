// The host compiler: C++ source text -> shared library -> dlopen'ed handle, cached on disk.
//
// The compiler is $FLASHGEN_CXX (split on spaces, so "ccache g++" works), else `c++`, else
// `g++`. Default flags: -O3 -march=native -fopenmp -fPIC -shared -std=c++17, then the caller's
// extra flags. The disk cache key is (source, compiler command, its `--version` output, flags,
// and the CPU's model and feature flags when -march=native is used, since such a library is
// specific to the machine). A library, once loaded, stays loaded for the life of the process;
// compiling the same source again returns the same handle without touching the disk.
// Concurrency: threads compiling the same key wait for one compilation; processes compiling the
// same key each build to a private temporary file and rename it into the cache (atomic).
// Errors (BackendError): a compiler that cannot be run, a failing compilation (message holds
// the command, the compiler's output and the path of the saved source), dlopen failure, or a
// missing symbol.
// Tests: tests/runtime/host_compiler_test.cpp.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace flashgen {

class HostLibrary {
 public:
  HostLibrary(void* handle, std::string path, std::string key, bool from_cache)
      : handle_(handle), path_(std::move(path)), key_(std::move(key)), from_cache_(from_cache) {}
  HostLibrary(const HostLibrary&) = delete;
  HostLibrary& operator=(const HostLibrary&) = delete;

  // The address of an exported symbol (declare it extern "C"); BackendError if absent.
  void* symbol(const std::string& name) const;
  // The same, cast to a function pointer type: lib.function<int(int)>("f").
  template <class Fn>
  Fn* function(const std::string& name) const {
    return reinterpret_cast<Fn*>(symbol(name));
  }

  const std::string& path() const { return path_; }  // the cached .so that was loaded
  const std::string& key() const { return key_; }    // its cache key
  bool from_cache() const { return from_cache_; }    // true if no compiler ran for it

 private:
  void* handle_;
  std::string path_;
  std::string key_;
  bool from_cache_;
};

struct HostCompileOptions {
  std::vector<std::string> extra_flags;  // appended after host_default_flags()
};

// Compiles (or fetches from the caches) and loads `source`. Never returns null.
std::shared_ptr<const HostLibrary> host_compile(std::string_view source,
                                                const HostCompileOptions& opt = {});

// The compiler command as argv words ($FLASHGEN_CXX split on spaces, or c++ / g++).
std::vector<std::string> host_compiler_command();
// The compiler's `--version` output (BackendError if it cannot be run), memoized per command.
std::string host_compiler_version();
// The longest a host compile may run before it is stopped with a BackendError, in seconds:
// $FLASHGEN_COMPILE_TIMEOUT (0: no limit; not a number: CallError), else the default.
inline constexpr double kDefaultHostCompileTimeLimit = 300;
double host_compile_time_limit();
// -O3 -march=native -fopenmp -fPIC -shared -std=c++17
std::vector<std::string> host_default_flags();

}  // namespace flashgen
