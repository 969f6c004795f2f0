// numpy .npy files (format versions 1.0, 2.0 and 3.0 headers; little-endian; C or Fortran order).
// Reads <f2 <f4 <f8 |b1 |i1 |u1 <i2 <i4 <i8 <u2 <u4 <u8 and bfloat16 stored as '<V2' is not
// supported (numpy has no bf16). Throws CallError naming the file on malformed input.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "flashgen/tensor.h"

namespace flashgen {

// The numpy dtype a tensor was stored with, as read from the header.
struct NpyArray {
  Tensor tensor;          // f16 -> DType::f16, f32 -> f32, f64 -> f64, bool, i32, i64 (other
                          // integer widths widen to i64)
  std::string descr;      // e.g. "<f4"
};

NpyArray read_npy(const std::string& path);
// Writes a contiguous copy. f64 tensors as <f8, f32 as <f4, f16 as <f2, bf16/f8 as <f4 values,
// bool as |b1, i32 as <i4, i64 as <i8.
void write_npy(const std::string& path, const Tensor& t);

// Writes several .npy files, all or nothing: each is first written to a temporary file next to
// its target (".NAME.tmpPID"), then every temporary is renamed over its target. If any write or
// rename fails, every temporary is removed, targets that did not exist before are removed, and
// targets that did exist get their previous file back (it is kept under a hard link,
// ".NAME.bakPID", until every rename succeeded), then a CallError names the failing file.
// A process killed during the renames can leave a mix of new and previous files and the
// temporary and backup files. The folders must exist.
void write_npy_files(const std::vector<std::pair<std::string, Tensor>>& files);

// numpy's name of a dtype descr ("<f4" -> "float32", "|u1" -> "uint8", "|b1" -> "bool"), or
// the descr itself when it is not one of the supported ones.
std::string npy_dtype_name(const std::string& descr);

// `s` with control bytes (except tab and newline when keep_newlines), DEL and bytes that are
// not part of valid UTF-8 written as \xNN, so a message never echoes raw bytes to a terminal.
std::string escape_bytes(const std::string& s, bool keep_newlines = false);

}  // namespace flashgen
