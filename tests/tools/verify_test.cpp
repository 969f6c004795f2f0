// flashgen/verify.h: every example verifies on every backend this machine has; planted
// differences (a zero tolerance, one backend's input perturbed) are reported where they are.
#include <gtest/gtest.h>

#include <cmath>

#include "flashgen/verify.h"
#include "runtime/cuda_driver.h"
#include "support/support.h"

namespace flashgen {
namespace {

TensorMap inputs_for(const Program& p, uint64_t seed = 3) {
  return random_inputs(p, testing::example_extents(p, 37, 45, 16, 16), seed);
}

const BackendCheck& backend(const VerifyReport& r, Backend b) {
  for (const BackendCheck& c : r.backends)
    if (c.backend == b) return c;
  throw std::runtime_error("no entry for a backend");
}

class VerifyExample : public ::testing::TestWithParam<std::string> {};

TEST_P(VerifyExample, EveryBackendHereAgreesWithTheReference) {
  Program p = testing::example_program(GetParam());
  TensorMap in = inputs_for(p);
  VerifyReport r = verify(p, in);
  ASSERT_EQ(r.backends.size(), 3u);
  EXPECT_TRUE(backend(r, Backend::ref).ran);
  EXPECT_TRUE(backend(r, Backend::cpu).ran);
  for (const BackendCheck& c : r.backends) {
    if (!c.ran) {
      EXPECT_FALSE(c.why_not.empty()) << c.label;
      continue;
    }
    EXPECT_TRUE(c.error.empty()) << c.label << ": " << c.error;
    ASSERT_EQ(c.outputs.size(), p.outputs.size()) << c.label;
    for (const OutputCheck& o : c.outputs) {
      EXPECT_TRUE(o.ok()) << c.label << " " << o.name << ": rel " << o.max_rel << " > "
                          << o.tolerance;
      EXPECT_GT(o.tolerance, 0) << o.name;  // bf16 examples: never an exact match
    }
  }
  EXPECT_TRUE(r.ok()) << verify_text(p, r, bind_extents(p, in));
}

INSTANTIATE_TEST_SUITE_P(Examples, VerifyExample, ::testing::ValuesIn(testing::example_names()),
                         [](const auto& info) { return info.param; });

TEST(Verify, AToleranceOfZeroFailsEveryBackendThatRounds) {
  Program p = testing::example_program("causal");
  TensorMap in = inputs_for(p);
  VerifyOptions o;
  o.tolerance = 0;
  VerifyReport r = verify(p, in, o);
  EXPECT_FALSE(r.ok());
  for (Backend b : {Backend::ref, Backend::cpu}) {
    const BackendCheck& c = backend(r, b);
    ASSERT_TRUE(c.ran) << c.label;
    ASSERT_EQ(c.outputs.size(), 1u);
    EXPECT_GT(c.outputs[0].max_rel, 0) << c.label;  // bf16 outputs differ from f64
    EXPECT_EQ(c.outputs[0].tolerance, 0);
    EXPECT_FALSE(c.ok()) << c.label;
  }
  EXPECT_NE(verify_text(p, r, bind_extents(p, in)).find("(given)"), std::string::npos);
}

TEST(Verify, APerturbedInputFailsOnlyThatBackendAndNamesWhere) {
  Program p = testing::example_program("causal");
  TensorMap in = inputs_for(p);
  const Extents ext = bind_extents(p, in);
  VerifyOptions o;
  // v at (b=1, h=0, n=0, e=5) changed for the CPU backend only: causal row m reads key 0, so
  // every row of (b=1, h=0) moves at column e=5, row 0 the most (its only key).
  const int64_t flat = ((1 * ext.at("h") + 0) * ext.at("n") + 0) * ext.at("e") + 5;
  o.perturb = [&](Backend b, TensorMap& t) {
    if (b != Backend::cpu) return;
    Tensor v = t.at("v").contiguous();
    v.set(flat, v.get(flat) + 8.0);
    t["v"] = v;
  };
  VerifyReport r = verify(p, in, o);
  EXPECT_TRUE(backend(r, Backend::ref).ok());
  const BackendCheck& cpu = backend(r, Backend::cpu);
  ASSERT_TRUE(cpu.ran);
  ASSERT_EQ(cpu.outputs.size(), 1u);
  EXPECT_FALSE(cpu.ok());
  EXPECT_FALSE(r.ok());
  // The worst element: o[b=1, h=0, m=0, e=5] (8.0 away: row 0 attends to key 0 alone).
  const int64_t want = ((1 * ext.at("h") + 0) * ext.at("m") + 0) * ext.at("e") + 5;
  EXPECT_EQ(cpu.outputs[0].worst, want);
  EXPECT_NEAR(cpu.outputs[0].max_abs, 8.0, 0.1);
  EXPECT_NE(verify_text(p, r, ext).find("at [b=1, h=0, m=0, e=5]"), std::string::npos)
      << verify_text(p, r, ext);
}

TEST(Verify, ABackendThatIsNotHereIsListedWithWhy) {
  Program p = testing::example_program("vanilla");
  TensorMap in = inputs_for(p);
  VerifyReport r = verify(p, in);
  const BackendCheck& cuda = backend(r, Backend::cuda);
  std::string why;
  if (cuda_available(&why)) {
    EXPECT_TRUE(cuda.ran);
  } else {
    EXPECT_FALSE(cuda.ran);
    EXPECT_NE(cuda.why_not.find(why), std::string::npos) << cuda.why_not;
    EXPECT_TRUE(cuda.ok());  // not run is not a failure; the text says it was not run
    EXPECT_NE(verify_text(p, r, bind_extents(p, in)).find("not run: " + cuda.why_not), std::string::npos);
  }
  EXPECT_EQ(r.ran(), 2 + (cuda.ran ? 1 : 0));
}

TEST(Verify, BadInputsAreTheCallersErrorBeforeAnyBackendRuns) {
  Program p = testing::example_program("document");
  TensorMap in = inputs_for(p);
  in.erase("doc");
  EXPECT_THROW(verify(p, in), CallError);
}

}  // namespace
}  // namespace flashgen
