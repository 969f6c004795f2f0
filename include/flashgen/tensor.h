// Host tensors: a dtype, extents, strides (in elements) and storage in the dtype's own
// encoding (f32 as float, bf16/f16 as uint16 bits, f8 as uint8 bits, bool as uint8). The
// storage is owned, or borrowed from a caller (Tensor::borrow: numpy or torch memory that
// crossed by DLPack, read and written in place).
// Element access goes through double, with rounding to the dtype (round to nearest even).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "flashgen/ir.h"

namespace flashgen {

// Scalar conversions between double and the storage encodings (round to nearest even;
// f8e4m3 saturates to its max finite ±448 and has no inf; f8e5m2 keeps inf).
uint16_t f32_to_bf16_bits(float x);
float bf16_bits_to_f32(uint16_t b);
uint16_t f32_to_f16_bits(float x);
float f16_bits_to_f32(uint16_t b);
uint8_t double_to_f8e4m3_bits(double x);
double f8e4m3_bits_to_double(uint8_t b);
uint8_t double_to_f8e5m2_bits(double x);
double f8e5m2_bits_to_double(uint8_t b);
// Rounds x to the nearest value representable in t (floats), or checks/casts for integers.
double round_to_dtype(double x, DType t);

// The most elements one tensor or value may have: 2^60, so that byte offsets of 8-byte elements
// fit in int64.
inline constexpr int kMaxElementsLog2 = 60;
// The product of the extents, or -1 when it exceeds 2^kMaxElementsLog2 (or an extent is
// negative). Never overflows.
int64_t checked_element_count(const std::vector<int64_t>& shape);
// BackendError "out of memory: WHAT needs N bytes, more than this machine's memory and swap
// (M bytes)" when `bytes` exceeds the machine's RAM plus swap: checked before allocating, so an
// impossible size fails the same way whatever the allocator does with it (overcommit, ASan).
void check_fits_memory(uint64_t bytes, const std::string& what);
// "[2, 3, 4]"
std::string shape_text(const std::vector<int64_t>& shape);

class Tensor {
 public:
  Tensor() = default;
  // Contiguous row-major tensor filled with zeros. A shape of more than 2^kMaxElementsLog2
  // elements (or a negative extent) is a CallError; a failed allocation a BackendError that
  // says "out of memory" and the size.
  Tensor(DType dtype, std::vector<int64_t> shape);
  // A view of memory the caller owns: `data` holds `nbytes` bytes, the elements lie at
  // `strides` (in elements, any sign-free layout inside those bytes); `keep` (may be null) is
  // held as long as the view lives. CallError when the strides reach past `nbytes`.
  static Tensor borrow(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
                       void* data, size_t nbytes, std::shared_ptr<void> keep = nullptr);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const;
  bool is_contiguous() const;

  // Element access by flat row-major position (0..numel) or by multi-index.
  double get(int64_t flat) const;
  void set(int64_t flat, double v);  // rounds to dtype
  double at(const std::vector<int64_t>& idx) const;
  void set_at(const std::vector<int64_t>& idx, double v);

  // Raw storage (contiguous tensors: numel * dtype_bytes bytes).
  void* data() { return storage_ ? storage_->ptr : nullptr; }
  const void* data() const { return storage_ ? storage_->ptr : nullptr; }
  size_t nbytes() const { return storage_ ? storage_->size : 0; }
  // Whether the storage is a caller's (Tensor::borrow).
  bool borrowed() const { return storage_ && storage_->keep_or_external; }

  // Integer tensors: the exact 64-bit value (i32 keeps its low 32 bits); other dtypes: set().
  void set_int(int64_t flat, int64_t v);
  // Copies `src` (same dtype and shape, any strides) element by element into this tensor.
  void copy_from(const Tensor& src);

  // A view with permuted or otherwise strided layout over the same storage.
  Tensor with_strides(std::vector<int64_t> shape, std::vector<int64_t> strides) const;
  // A contiguous copy converted to `t` (rounding as round_to_dtype).
  Tensor to(DType t) const;
  Tensor contiguous() const { return to(dtype_); }

 private:
  int64_t offset_of(int64_t flat) const;
  DType dtype_ = DType::f32;
  std::vector<int64_t> shape_, strides_;
  struct Storage {
    std::vector<uint8_t> owned;
    uint8_t* ptr = nullptr;  // owned.data() or the caller's memory
    size_t size = 0;
    bool keep_or_external = false;
    std::shared_ptr<void> keep;
  };
  std::shared_ptr<Storage> storage_;
};

using TensorMap = std::map<std::string, Tensor>;

}  // namespace flashgen
