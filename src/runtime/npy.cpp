// numpy .npy reading and writing (format 1.0, 2.0 and 3.0 headers).
//
// The header is a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)};
// it is parsed by a small literal parser (strings, True/False, integer tuples), keys in any
// order. Little-endian data only ('<', '=' and '|'); a big-endian descr is a CallError naming the
// file. Fortran-order arrays are read through a column-major view and copied to row-major.
// Integer widths other than i4/i8 widen to i64 (a u8 value above 2^63-1 is an error).
// Writing uses version 1.0 (2.0 when the header needs it), padded to 64 bytes as numpy does.
// Tests: tests/npy/npy_test.cpp (round trips; hand-made numpy byte images; malformed files).
#include "flashgen/npy.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include "flashgen/error.h"

namespace flashgen {
namespace {

// Messages echo the path and header bytes of untrusted files: escape_bytes keeps them printable.
[[noreturn]] void fail(const std::string& path, const std::string& msg) {
  throw CallError(escape_bytes(path + ": " + msg));
}

// A tiny parser for the header's Python literal.
class HeaderParser {
 public:
  HeaderParser(const std::string& path, const std::string& s) : path_(path), s_(s) {}

  struct Value {
    enum Kind { Str, Bool, Tuple } kind = Str;
    std::string str;
    bool b = false;
    std::vector<int64_t> ints;
  };

  std::map<std::string, Value> dict() {
    std::map<std::string, Value> out;
    expect('{');
    for (;;) {
      skip();
      if (peek() == '}') { ++i_; break; }
      std::string key = string();
      expect(':');
      out[key] = value();
      skip();
      if (peek() == ',') { ++i_; continue; }
      expect('}');
      break;
    }
    return out;
  }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  void expect(char c) {
    skip();
    if (peek() != c) bad(std::string("expected '") + c + "'");
    ++i_;
  }
  [[noreturn]] void bad(const std::string& what) {
    fail(path_, "malformed .npy header (" + what + " at offset " + std::to_string(i_) + "): " +
                    s_);
  }
  std::string string() {
    skip();
    char q = peek();
    if (q != '\'' && q != '"') bad("expected a string");
    ++i_;
    std::string r;
    while (i_ < s_.size() && s_[i_] != q) r += s_[i_++];
    if (i_ >= s_.size()) bad("unterminated string");
    ++i_;
    return r;
  }
  Value value() {
    skip();
    Value v;
    char c = peek();
    if (c == '\'' || c == '"') {
      v.str = string();
    } else if (s_.compare(i_, 4, "True") == 0) {
      v.kind = Value::Bool, v.b = true, i_ += 4;
    } else if (s_.compare(i_, 5, "False") == 0) {
      v.kind = Value::Bool, v.b = false, i_ += 5;
    } else if (c == '(') {
      v.kind = Value::Tuple;
      ++i_;
      for (;;) {
        skip();
        if (peek() == ')') { ++i_; break; }
        if (!std::isdigit(static_cast<unsigned char>(peek()))) bad("expected an extent");
        int64_t n = 0;
        while (std::isdigit(static_cast<unsigned char>(peek()))) {
          if (n > (std::numeric_limits<int64_t>::max() - 9) / 10) bad("extent too large");
          n = n * 10 + (s_[i_++] - '0');
        }
        if (peek() == 'L') ++i_;  // Python 2 longs
        v.ints.push_back(n);
        skip();
        if (peek() == ',') { ++i_; continue; }
        if (peek() != ')') bad("expected ',' or ')'");
      }
    } else if (c == '[') {
      bad("structured dtypes are not supported");
    } else {
      bad("unexpected value");
    }
    return v;
  }

