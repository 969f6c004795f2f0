// Random attention-like programs for property tests: random dim names, layouts and sizes; score
// code from the language's functions; masks from index arithmetic and gathers; several softmaxes;
// several outputs; q or k normalized over the head dim; attention sinks (a max taken with a
// logit beside the keys); key gates; a bias per key or value column added to the values; the
// attention entropy over log(P); occasionally a program that cannot be one pass. `cuda_shaped` draws
// what the CUDA sm80 template takes (bf16, f16 or f32 q/k/v with the head dim innermost, head dims 32 or
// 64, or any up to 100; sometimes an output of plain weights: sigmoid or relu-power sums over
// keys without a softmax); the CPU programs draw f32 q/k/v, or bf16 or f16; the
// other parts of the program stay random, so some still do not fit (a BackendError that says
// why). Used by tests/property (CPU), tests/cuda (NVRTC) and tests/gpu (on the GPU).
#pragma once

#include <cstdint>
#include <string>

#include "flashgen/ref.h"

namespace flashgen::testing {

struct GeneratedProgram {
  std::string text;  // one program named rnd<index>
  Extents sizes;     // extents of every dim, small
};

struct RandomProgramOptions {
  bool cuda_shaped = false;
};

// Deterministic in (seed, index, options).
GeneratedProgram random_attention_program(uint64_t seed, int index,
                                          const RandomProgramOptions& opt = {});

}  // namespace flashgen::testing
