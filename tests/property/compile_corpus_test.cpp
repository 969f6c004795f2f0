// The compiler behind the frontend on inputs nobody wrote as programs: the libFuzzer corpus of
// compile_fuzzer (fuzz/corpus/compile: what scripts/fuzz.sh found that adds coverage, crashes
// included once fixed) replayed through the same check (fuzz/compile_check.h), so that builds
// without clang (release, ASan) run it too; and seeded mutations of every example, of which
// those that still parse go through it. The mutation seed is fixed (printed on failure);
// FLASHGEN_FUZZ_SEED replays others.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "../../fuzz/compile_check.h"
#include "support/support.h"

namespace flashgen {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> files_in(const fs::path& dir, const std::string& ext = "") {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (ext.empty() || e.path().extension() == ext) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(Robustness, CompileFuzzCorpus) {
  const fs::path dir = fs::path(FLASHGEN_SOURCE_DIR) / "fuzz" / "corpus" / "compile";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  const std::vector<fs::path> files = files_in(dir);
  ASSERT_FALSE(files.empty()) << dir;
  for (const fs::path& f : files)
    EXPECT_EQ(fuzz::compile_check(testing::read_text_file(f.string())), "") << f.filename();
}

// The tokens of src as (offset, length): runs of word characters (names and numbers), or single
// other characters; blanks are not tokens.
std::vector<std::pair<size_t, size_t>> tokens(const std::string& src) {
  auto word = [&](size_t i) {
    return std::isalnum(static_cast<unsigned char>(src[i])) || src[i] == '_' || src[i] == '.';
  };
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < src.size();) {
    size_t j = i + 1;
    if (word(i))
      while (j < src.size() && word(j)) ++j;
    if (!std::isspace(static_cast<unsigned char>(src[i]))) out.push_back({i, j - i});
    i = j;
  }
  return out;
}

// Token-level mutations of the examples (a number, a name or an operator replaced by another
// from the same program), so that most of them still parse and reach the later stages.
TEST(Robustness, MutatedExamplesCompileOrSayWhy) {
  uint64_t seed = 20261204;
  if (const char* e = std::getenv("FLASHGEN_FUZZ_SEED")) seed = std::strtoull(e, nullptr, 10);
  std::mt19937_64 rng(seed);
  const std::vector<fs::path> examples =
      files_in(fs::path(FLASHGEN_SOURCE_DIR) / "examples", ".attn");
  ASSERT_FALSE(examples.empty());
  int parsed = 0;
  for (int it = 0; it < 1000; ++it) {
    std::string src = testing::read_text_file(examples[rng() % examples.size()].string());
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::vector<std::pair<size_t, size_t>> toks = tokens(src);
      const auto [at, len] = toks[rng() % toks.size()];
      const auto [from, flen] = toks[rng() % toks.size()];
      src.replace(at, len, src.substr(from, flen));
    }
    try {
      parse_source(src, "mutated.attn");
      ++parsed;
    } catch (const SourceError&) {
    }
    ASSERT_EQ(fuzz::compile_check(src), "")
        << "FLASHGEN_FUZZ_SEED=" << seed << ", iteration " << it << "\n--- source ---\n"
        << src << "--- end ---";
  }
  std::printf("mutated examples: %d of 1000 parse and went through the compiler (seed %llu)\n",
              parsed, static_cast<unsigned long long>(seed));
  EXPECT_GE(parsed, 100);  // enough of them reach the compiler for the test to mean something
}

}  // namespace
}  // namespace flashgen
