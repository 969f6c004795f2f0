// numpy .npy files (format versions 1.0, 2.0 and 3.0 headers; little-endian; C or Fortran order).
// Reads <f2 <f4 <f8 |b1 |i1 |u1 <i2 <i4 <i8 <u2 <u4 <u8 and bfloat16 stored as '<V2' is not
// supported (numpy has no bf16). Throws CallError naming the file on malformed input.
#pragma once

#include <string>

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

}  // namespace flashgen
