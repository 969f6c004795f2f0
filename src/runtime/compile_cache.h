// The on-disk cache of compiled artifacts (host shared libraries, cubins).
//
// Where: $FLASHGEN_CACHE_DIR if set, else $XDG_CACHE_HOME/flashgen, else ~/.cache/flashgen
// (created on first use). What: one file per entry, `<dir>/<key><suffix>`, holding the payload
// followed by a fixed-size trailer (magic, payload size, payload checksum). A lookup re-checks
// the trailer and the checksum, so a truncated or corrupt entry is reported as a miss and the
// caller rebuilds it; it is never trusted. ELF loaders ignore trailing bytes, so a `.so` entry
// can be dlopen'ed in place. Writes go to a unique temporary file in the same folder and are
// renamed into place, so concurrent writers (threads or processes) of the same key never leave a
// partial entry: the last rename wins and every rename installs a complete entry.
// Tests: tests/runtime/compile_cache_test.cpp.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace flashgen {

// The cache folder (created if missing; BackendError if it cannot be created). Read from the
// environment on every call, so a test or a user can redirect it at any time.
std::string cache_dir();

// A 128-bit FNV-1a hash, as 32 lowercase hex digits, of the parts (each length-prefixed, so
// ("ab","c") and ("a","bc") differ) and of the cache format version.
std::string cache_key(std::initializer_list<std::string_view> parts);

// The path of the entry if it exists and is intact; std::nullopt otherwise. A corrupt entry is
// left in place (another process may be replacing it right now) and the caller's store
// overwrites it.
std::optional<std::string> cache_lookup(std::string_view key, std::string_view suffix);

// The payload of an intact entry (the bytes given to cache_store, without the trailer).
std::optional<std::string> cache_read(std::string_view key, std::string_view suffix);

// Stores `bytes` under key+suffix atomically; returns the entry's path. BackendError on I/O
// failure.
std::string cache_store(std::string_view key, std::string_view suffix, std::string_view bytes);

// Writes `text` to `<dir>/src/<key><suffix>` (atomically) and returns that path: where the
// generated source of a failed (or any) compilation is kept for the user to read.
std::string cache_save_source(std::string_view key, std::string_view suffix, std::string_view text);

// A unique path for a temporary file in the cache folder (same file system as the entries, so a
// rename into place is atomic). The caller removes it.
std::string cache_temp_path(std::string_view key, std::string_view suffix);

// 64-bit FNV-1a of bytes (the entry checksum; exposed for tests and other cache users).
std::uint64_t fnv1a64(std::string_view bytes);

// Reads a whole file (std::nullopt if it cannot be opened).
std::optional<std::string> read_file_bytes(const std::string& path);

}  // namespace flashgen
