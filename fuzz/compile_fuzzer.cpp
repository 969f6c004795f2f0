// libFuzzer target for the compiler behind the frontend (not part of the default build; see
// fuzz/README.md): fuzz/compile_check.h on every input. A problem it finds aborts (libFuzzer
// keeps the input); so do another exception, a crash, a hang and a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "compile_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string problem =
      flashgen::fuzz::compile_check(std::string(reinterpret_cast<const char*>(data), size));
  if (!problem.empty()) {
    std::fprintf(stderr, "compile_fuzzer: %s\n", problem.c_str());
    std::abort();
  }
  return 0;
}
