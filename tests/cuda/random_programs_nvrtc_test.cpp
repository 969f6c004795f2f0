// Property test of the CUDA emitter on programs nobody wrote by hand: random attention-like
// programs shaped for the sm80 template (tests/support/random_program.h) either emit a kernel
// whose source compiles through NVRTC for sm_90a, or are a BackendError that says which part
// does not fit the template — never an internal error or another exception. The same programs
// run on the GPU against the reference in tests/gpu/cuda_examples_test.cpp. The seed is printed;
// FLASHGEN_PROPERTY_SEED replays it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "flashgen/compile.h"
#include "flashgen/error.h"
#include "flashgen/frontend.h"
#include "runtime/nvrtc.h"
#include "support/random_program.h"

namespace flashgen {
namespace {

TEST(CudaProperty, RandomProgramsEmitOrSayWhy) {
  uint64_t seed = std::random_device{}();
  if (const char* e = std::getenv("FLASHGEN_PROPERTY_SEED")) seed = std::strtoull(e, nullptr, 10);
  std::string why;
  const bool nvrtc = nvrtc_available(&why);
  const int count = 60, compile_at_most = 8;  // NVRTC takes ~1.5 s per kernel on CI
  int fit = 0, compiled = 0;
  testing::RandomProgramOptions opt;
  opt.cuda_shaped = true;
  for (int i = 0; i < count; ++i) {
    testing::GeneratedProgram g = testing::random_attention_program(seed + i, i, opt);
    SCOPED_TRACE("FLASHGEN_PROPERTY_SEED=" + std::to_string(seed + i) + "\n" + g.text);
    Program p = parse_source(g.text, "random.attn").at(0);
    try {
      std::string src = emit_cuda(p, Target::cuda_sm80, g.sizes);
      ++fit;
      EXPECT_NE(src.find("fg::attn_fwd_sm80<Spec>"), std::string::npos);
      if (nvrtc && compiled < compile_at_most) {
        std::string cubin = compile_cuda_cubin(p, Target::cuda_sm80, g.sizes, "sm_90a");
        EXPECT_EQ(cubin.substr(1, 3), "ELF");
        ++compiled;
      }
    } catch (const BackendError& e) {
      std::string m = e.what();
      EXPECT_EQ(m.find("internal error"), std::string::npos) << m;
      EXPECT_NE(m.find("does not fit the CUDA sm80 attention template"), std::string::npos) << m;
    }
  }
  std::printf("cuda property: %d of %d programs fit the sm80 template, %d compiled (seed %llu)\n",
              fit, count, compiled, static_cast<unsigned long long>(seed));
  // The generator draws template-shaped programs: most must fit, or this test tests nothing.
  EXPECT_GE(fit, count / 3);
}

}  // namespace
}  // namespace flashgen