  const std::string& path_;
  const std::string& s_;
  size_t i_ = 0;
};

struct Kind {
  DType dtype;  // the tensor's dtype after reading
  int bytes;    // item size in the file
  char code;    // 'f', 'i', 'u', 'b'
};

Kind parse_descr(const std::string& path, const std::string& descr) {
  if (descr.size() < 3) fail(path, "unsupported dtype '" + descr + "'");
  char order = descr[0];
  std::string t = descr.substr(1);
  if (order == '>') {
    fail(path, "big-endian data ('" + descr + "') is not supported; save it little-endian "
               "(numpy: a.astype(a.dtype.newbyteorder('<')))");
  }
  if (order != '<' && order != '|' && order != '=') fail(path, "unsupported dtype '" + descr + "'");
  static const std::map<std::string, Kind> kinds = {
      {"f2", {DType::f16, 2, 'f'}},     {"f4", {DType::f32, 4, 'f'}},
      {"f8", {DType::f64, 8, 'f'}},     {"b1", {DType::boolean, 1, 'b'}},
      {"i1", {DType::i64, 1, 'i'}},     {"u1", {DType::i64, 1, 'u'}},
      {"i2", {DType::i64, 2, 'i'}},     {"u2", {DType::i64, 2, 'u'}},
      {"i4", {DType::i32, 4, 'i'}},     {"u4", {DType::i64, 4, 'u'}},
      {"i8", {DType::i64, 8, 'i'}},     {"u8", {DType::i64, 8, 'u'}},
  };
  auto it = kinds.find(t);
  if (it == kinds.end()) {
    fail(path, "unsupported dtype '" + descr +
                   "' (supported: <f2 <f4 <f8 |b1 |i1 |u1 <i2 <u2 <i4 <u4 <i8 <u8)");
  }
  return it->second;
}

uint64_t read_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path, "is a directory, not a .npy file");
  errno = 0;
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f)
    fail(path, std::string("cannot open file: ") +
                   (errno ? std::strerror(errno) : "unknown error"));
  std::streamoff size = f.tellg();
  if (size < 0) fail(path, "cannot read file");
  std::vector<uint8_t> buf(static_cast<size_t>(size));
  f.seekg(0);
  if (!f.read(reinterpret_cast<char*>(buf.data()), size)) fail(path, "cannot read file");
  if (buf.size() < 10 || std::memcmp(buf.data(), "\x93NUMPY", 6) != 0) {
    fail(path, "not a .npy file (bad magic)");
  }
  int major = buf[6];
  size_t hlen, hstart;
  if (major == 1) {
    hlen = read_le(&buf[8], 2), hstart = 10;
  } else if (major == 2 || major == 3) {
    if (buf.size() < 12) fail(path, "truncated header");
    hlen = read_le(&buf[8], 4), hstart = 12;
  } else {
    fail(path, "unsupported .npy format version " + std::to_string(major) + "." +
                   std::to_string(buf[7]));
  }
  if (hstart + hlen > buf.size()) fail(path, "truncated header");
  std::string header(reinterpret_cast<const char*>(&buf[hstart]), hlen);
  auto dict = HeaderParser(path, header).dict();
  for (const char* key : {"descr", "fortran_order", "shape"}) {
    if (!dict.count(key)) fail(path, std::string("header has no '") + key + "': " + header);
  }
  const auto& d = dict["descr"];
  const auto& fo = dict["fortran_order"];
  const auto& sh = dict["shape"];
  if (d.kind != HeaderParser::Value::Str || fo.kind != HeaderParser::Value::Bool ||
      sh.kind != HeaderParser::Value::Tuple) {
    fail(path, "malformed .npy header: " + header);
  }
  Kind kind = parse_descr(path, d.str);
  std::vector<int64_t> shape = sh.ints;
  int64_t n = 1;
  for (int64_t e : shape) {
    if (e != 0 && n > std::numeric_limits<int64_t>::max() / kind.bytes / e) {
      fail(path, "shape too large");
    }
    n *= e;
  }
  size_t data_start = hstart + hlen;
  if (buf.size() - data_start < static_cast<size_t>(n) * kind.bytes) {
    fail(path, "truncated data: the header says " + std::to_string(n) + " elements of " +
                   std::to_string(kind.bytes) + " bytes, the file has " +
                   std::to_string(buf.size() - data_start) + " bytes of data");
  }
  // Fill a tensor in file order: the logical shape, or its reverse for Fortran order.
  std::vector<int64_t> file_shape = shape;
  if (fo.b) file_shape.assign(shape.rbegin(), shape.rend());
  Tensor t(kind.dtype, file_shape);
  const uint8_t* src = buf.data() + data_start;  // may be the end (an empty array)
  uint8_t* dst = static_cast<uint8_t*>(t.data());
  if (kind.dtype == DType::i64 && kind.bytes < 8) {
    for (int64_t i = 0; i < n; ++i) {
      uint64_t raw = read_le(src + i * kind.bytes, kind.bytes);
      int64_t v;
      if (kind.code == 'i') {  // sign-extend
        int shift = 64 - 8 * kind.bytes;
        v = static_cast<int64_t>(raw << shift) >> shift;
      } else {
        v = static_cast<int64_t>(raw);
      }
      std::memcpy(dst + 8 * i, &v, 8);
    }
  } else if (kind.code == 'u' && kind.bytes == 8) {
    for (int64_t i = 0; i < n; ++i) {
      uint64_t raw = read_le(src + 8 * i, 8);
      if (raw > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(path, "u8 value " + std::to_string(raw) + " at element " + std::to_string(i) +
                       " does not fit in i64");
      }
      std::memcpy(dst + 8 * i, &raw, 8);
    }
  } else if (kind.code == 'b') {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] ? 1 : 0;
  } else {
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * kind.bytes);  // little-endian host
  }
  if (fo.b && shape.size() > 1) {
    // Column-major: the first logical dim has stride 1.
    std::vector<int64_t> strides(shape.size());
    int64_t acc = 1;
    for (size_t i = 0; i < shape.size(); ++i) strides[i] = acc, acc *= shape[i];
    t = t.with_strides(shape, strides).contiguous();
  }
  return NpyArray{std::move(t), d.str};
}

