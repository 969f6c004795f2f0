// Helpers for the runtime tests: a private cache folder per test, scoped environment edits, and
// the message of an expected BackendError.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>

#include "flashgen/error.h"

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

// The message of the BackendError fn throws (a test failure, and "", if it throws none).
inline std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const BackendError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a BackendError";
  return {};
}

}  // namespace flashgen::testing_runtime
