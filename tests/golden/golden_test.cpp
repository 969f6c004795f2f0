// Printer goldens: every program of every tests/golden/*.attn file (the docs/language.md programs
// and programs that use every construct) is parsed and its Program::str() compared with the
// checked-in tests/golden/NAME.txt. The text form is what the kernel cache hashes, so a change
// here is a deliberate change of the IR or the printer.
//
// To regenerate after such a change (then review the diff by eye):
//   FLASHGEN_UPDATE_GOLDEN=1 ./flashgen_tests --gtest_filter='Golden*'
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "flashgen/frontend.h"

namespace flashgen {
namespace {

namespace fs = std::filesystem;

fs::path golden_dir() { return fs::path(FLASHGEN_SOURCE_DIR) / "tests" / "golden"; }

bool updating() {
  const char* v = std::getenv("FLASHGEN_UPDATE_GOLDEN");
  return v && *v && std::string(v) != "0";
}

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<fs::path> sources() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(golden_dir()))
    if (e.path().extension() == ".attn") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Golden, PrinterTextOfEveryProgram) {
  auto files = sources();
  ASSERT_GE(files.size(), 2u) << "no .attn files under " << golden_dir();
  std::set<std::string> seen;
  for (const fs::path& f : files) {
    std::vector<Program> programs;
    ASSERT_NO_THROW(programs = parse_file(f.string())) << f;
    for (const Program& p : programs) {
      SCOPED_TRACE(f.filename().string() + ": program " + p.name);
      ASSERT_TRUE(seen.insert(p.name).second) << "program name used twice among the goldens";
      fs::path expected = golden_dir() / (p.name + ".txt");
      std::string text = p.str();
      if (updating()) {
        std::ofstream(expected, std::ios::binary) << text;
        continue;
      }
      ASSERT_TRUE(fs::exists(expected))
          << expected << " is missing; run with FLASHGEN_UPDATE_GOLDEN=1 to write it";
      EXPECT_EQ(text, read(expected))
          << "the IR text changed; if on purpose, regenerate with FLASHGEN_UPDATE_GOLDEN=1";
    }
  }
  // No stale golden without a program.
  for (const auto& e : fs::directory_iterator(golden_dir()))
    if (e.path().extension() == ".txt")
      EXPECT_TRUE(seen.count(e.path().stem().string())) << "stale golden " << e.path();
  // The docs/language.md programs are all there.
  for (const char* name :
       {"alibi_gqa", "causal", "softcap", "document", "diff_attn", "evoformer_row"})
    EXPECT_TRUE(seen.count(name)) << name;
}

// The text form is deterministic: parsing twice gives the same text and hash, and equal
// programs compare equal.
TEST(Golden, TextAndHashAreStable) {
  for (const fs::path& f : sources()) {
    auto a = parse_file(f.string());
    auto b = parse_file(f.string());
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].str(), b[i].str());
      EXPECT_EQ(a[i].hash(), b[i].hash());
      EXPECT_TRUE(a[i] == b[i]);
      for (size_t j = 0; j < a.size(); ++j)
        if (j != i) EXPECT_FALSE(a[i] == a[j]) << a[i].name << " " << a[j].name;
    }
  }
}

}  // namespace
}  // namespace flashgen