void write_npy(const std::string& path, const Tensor& t) {
  DType out;
  std::string descr;
  switch (t.dtype()) {
    case DType::f64: out = DType::f64, descr = "<f8"; break;
    case DType::f16: out = DType::f16, descr = "<f2"; break;
    case DType::f32: case DType::bf16: case DType::f8e4m3: case DType::f8e5m2:
      out = DType::f32, descr = "<f4";
      break;
    case DType::boolean: out = DType::boolean, descr = "|b1"; break;
    case DType::i32: out = DType::i32, descr = "<i4"; break;
    case DType::i64: out = DType::i64, descr = "<i8"; break;
    default: fail(path, "cannot write dtype");
  }
  Tensor c = t.to(out);
  std::ostringstream h;
  h << "{'descr': '" << descr << "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < c.shape().size(); ++i) {
    h << c.shape()[i] << (c.shape().size() == 1 ? "," : (i + 1 < c.shape().size() ? ", " : ""));
  }
  h << "), }";
  std::string header = h.str();
  // Pad with spaces so that magic + length + header + '\n' is a multiple of 64.
  int version = header.size() + 1 + 10 > 65535 ? 2 : 1;
  size_t prefix = version == 1 ? 10 : 12;
  size_t total = (prefix + header.size() + 1 + 63) / 64 * 64;
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';
  std::string out_bytes = "\x93NUMPY";
  out_bytes += static_cast<char>(version);
  out_bytes += '\0';
  size_t hl = header.size();
  for (size_t i = 0; i < (version == 1 ? 2u : 4u); ++i) {
    out_bytes += static_cast<char>((hl >> (8 * i)) & 0xff);
  }
  out_bytes += header;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail(path, "cannot open file for writing");
  f.write(out_bytes.data(), static_cast<std::streamsize>(out_bytes.size()));
  f.write(static_cast<const char*>(c.data()), static_cast<std::streamsize>(c.nbytes()));
  if (!f) fail(path, "write failed");
}

