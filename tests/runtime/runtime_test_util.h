// Helpers for the runtime tests: a private cache folder per test and scoped environment edits.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <string>

namespace flashgen::testing_runtime {

// Sets (or unsets, with nullopt) an environment variable for the lifetime of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A fresh folder under the system temp dir, used as FLASHGEN_CACHE_DIR; removed afterwards.
class TempCacheDir {
 public:
  TempCacheDir()
      : path_((std::filesystem::temp_directory_path() /
               ("flashgen-rt-test-" + std::to_string(::getpid()) + "-" +
                std::to_string(std::random_device{}())))
                  .string()),
        env_("FLASHGEN_CACHE_DIR", path_) {}
  ~TempCacheDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  ScopedEnv env_;
};

}  // namespace flashgen::testing_runtime
