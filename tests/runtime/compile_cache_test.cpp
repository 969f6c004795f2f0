// The disk cache: keys, round trips, corruption and truncation detected, environment
// overrides, concurrent writers.
#include "runtime/compile_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "flashgen/error.h"
#include "runtime/runtime_test_util.h"

namespace flashgen {
namespace {

namespace fs = std::filesystem;
using testing_runtime::ScopedEnv;
using testing_runtime::TempCacheDir;

std::string random_bytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(CompileCache, KeyIsStableHexAndSeparatesParts) {
  std::string k = cache_key({"source", "g++ 12", "-O3"});
  EXPECT_EQ(k.size(), 32u);
  EXPECT_EQ(k.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(k, cache_key({"source", "g++ 12", "-O3"}));
  EXPECT_NE(k, cache_key({"source", "g++ 12", "-O2"}));
  EXPECT_NE(k, cache_key({"sourc", "eg++ 12", "-O3"}));  // boundaries matter
  EXPECT_NE(k, cache_key({"source", "g++ 12", "-O3", ""}));
  // Random distinct inputs give distinct keys.
  std::mt19937_64 rng(12345);
  std::set<std::string> keys;
  for (int i = 0; i < 2000; ++i) {
    std::string a = random_bytes(rng, rng() % 40), b = std::to_string(i);
    keys.insert(cache_key({a, b}));
  }
  EXPECT_EQ(keys.size(), 2000u);
}

TEST(CompileCache, StoreLookupReadRoundTripAtOddSizes) {
  TempCacheDir dir;
  std::mt19937_64 rng(7);
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{77}, size_t{1000}, size_t{100003}}) {
    std::string key = cache_key({"roundtrip", std::to_string(n)});
    EXPECT_FALSE(cache_lookup(key, ".bin"));
    std::string bytes = random_bytes(rng, n);
    std::string path = cache_store(key, ".bin", bytes);
    EXPECT_EQ(fs::path(path).parent_path(), fs::path(dir.path()));
    std::optional<std::string> found = cache_lookup(key, ".bin");
    ASSERT_TRUE(found) << n;
    EXPECT_EQ(*found, path);
    EXPECT_EQ(cache_read(key, ".bin"), bytes);
    EXPECT_FALSE(cache_lookup(key, ".other"));  // the suffix is part of the entry's name
  }
}

TEST(CompileCache, CorruptOrTruncatedEntriesAreMissesAndGetRebuilt) {
  TempCacheDir dir;
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 60; ++trial) {
    std::string key = cache_key({"corrupt", std::to_string(trial)});
    std::string bytes = random_bytes(rng, 1 + rng() % 3000);
    std::string path = cache_store(key, ".so", bytes);
    std::string file = *read_file_bytes(path);
    ASSERT_GT(file.size(), bytes.size());
    std::string damaged = file;
    if (trial % 2 == 0) {
      size_t at = rng() % file.size();  // payload or trailer
      damaged[at] = static_cast<char>(damaged[at] ^ (1 + rng() % 255));
    } else {
      damaged.resize(rng() % file.size());  // a writer that died mid-way (without rename)
    }
    write_raw(path, damaged);
    EXPECT_FALSE(cache_lookup(key, ".so")) << "trial " << trial;
    EXPECT_FALSE(cache_read(key, ".so")) << "trial " << trial;
    cache_store(key, ".so", bytes);  // the caller's rebuild replaces it
    EXPECT_EQ(cache_read(key, ".so"), bytes);
  }
  // A lone trailer whose recorded size does not match the file is rejected.
  std::string key = cache_key({"fake"});
  std::string real = *read_file_bytes(cache_store(key, ".x", "abc"));
  write_raw(dir.path() + "/" + key + ".x", real.substr(3));
  EXPECT_FALSE(cache_lookup(key, ".x"));
}

TEST(CompileCache, EnvironmentChoosesTheFolder) {
  std::string base =
      (fs::temp_directory_path() / ("flashgen-env-test-" + std::to_string(std::random_device{}())))
          .string();
  {
    ScopedEnv a("FLASHGEN_CACHE_DIR", base + "/explicit");
    ScopedEnv b("XDG_CACHE_HOME", base + "/xdg");
    EXPECT_EQ(cache_dir(), base + "/explicit");
    EXPECT_TRUE(fs::is_directory(base + "/explicit"));
  }
  {
    ScopedEnv a("FLASHGEN_CACHE_DIR", std::nullopt);
    ScopedEnv b("XDG_CACHE_HOME", base + "/xdg");
    EXPECT_EQ(cache_dir(), base + "/xdg/flashgen");
    std::string key = cache_key({"env"});
    cache_store(key, ".bin", "payload");
    EXPECT_TRUE(fs::exists(base + "/xdg/flashgen/" + key + ".bin"));
  }
  {
    ScopedEnv a("FLASHGEN_CACHE_DIR", "");
    ScopedEnv b("XDG_CACHE_HOME", std::nullopt);
    ScopedEnv c("HOME", base + "/home");
    EXPECT_EQ(cache_dir(), base + "/home/.cache/flashgen");
  }
  {
    // A folder that cannot be created is a clear error naming it.
    std::string file = base + "/a-file";
    write_raw(file, "x");
    ScopedEnv a("FLASHGEN_CACHE_DIR", file + "/sub");
    try {
      cache_dir();
      FAIL() << "expected BackendError";
    } catch (const BackendError& e) {
      EXPECT_NE(std::string(e.what()).find(file + "/sub"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("FLASHGEN_CACHE_DIR"), std::string::npos);
    }
  }
  fs::remove_all(base);
}

TEST(CompileCache, ConcurrentWritersNeverExposeAPartialEntry) {
  TempCacheDir dir;
  const std::string key = cache_key({"concurrent"});
  constexpr int kWriters = 6;
  // Each writer has its own payload (as if compilers were not byte-reproducible).
  std::vector<std::string> payloads;
  std::mt19937_64 rng(2024);
  for (int i = 0; i < kWriters; ++i) payloads.push_back(random_bytes(rng, 50000 + 1237 * i));
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0}, hits{0};
  std::thread reader([&] {
    while (!stop) {
      if (std::optional<std::string> got = cache_read(key, ".so")) {
        ++hits;
        if (std::find(payloads.begin(), payloads.end(), *got) == payloads.end()) ++bad;
      }
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < 40; ++i) cache_store(key, ".so", payloads[w]);
    });
  }
  for (std::thread& t : writers) t.join();
  stop = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
  std::optional<std::string> final_bytes = cache_read(key, ".so");
  ASSERT_TRUE(final_bytes);
  EXPECT_NE(std::find(payloads.begin(), payloads.end(), *final_bytes), payloads.end());
  // No temporary files are left behind.
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().rfind(".tmp-", 0), std::string::npos)
        << entry.path();
  }
}

TEST(CompileCache, SavedSourceIsKeptUnderSrc) {
  TempCacheDir dir;
  std::string path = cache_save_source("abc123", ".cpp", "int main() {}\n");
  EXPECT_EQ(path, dir.path() + "/src/abc123.cpp");
  EXPECT_EQ(read_file_bytes(path), "int main() {}\n");
}

}  // namespace
}  // namespace flashgen
