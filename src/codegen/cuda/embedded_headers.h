// embedded_headers.h — the CUDA tile library (src/codegen/cuda/*.cuh) as strings in the binary.
//
// What: the text of every .cuh of the tile library, generated at build time by cmake/embed.cmake,
//   for nvrtcCreateProgram(headers, includeNames): generated kernels `#include "fg_attn_sm80.cuh"`
//   and NVRTC resolves it from these strings, so no source tree is needed at run time.
// Test: tests/gpu/nvrtc_tile_library_test.cpp compiles the headers with a hand-written Spec
//   through NVRTC for sm_80 and sm_90a (no GPU needed).
#pragma once

namespace flashgen::cuda {

struct EmbeddedHeader {
  const char* name;    // file name as included, e.g. "fg_tile.cuh"
  const char* source;  // full text
};

// All embedded headers, sorted by name; *count receives their number.
const EmbeddedHeader* embedded_headers(int* count);

}  // namespace flashgen::cuda