std::string npy_dtype_name(const std::string& descr) {
  static const std::map<std::string, std::string> names = {
      {"f2", "float16"}, {"f4", "float32"}, {"f8", "float64"}, {"b1", "bool"},
      {"i1", "int8"},    {"u1", "uint8"},   {"i2", "int16"},   {"u2", "uint16"},
      {"i4", "int32"},   {"u4", "uint32"},  {"i8", "int64"},   {"u8", "uint64"},
  };
  if (descr.size() >= 2) {
    auto it = names.find(descr.substr(1));
    if (it != names.end()) return it->second;
  }
  return descr;
}

std::string escape_bytes(const std::string& s, bool keep_newlines) {
  std::string out;
  out.reserve(s.size());
  auto hex = [&](unsigned char c) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", c);
    out += buf;
  };
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      bool ok = (c >= 0x20 && c != 0x7f) || (keep_newlines && (c == '\n' || c == '\t'));
      if (ok) out += static_cast<char>(c);
      else hex(c);
      ++i;
      continue;
    }
    // A valid UTF-8 sequence (no overlong forms, no surrogates, at most U+10FFFF) is kept.
    int len = c >= 0xc2 && c <= 0xdf   ? 2
              : c >= 0xe0 && c <= 0xef ? 3
              : c >= 0xf0 && c <= 0xf4 ? 4
                                       : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k)
      ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (ok && len >= 3) {
      unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 >= 0xa0) || (c == 0xf0 && c1 < 0x90) ||
          (c == 0xf4 && c1 >= 0x90))
        ok = false;
    }
    if (!ok) {
      hex(c);
      ++i;
      continue;
    }
    out.append(s, i, len);
    i += len;
  }
  return out;
}

void write_npy_files(const std::vector<std::pair<std::string, Tensor>>& files) {
  namespace fs = std::filesystem;
  const std::string pid = std::to_string(::getpid());
  auto sibling = [&](const std::string& path, const char* kind) {
    fs::path p(path);
    std::string name = ".";  // (appending: GCC 12's -Wrestrict misfires on "." + a string)
    name += p.filename().string() + kind + pid;
    return (p.parent_path() / name).string();
  };
  struct Entry {
    std::string target, tmp, backup;
    bool tmp_written = false, backed_up = false, renamed = false;
  };
  std::vector<Entry> entries;
  for (const auto& [path, t] : files)
    entries.push_back({path, sibling(path, ".tmp"), sibling(path, ".bak")});
  std::error_code ec;
  // Undo everything done so far; returns nothing and never throws.
  auto roll_back = [&] {
    for (Entry& e : entries) {
      if (e.tmp_written && !e.renamed) fs::remove(e.tmp, ec);
      if (e.renamed) {
        if (e.backed_up) fs::rename(e.backup, e.target, ec);
        else fs::remove(e.target, ec);
      } else if (e.backed_up) {
        fs::remove(e.backup, ec);
      }
    }
  };
  try {
    for (size_t i = 0; i < entries.size(); ++i) {
      entries[i].tmp_written = true;  // a failing write may leave a partial file
      write_npy(entries[i].tmp, files[i].second);
    }
    for (Entry& e : entries) {
      if (fs::is_directory(e.target, ec)) fail(e.target, "cannot write: it is a directory");
      // Keep the previous file under a second name (a hard link, else a copy), so a later
      // failure can restore it.
      if (::link(e.target.c_str(), e.backup.c_str()) == 0) {
        e.backed_up = true;
      } else if (errno != ENOENT) {
        const int link_errno = errno;
        e.backed_up = true;  // a failing copy may leave a partial backup: roll_back removes it
        if (!fs::copy_file(e.target, e.backup, fs::copy_options::overwrite_existing, ec))
          fail(e.target, std::string("cannot keep the previous file while replacing it: ") +
                             std::strerror(link_errno) + ", " + ec.message());
      }
      fs::rename(e.tmp, e.target, ec);
      if (ec) fail(e.target, "cannot write: " + ec.message());
      e.renamed = true;
    }
  } catch (...) {
    roll_back();
    throw;
  }
  for (Entry& e : entries)
    if (e.backed_up) fs::remove(e.backup, ec);
}

}  // namespace flashgen
