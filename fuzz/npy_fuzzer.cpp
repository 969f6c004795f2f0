// libFuzzer target for the .npy reader (src/runtime/npy.cpp). read_npy takes a path, so each
// input is written to a temporary file first. Any input must either load or raise CallError;
// a loaded array must have as many bytes as its shape says, and must survive write_npy and
// read_npy unchanged. Another exception, a crash or a sanitizer report is a bug.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "flashgen/error.h"
#include "flashgen/npy.h"

namespace {

std::string temp_path(const char* suffix) {
  static const std::string dir = std::filesystem::temp_directory_path().string();
  return dir + "/flashgen-npy-fuzz-" + std::to_string(::getpid()) + suffix;
}

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "npy_fuzzer: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string in = temp_path(".npy"), out = temp_path("-out.npy");
  {
    std::ofstream f(in, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!f) fail("cannot write " + in);
  }
  flashgen::NpyArray a;
  try {
    a = flashgen::read_npy(in);
  } catch (const flashgen::CallError&) {
    return 0;  // a diagnostic is a correct answer to a bad input
  }
  const flashgen::Tensor& t = a.tensor;
  int64_t numel = 1;
  for (int64_t e : t.shape()) {
    if (e < 0) fail("negative extent accepted, descr " + a.descr);
    numel *= e;
  }
  if (t.numel() != numel) fail("numel() disagrees with the shape");
  if (!t.is_contiguous()) fail("read_npy returned a non-contiguous tensor");
  if (static_cast<int64_t>(t.nbytes()) != numel * flashgen::dtype_bytes(t.dtype()))
    fail("the storage size is not numel times the dtype's size");
  flashgen::write_npy(out, t);
  flashgen::NpyArray b = flashgen::read_npy(out);
  if (b.tensor.dtype() != t.dtype() || b.tensor.shape() != t.shape() ||
      b.tensor.nbytes() != t.nbytes() ||
      (t.nbytes() && std::memcmp(b.tensor.data(), t.data(), t.nbytes()) != 0)) {
    fail("write_npy + read_npy changed the array (descr " + a.descr + ")");
  }
  return 0;
}
