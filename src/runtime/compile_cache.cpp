// The on-disk compile cache: see compile_cache.h for the layout and the guarantees.
// Tests: tests/runtime/compile_cache_test.cpp.
#include "runtime/compile_cache.h"

#include <pwd.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "flashgen/error.h"

namespace flashgen {
namespace {

namespace fs = std::filesystem;

// Bump when the entry format or the meaning of a key changes: old entries become misses.
constexpr std::string_view kFormatVersion = "flashgen-cache-1";

// Trailer: magic, payload size (LE u64), payload FNV-1a 64 (LE u64), closing magic.
constexpr std::string_view kMagicOpen = "FGCACHE1";
constexpr std::string_view kMagicClose = "1EHCACGF";
constexpr size_t kTrailerSize = 32;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_u64(std::string_view s) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[i]);
  return v;
}

std::string make_trailer(std::string_view payload) {
  std::string t;
  t.reserve(kTrailerSize);
  t.append(kMagicOpen);
  put_u64(t, payload.size());
  put_u64(t, fnv1a64(payload));
  t.append(kMagicClose);
  return t;
}

// The payload length if `file` is a complete entry, std::nullopt otherwise.
std::optional<size_t> check_entry(std::string_view file) {
  if (file.size() < kTrailerSize) return std::nullopt;
  std::string_view t = file.substr(file.size() - kTrailerSize);
  if (t.substr(0, 8) != kMagicOpen || t.substr(24, 8) != kMagicClose) return std::nullopt;
  std::uint64_t size = get_u64(t.substr(8, 8));
  if (size != file.size() - kTrailerSize) return std::nullopt;
  if (get_u64(t.substr(16, 8)) != fnv1a64(file.substr(0, size))) return std::nullopt;
  return static_cast<size_t>(size);
}

std::string entry_path(std::string_view key, std::string_view suffix) {
  return cache_dir() + "/" + std::string(key) + std::string(suffix);
}

// Writes `parts` to a temporary file next to `path` and renames it onto `path`.
void atomic_write(const std::string& path, std::initializer_list<std::string_view> parts) {
  fs::path target(path);
  std::string tmp = (target.parent_path() / (".tmp-" + target.filename().string() + "-")).string();
  static std::atomic<std::uint64_t> counter{0};
  static const std::uint64_t salt = std::random_device{}();
  tmp += std::to_string(::getpid()) + "-" + std::to_string(salt) + "-" +
         std::to_string(counter.fetch_add(1));
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) {
    throw BackendError("flashgen cache: cannot create " + tmp + ": " + std::strerror(errno) +
                       " (set FLASHGEN_CACHE_DIR to a writable folder)");
  }
  bool ok = true;
  for (std::string_view p : parts) {
    if (!p.empty() && std::fwrite(p.data(), 1, p.size(), f) != p.size()) ok = false;
  }
  int saved_errno = errno;
  if (std::fclose(f) != 0) {
    ok = false;
    saved_errno = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    throw BackendError("flashgen cache: cannot write " + tmp + ": " + std::strerror(saved_errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    saved_errno = errno;
    std::remove(tmp.c_str());
    throw BackendError("flashgen cache: cannot rename " + tmp + " to " + path + ": " +
                       std::strerror(saved_errno));
  }
}

}  // namespace

std::uint64_t fnv1a64(std::string_view bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string cache_dir() {
  std::string dir = env("FLASHGEN_CACHE_DIR");
  if (dir.empty()) {
    std::string xdg = env("XDG_CACHE_HOME");
    if (!xdg.empty() && xdg[0] == '/') {  // the XDG spec ignores relative paths
      dir = xdg + "/flashgen";
    } else {
      std::string home = env("HOME");
      if (home.empty()) {
        if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) home = pw->pw_dir;
      }
      if (home.empty()) {
        throw BackendError(
            "flashgen cache: no cache folder: HOME is not set (set FLASHGEN_CACHE_DIR)");
      }
      dir = home + "/.cache/flashgen";
    }
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw BackendError("flashgen cache: cannot create the cache folder " + dir + ": " +
                       (ec ? ec.message() : std::string("not a folder")) +
                       " (set FLASHGEN_CACHE_DIR to a writable folder)");
  }
  return dir;
}

std::string cache_key(std::initializer_list<std::string_view> parts) {
  // 128-bit FNV-1a (prime 2^88 + 2^8 + 0x3b).
  using u128 = unsigned __int128;
  const u128 prime = (static_cast<u128>(1) << 88) | 0x13b;
  u128 h = (static_cast<u128>(0x6c62272e07bb0142ull) << 64) | 0x62b821756295c58dull;
  auto feed = [&](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= prime;
    }
  };
  auto feed_part = [&](std::string_view s) {
    std::string len;
    put_u64(len, s.size());
    feed(len);
    feed(s);
  };
  feed_part(kFormatVersion);
  for (std::string_view p : parts) feed_part(p);
  static const char* digits = "0123456789abcdef";
  std::string out(32, '0');
  for (int i = 31; i >= 0; --i) {
    out[i] = digits[static_cast<unsigned>(h & 0xf)];
    h >>= 4;
  }
  return out;
}

std::optional<std::string> cache_lookup(std::string_view key, std::string_view suffix) {
  std::string path = entry_path(key, suffix);
  std::optional<std::string> bytes = read_file_bytes(path);
  if (!bytes || !check_entry(*bytes)) return std::nullopt;
  return path;
}

std::optional<std::string> cache_read(std::string_view key, std::string_view suffix) {
  std::optional<std::string> bytes = read_file_bytes(entry_path(key, suffix));
  if (!bytes) return std::nullopt;
  std::optional<size_t> size = check_entry(*bytes);
  if (!size) return std::nullopt;
  bytes->resize(*size);
  return bytes;
}

std::string cache_store(std::string_view key, std::string_view suffix, std::string_view bytes) {
  std::string path = entry_path(key, suffix);
  std::string trailer = make_trailer(bytes);
  atomic_write(path, {bytes, trailer});
  return path;
}

std::string cache_save_source(std::string_view key, std::string_view suffix,
                              std::string_view text) {
  std::string dir = cache_dir() + "/src";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    throw BackendError("flashgen cache: cannot create " + dir + ": " + ec.message());
  }
  std::string path = dir + "/" + std::string(key) + std::string(suffix);
  atomic_write(path, {text});
  return path;
}

std::string cache_temp_path(std::string_view key, std::string_view suffix) {
  static std::atomic<std::uint64_t> counter{0};
  static const std::uint64_t salt = std::random_device{}();
  return cache_dir() + "/.tmp-" + std::string(key) + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(salt) + "-" + std::to_string(counter.fetch_add(1)) + std::string(suffix);
}

std::optional<std::string> read_file_bytes(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::nullopt;
  std::string out;
  std::array<char, 1 << 16> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) out.append(buf.data(), n);
  bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return std::nullopt;
  return out;
}

}  // namespace flashgen
