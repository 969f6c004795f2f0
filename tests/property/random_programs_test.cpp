// Property test: random attention-like programs (tests/support/random_program.h: random dim
// names, layouts and sizes; score code from the language's functions; masks from index
// arithmetic and gathers; several softmaxes; several outputs; occasionally a program that cannot
// be one pass) run on the CPU backend and must equal the reference evaluator. The seed is fixed
// (printed, and on failure); set FLASHGEN_PROPERTY_SEED for others, FLASHGEN_PROPERTY_COUNT to
// run more.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <set>
#include <sstream>
#include <future>

#include "flashgen/compile.h"
#include "flashgen/flashgen.h"
#include "support/random_program.h"
#include "support/support.h"

namespace flashgen {
namespace {

TEST(Property, RandomProgramsMatchReferenceOnCpu) {
  uint64_t seed = 20261130;  // fixed so that CI is repeatable; printed below
  if (const char* e = std::getenv("FLASHGEN_PROPERTY_SEED")) seed = std::strtoull(e, nullptr, 10);
  int count = 150;
  if (const char* e = std::getenv("FLASHGEN_PROPERTY_COUNT")) count = std::atoi(e);
  const int batch = 40;
  int multi_kernel = 0;
  for (int start = 0; start < count; start += batch) {
    std::vector<Program> progs;
    std::vector<testing::GeneratedProgram> gens;
    for (int i = start; i < std::min(count, start + batch); ++i) {
      testing::GeneratedProgram g = testing::random_attention_program(seed + i, i);
      SCOPED_TRACE("seed " + std::to_string(seed + i) + "\n" + g.text);
      Program p = parse_source(g.text, "random.attn").at(0);
      progs.push_back(p);
      gens.push_back(g);
    }
    // Two compiler processes at once (CI has two cores); -O1 compiles several times faster.
    size_t half = progs.size() / 2;
    std::vector<Program> first(progs.begin(), progs.begin() + half);
    std::vector<Program> second(progs.begin() + half, progs.end());
    // (a future, not a thread: a compile error on either side is reported, where a thread left
    // joinable by an exception would terminate the test binary)
    std::future<void> other = std::async(std::launch::async, [&] {
      if (!first.empty()) precompile_cpu(first, {"-O1"});
    });
    precompile_cpu(second, {"-O1"});
    other.get();
    for (size_t i = 0; i < progs.size(); ++i) {
      const Program& p = progs[i];
      std::string trace = "FLASHGEN_PROPERTY_SEED=" + std::to_string(seed + start + i) +
                          " (program index " + std::to_string(start + i) + ")\n" + gens[i].text;
      SCOPED_TRACE(trace);
      if (kernel_count(p, {}) > 1) ++multi_kernel;
      TensorMap in = random_inputs(p, gens[i].sizes, seed + 1000003 * (start + i));
      TensorMap want = evaluate_reference(p, in);
      TensorMap got = run_cpu(p, in);
      for (const Output& o : p.outputs) {
        double scale = std::max(1.0, testing::max_abs(want.at(o.name)));
        std::string diff = testing::compare_tensors(got.at(o.name), want.at(o.name), 3e-5 * scale);
        ASSERT_EQ(diff, "") << "output " << o.name;
      }
    }
  }
  std::printf("property: %d programs (seed %llu), %d needed more than one kernel\n", count,
              static_cast<unsigned long long>(seed), multi_kernel);
}

}  // namespace
}  // namespace flashgen
