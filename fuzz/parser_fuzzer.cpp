// libFuzzer target for the .attn frontend (not part of the default build; see fuzz/README.md).
// Any input must either parse or raise SourceError: another exception escapes and libFuzzer
// reports it, and a crash, hang or sanitizer report is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "flashgen/frontend.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string source(reinterpret_cast<const char*>(data), size);
  try {
    for (const flashgen::Program& p : flashgen::parse_source(source, "fuzz.attn")) {
      (void)p.str();
      (void)p.hash();
    }
  } catch (const flashgen::SourceError&) {
    // A diagnostic is a correct answer to a bad input.
  }
  return 0;
}
