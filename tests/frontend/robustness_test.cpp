// Robustness of the frontend: thousands of random mutations of real sources (every .attn file
// under examples/ and tests/golden/, or the docs/language.md programs below when there are none):
// characters and tokens deleted, inserted, swapped, duplicated, replaced; sources truncated.
// parse_source must either succeed or throw SourceError with a well-formed diagnostic: never
// crash, never throw anything else, never take long. A failure prints the seed, the iteration
// and the mutated source; rerun one case with FLASHGEN_FUZZ_SEED / FLASHGEN_FUZZ_ITERS.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "flashgen/frontend.h"

namespace flashgen {
namespace {

namespace fs = std::filesystem;

// Used when the tree has no .attn files (the programs of docs/language.md).
const char* const kFallback = R"(
program alibi_gqa(q: bf16[b, g, r, m, d], k: bf16[b, g, n, d], v: bf16[b, g, n, e],
                  slope: f32[g, r]) {
  s = sum(q * k, d) / sqrt(size(d))
  s = where(n <= m, s + slope * (n - m), -inf)
  out o: bf16[b, g, r, m, e] = sum(softmax(s, n) * v, n)
}
program causal(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {
  s = where(n <= m, sum(q * k, d) / sqrt(size(d)), -inf)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
  out lse: f32[b, h, m] = logsumexp(s, n)
}
program document(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e], doc: i32[t]) {
  s = where(doc[m] == doc[n] and n <= m, sum(q * k, d) / sqrt(size(d)), -inf)
  out o: bf16[b, h, m, e] = sum(softmax(s, n) * v, n)
}
program evoformer_row(q: bf16[b, s, h, m, d], k: bf16[b, s, h, n, d], v: bf16[b, s, h, n, d],
                      g: bf16[b, s, h, m, d], pair: bf16[b, h, i, j], keep: bool[b, s, j]) {
  x = sum(q * k, d) / sqrt(size(d)) + pair[b, h, m, n] + where(keep[b, s, n], 0., -1e9)
  out o: bf16[b, s, h, m, d] = sum(softmax(x, n) * v, n) * sigmoid(g)
}
)";

struct Source {
  std::string name;
  std::string text;
};

std::vector<Source> corpus() {
  std::vector<Source> out;
  for (const char* dir : {"examples", "tests/golden"}) {
    fs::path d = fs::path(FLASHGEN_SOURCE_DIR) / dir;
    if (!fs::is_directory(d)) continue;
    for (const auto& e : fs::directory_iterator(d)) {
      if (e.path().extension() != ".attn") continue;
      std::ifstream in(e.path(), std::ios::binary);
      std::ostringstream ss;
      ss << in.rdbuf();
      out.push_back({e.path().filename().string(), ss.str()});
    }
  }
  std::sort(out.begin(), out.end(), [](const Source& a, const Source& b) {
    return a.name < b.name;
  });
  if (out.empty()) out.push_back({"docs/language.md", kFallback});
  return out;
}

uint64_t env_or(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

// Splits a source into lexeme-like pieces: name/number runs, blank runs, single characters.
std::vector<std::string> pieces(const std::string& s) {
  std::vector<std::string> out;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                                  c == '.'; };
  for (size_t i = 0; i < s.size();) {
    size_t j = i + 1;
    if (word(s[i]))
      while (j < s.size() && word(s[j])) ++j;
    else if (s[i] == ' ')
      while (j < s.size() && s[j] == ' ') ++j;
    out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

const char* const kVocabulary[] = {
    "program", "out", "inf", "true", "false", "and", "or", "not", "(", ")", "[", "]", "{", "}",
    ",", ":", "=", "==", "!=", "<", "<=", ">", ">=", "+", "-", "*", "/", "%", "\n", "# c\n",
    "sum", "max", "min", "mean", "softmax", "logsumexp", "where", "clamp", "size", "exp",
    "maximum", "pow", "f32", "i32", "i64", "bf16", "bool", "f8e4m3", "m", "n", "d", "q", "k",
    "s", "o", "x", "0", "1", "2.5", "1e-9", "3.", "1e99", "99999999999999999999", "$", ";",
    "\t", "\xc3\xa9", "\xff", " ", "\r\n", "q[m, n]", "sum(q, d)", "out z: f32[m] = "};

std::string mutate(const std::string& src, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  std::string s = src;
  int rounds = 1 + static_cast<int>(pick(3));
  for (int r = 0; r < rounds; ++r) {
    auto toks = pieces(s);
    std::string vocab = kVocabulary[pick(std::size(kVocabulary))];
    switch (pick(10)) {
      case 0:  // delete a character
        if (!s.empty()) s.erase(pick(s.size()), 1);
        break;
      case 1: {  // insert a random byte
        char c = static_cast<char>(pick(4) == 0 ? pick(256) : 32 + pick(95));
        s.insert(s.begin() + static_cast<long>(pick(s.size() + 1)), c);
        break;
      }
      case 2:  // swap two adjacent characters
        if (s.size() > 1) {
          size_t i = pick(s.size() - 1);
          std::swap(s[i], s[i + 1]);
        }
        break;
      case 3:  // truncate
        s.resize(pick(s.size() + 1));
        break;
      case 4:  // delete a token
        if (!toks.empty()) toks.erase(toks.begin() + static_cast<long>(pick(toks.size())));
        s.clear();
        for (auto& t : toks) s += t;
        break;
      case 5:  // insert a token
        toks.insert(toks.begin() + static_cast<long>(pick(toks.size() + 1)), vocab);
        s.clear();
        for (auto& t : toks) s += t;
        break;
      case 6:  // replace a token
        if (!toks.empty()) toks[pick(toks.size())] = vocab;
        s.clear();
        for (auto& t : toks) s += t;
        break;
      case 7:  // swap two tokens
        if (toks.size() > 1) std::swap(toks[pick(toks.size())], toks[pick(toks.size())]);
        s.clear();
        for (auto& t : toks) s += t;
        break;
      case 8: {  // duplicate a span of tokens
        if (toks.empty()) break;
        size_t a = pick(toks.size()), n = 1 + pick(8);
        std::vector<std::string> span(toks.begin() + static_cast<long>(a),
                                      toks.begin() + static_cast<long>(std::min(a + n,
                                                                                toks.size())));
        toks.insert(toks.begin() + static_cast<long>(pick(toks.size() + 1)), span.begin(),
                    span.end());
        s.clear();
        for (auto& t : toks) s += t;
        break;
      }
      default: {  // replace a name or number with another word of the vocabulary
        std::vector<size_t> words;
        for (size_t i = 0; i < toks.size(); ++i)
          if (std::isalnum(static_cast<unsigned char>(toks[i][0]))) words.push_back(i);
        if (!words.empty()) toks[words[pick(words.size())]] = vocab;
        s.clear();
        for (auto& t : toks) s += t;
        break;
      }
    }
  }
  return s;
}

// Parses one candidate; returns an empty string when the behaviour is right, else a reason.
std::string check_one(const std::string& src, double* seconds) {
  auto t0 = std::chrono::steady_clock::now();
  std::string problem;
  try {
    auto programs = parse_source(src, "f.attn");
    if (programs.empty()) problem = "parse_source returned no program and no error";
    for (const Program& p : programs) {
      if (p.outputs.empty()) problem = "a program without outputs was accepted";
      (void)p.str();
      (void)p.hash();
    }
  } catch (const SourceError& e) {
    std::string what = e.what();
    if (e.loc.line < 1 || e.loc.col < 1) problem = "a diagnostic without a location: " + what;
    std::string head = "f.attn:" + std::to_string(e.loc.line) + ":" + std::to_string(e.loc.col) +
                       ": error: ";
    if (what.rfind(head, 0) != 0) problem = "a malformed diagnostic: " + what;
    if (std::count(what.begin(), what.end(), '\n') < 2 || what.back() != '^')
      problem = "a diagnostic without its source line and caret: " + what;
    if (e.message.empty()) problem = "an empty message";
  } catch (const std::exception& e) {
    problem = std::string("an exception other than SourceError: ") + e.what();
  } catch (...) {
    problem = "a non-standard exception";
  }
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (problem.empty() && *seconds > 1.0)
    problem = "parsing took " + std::to_string(*seconds) + " s";
  return problem;
}

TEST(Robustness, OriginalSourcesParse) {
  for (const Source& s : corpus()) {
    EXPECT_NO_THROW(parse_source(s.text, s.name)) << s.name;
  }
}

TEST(Robustness, MutatedSourcesNeverCrash) {
  const uint64_t seed = env_or("FLASHGEN_FUZZ_SEED", 20261130);
  const uint64_t iters = env_or("FLASHGEN_FUZZ_ITERS", 6000);
  auto sources = corpus();
  std::mt19937_64 rng(seed);
  size_t accepted = 0, rejected = 0;
  double slowest = 0;
  for (uint64_t it = 0; it < iters; ++it) {
    const Source& base = sources[it % sources.size()];
    std::string src = mutate(base.text, rng);
    double secs = 0;
    std::string problem = check_one(src, &secs);
    slowest = std::max(slowest, secs);
    ASSERT_TRUE(problem.empty()) << "seed " << seed << ", iteration " << it << ", from "
                                 << base.name << ": " << problem << "\n--- mutated source ---\n"
                                 << src << "\n--- end ---";
    try {
      parse_source(src, "f.attn");
      ++accepted;
    } catch (const SourceError&) {
      ++rejected;
    }
  }
  // Mutations must reach both outcomes, or they are not exercising the parser.
  EXPECT_GT(accepted, 0u);
  EXPECT_GT(rejected, iters / 2);
  std::printf("seed %llu: %zu accepted, %zu rejected, slowest parse %.4f s\n",
              static_cast<unsigned long long>(seed), accepted, rejected, slowest);
}

// The libFuzzer corpus (fuzz/corpus/parser: hand-written corners of the language, and what
// scripts/fuzz.sh found that adds coverage, crashes included once fixed) replayed through the
// same checks, so that builds without clang run it too.
TEST(Robustness, FuzzCorpus) {
  const fs::path dir = fs::path(FLASHGEN_SOURCE_DIR) / "fuzz" / "corpus" / "parser";
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty()) << dir;
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    double secs = 0;
    std::string problem = check_one(ss.str(), &secs);
    EXPECT_TRUE(problem.empty()) << f.filename() << ": " << problem;
  }
}

TEST(Robustness, RandomTokenSoup) {
  const uint64_t seed = env_or("FLASHGEN_FUZZ_SEED", 20261130) + 1;
  std::mt19937_64 rng(seed);
  for (int it = 0; it < 2000; ++it) {
    std::string src = it % 2 ? "program p(q: f32[m, d], t: i32[m]) {\n  out o: f32[m] = " : "";
    int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      src += kVocabulary[rng() % std::size(kVocabulary)];
      if (rng() % 2) src += " ";
    }
    double secs = 0;
    std::string problem = check_one(src, &secs);
    ASSERT_TRUE(problem.empty()) << "seed " << seed << ", iteration " << it << ": " << problem
                                 << "\n--- source ---\n" << src << "\n--- end ---";
  }
}

}  // namespace
}  // namespace flashgen
