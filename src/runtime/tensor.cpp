// Host tensors and the scalar conversions between double and the low-precision encodings.
//
// Every float conversion rounds once, directly from double, to nearest even (no double rounding
// through f32), handling subnormals, overflow and NaN:
// - bf16 (8-bit exponent, 7-bit mantissa) and f16 (5, 10): IEEE-like; overflow gives ±inf; NaN
//   stays NaN (quiet, sign kept).
// - f8e4m3 (OCP E4M3FN: bias 7, no inf, NaN = 0x7f/0xff, max finite 448): a finite value beyond
//   ±448 and ±inf saturate to ±448 (CUDA's __NV_SATFINITE behaviour), NaN gives 0x7f.
// - f8e5m2 (bias 15, IEEE-like with inf): overflow gives ±inf; NaN gives 0x7f.
// Integers (round_to_dtype / Tensor::set): the value must be integral (a non-integral value is
// a programming error: std::invalid_argument); i32 wraps modulo 2^32 like 32-bit hardware
// arithmetic; i64 must be in range; bool stores x != 0.
// Tests: tests/tensor/tensor_test.cpp (all 65536 bf16/f16 patterns, RNE ties, f8 tables).
#include "flashgen/tensor.h"

#include <sys/sysinfo.h>

#include "flashgen/error.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace flashgen {
namespace {

// A binary float format with `man` explicit mantissa bits and exponent range [emin, emax] for
// normal numbers. `ieee`: the top exponent code is inf/NaN; otherwise (E4M3FN) it holds normal
// numbers and only the all-ones pattern is NaN.
struct Format {
  int exp_bits, man, bias;
  bool ieee;
  int emin() const { return 1 - bias; }
  int emax() const { return ieee ? (1 << exp_bits) - 2 - bias : (1 << exp_bits) - 1 - bias; }
  double max_finite() const {
    // E4M3FN loses the all-ones mantissa at the top exponent (it is NaN).
    int64_t top = ieee ? (int64_t{2} << man) - 1 : (int64_t{2} << man) - 2;
    return std::ldexp(static_cast<double>(top), emax() - man);
  }
};
constexpr Format kBF16{8, 7, 127, true};
constexpr Format kF16{5, 10, 15, true};
constexpr Format kE4M3{4, 3, 7, false};
constexpr Format kE5M2{5, 2, 15, true};

// Rounds a finite |x| to the format's grid (RNE), without overflow handling.
double round_magnitude(double a, const Format& f) {
  if (a == 0) return 0;
  int e;
  std::frexp(a, &e);  // a = frac * 2^e, frac in [0.5, 1): floor(log2 a) = e - 1
  int exp = std::max(e - 1, f.emin());
  double q = std::ldexp(a, f.man - exp);  // exact (power of two scaling)
  return std::ldexp(std::nearbyint(q), exp - f.man);  // nearbyint: round half to even
}

// Value -> encoding. `sat`: overflow saturates to max finite (and inf too) instead of inf.
uint32_t encode(double x, const Format& f, bool sat) {
  const uint32_t sign = std::signbit(x) ? 1u << (f.exp_bits + f.man) : 0u;
  const uint32_t exp_all = (1u << f.exp_bits) - 1;
  if (std::isnan(x)) {
    if (f.ieee) return sign | (exp_all << f.man) | (1u << (f.man - 1));  // quiet NaN
    return (exp_all << f.man) | ((1u << f.man) - 1);                       // E4M3FN NaN
  }
  double a = std::fabs(x);
  double r = std::isinf(a) ? a : round_magnitude(a, f);
  if (r > f.max_finite()) {
    if (sat || !f.ieee) r = f.max_finite();
    else return sign | (exp_all << f.man);  // inf
  }
  if (r == 0) return sign;
  int e;
  std::frexp(r, &e);
  int exp = e - 1;
  if (exp < f.emin()) {  // subnormal: mantissa = r / 2^(emin - man)
    return sign | static_cast<uint32_t>(std::ldexp(r, f.man - f.emin()));
  }
  uint32_t mant = static_cast<uint32_t>(std::ldexp(r, f.man - exp)) - (1u << f.man);
  return sign | (static_cast<uint32_t>(exp + f.bias) << f.man) | mant;
}

double decode(uint32_t b, const Format& f) {
  const uint32_t exp_all = (1u << f.exp_bits) - 1;
  bool neg = (b >> (f.exp_bits + f.man)) & 1u;
  uint32_t ef = (b >> f.man) & exp_all;
  uint32_t mant = b & ((1u << f.man) - 1);
  double v;
  if (f.ieee && ef == exp_all) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (!f.ieee && ef == exp_all && mant == (1u << f.man) - 1) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (ef == 0) {
    v = std::ldexp(static_cast<double>(mant), f.emin() - f.man);
  } else {
    v = std::ldexp(static_cast<double>(mant | (1u << f.man)),
                   static_cast<int>(ef) - f.bias - f.man);
  }
  return neg ? -v : v;
}

uint16_t double_to_bf16_bits(double x) {
  if (std::isnan(x)) {  // keep the sign and the top payload bits, force quiet
    float fx = static_cast<float>(x);
    uint32_t u;
    std::memcpy(&u, &fx, 4);
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  }
  return static_cast<uint16_t>(encode(x, kBF16, false));
}
uint16_t double_to_f16_bits(double x) { return static_cast<uint16_t>(encode(x, kF16, false)); }

int64_t integral_or_throw(double x, DType t) {
  if (!std::isfinite(x) || x != std::trunc(x)) {
    throw std::invalid_argument(std::string("non-integral value ") + std::to_string(x) +
                                " stored as " + dtype_name(t));
  }
  if (t == DType::i32) {
    // Wrap modulo 2^32 (doubles beyond 2^63 first reduce modulo 2^32 exactly).
    double m = std::fmod(x, 4294967296.0);
    if (m < 0) m += 4294967296.0;
    return static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(m)));
  }
  if (x < -9223372036854775808.0 || x >= 9223372036854775808.0) {
    throw std::invalid_argument("value " + std::to_string(x) + " out of range of i64");
  }
  return static_cast<int64_t>(x);
}

}  // namespace

uint16_t f32_to_bf16_bits(float x) { return double_to_bf16_bits(x); }
float bf16_bits_to_f32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f32_to_f16_bits(float x) { return double_to_f16_bits(x); }
float f16_bits_to_f32(uint16_t b) { return static_cast<float>(decode(b, kF16)); }
uint8_t double_to_f8e4m3_bits(double x) { return static_cast<uint8_t>(encode(x, kE4M3, true)); }
double f8e4m3_bits_to_double(uint8_t b) { return decode(b, kE4M3); }
uint8_t double_to_f8e5m2_bits(double x) { return static_cast<uint8_t>(encode(x, kE5M2, false)); }
double f8e5m2_bits_to_double(uint8_t b) { return decode(b, kE5M2); }

double round_to_dtype(double x, DType t) {
  switch (t) {
    case DType::f64: return x;
    case DType::f32: return static_cast<double>(static_cast<float>(x));
    case DType::bf16: return bf16_bits_to_f32(double_to_bf16_bits(x));
    case DType::f16: return decode(double_to_f16_bits(x), kF16);
    case DType::f8e4m3: return f8e4m3_bits_to_double(double_to_f8e4m3_bits(x));
    case DType::f8e5m2: return f8e5m2_bits_to_double(double_to_f8e5m2_bits(x));
    case DType::i32:
    case DType::i64: return static_cast<double>(integral_or_throw(x, t));
    case DType::boolean: return x != 0 ? 1.0 : 0.0;
  }
  throw std::invalid_argument("round_to_dtype: unknown dtype");
}

// ---------------------------------------------------------------------------------------------
// Tensor

namespace {
// (A tensor with a zero extent may have others whose product passes int64: its strides are
// never used to address an element, so they saturate instead of overflowing. Every other
// tensor holds at most 2^kMaxElementsLog2 elements: checked_element_count.)
std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    if (__builtin_mul_overflow(acc, shape[i], &acc)) acc = std::numeric_limits<int64_t>::max();
  }
  return s;
}
int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

// Reads/writes one element at an element offset of raw storage.
double load(const uint8_t* base, DType t, int64_t off) {
  const uint8_t* p = base + off * dtype_bytes(t);
  switch (t) {
    case DType::f64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::f32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::bf16: { uint16_t v; std::memcpy(&v, p, 2); return bf16_bits_to_f32(v); }
    case DType::f16: { uint16_t v; std::memcpy(&v, p, 2); return decode(v, kF16); }
    case DType::f8e4m3: return f8e4m3_bits_to_double(*p);
    case DType::f8e5m2: return f8e5m2_bits_to_double(*p);
    case DType::i32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::i64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::boolean: return *p ? 1.0 : 0.0;
  }
  return 0;
}
void store(uint8_t* base, DType t, int64_t off, double x) {
  uint8_t* p = base + off * dtype_bytes(t);
  switch (t) {
    case DType::f64: std::memcpy(p, &x, 8); return;
    case DType::f32: { float v = static_cast<float>(x); std::memcpy(p, &v, 4); return; }
    case DType::bf16: { uint16_t v = double_to_bf16_bits(x); std::memcpy(p, &v, 2); return; }
    case DType::f16: { uint16_t v = double_to_f16_bits(x); std::memcpy(p, &v, 2); return; }
    case DType::f8e4m3: *p = double_to_f8e4m3_bits(x); return;
    case DType::f8e5m2: *p = double_to_f8e5m2_bits(x); return;
    case DType::i32: {
      int32_t v = static_cast<int32_t>(integral_or_throw(x, t));
      std::memcpy(p, &v, 4);
      return;
    }
    case DType::i64: { int64_t v = integral_or_throw(x, t); std::memcpy(p, &v, 8); return; }
    case DType::boolean: *p = x != 0 ? 1 : 0; return;
  }
}
bool is_int_storage(DType t) { return t == DType::i32 || t == DType::i64 || t == DType::boolean; }
int64_t load_int(const uint8_t* base, DType t, int64_t off) {
  const uint8_t* p = base + off * dtype_bytes(t);
  if (t == DType::i32) { int32_t v; std::memcpy(&v, p, 4); return v; }
  if (t == DType::i64) { int64_t v; std::memcpy(&v, p, 8); return v; }
  return *p ? 1 : 0;
}
void store_int(uint8_t* base, DType t, int64_t off, int64_t x) {
  uint8_t* p = base + off * dtype_bytes(t);
  if (t == DType::i32) {
    int32_t v = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(x)));
    std::memcpy(p, &v, 4);
  } else if (t == DType::i64) {
    std::memcpy(p, &x, 8);
  } else {
    *p = x != 0 ? 1 : 0;
  }
}
}  // namespace

Tensor::Tensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t e : shape_) {
    if (e < 0) throw CallError("a tensor of shape " + shape_text(shape_) + ": negative extent");
  }
  const int64_t n = checked_element_count(shape_);
  if (n < 0) {
    throw CallError("a tensor of shape " + shape_text(shape_) + " would hold more than 2^" +
                    std::to_string(kMaxElementsLog2) + " elements");
  }
  strides_ = row_major_strides(shape_);
  const size_t bytes = static_cast<size_t>(n) * static_cast<size_t>(dtype_bytes(dtype_));
  check_fits_memory(bytes, "a " + std::string(dtype_name(dtype_)) + " tensor of shape " +
                               shape_text(shape_));
  try {
    auto st = std::make_shared<Storage>();
    st->owned.assign(bytes, 0);
    st->ptr = st->owned.data();
    st->size = bytes;
    storage_ = std::move(st);
  } catch (const std::bad_alloc&) {
    throw BackendError("out of memory: a " + std::string(dtype_name(dtype_)) + " tensor of shape " +
                       shape_text(shape_) + " needs " + std::to_string(bytes) + " bytes");
  } catch (const std::length_error&) {
    throw BackendError("out of memory: a " + std::string(dtype_name(dtype_)) + " tensor of shape " +
                       shape_text(shape_) + " needs " + std::to_string(bytes) + " bytes");
  }
}

uint64_t machine_memory_bytes() {
  struct sysinfo si {};
  if (::sysinfo(&si) != 0) return UINT64_MAX;
  return (static_cast<uint64_t>(si.totalram) + si.totalswap) * si.mem_unit;
}

void check_fits_memory(uint64_t bytes, const std::string& what) {
  const uint64_t have = machine_memory_bytes();
  if (bytes > have) {
    throw BackendError("out of memory: " + what + " needs " + std::to_string(bytes) +
                       " bytes, more than this machine's memory and swap (" +
                       std::to_string(have) + " bytes)");
  }
}

int64_t checked_element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  bool zero = false;
  for (int64_t e : shape) zero = zero || e == 0;
  if (zero) return 0;
  for (int64_t e : shape) {
    if (e < 0 || (e > 0 && n > (int64_t{1} << kMaxElementsLog2) / e)) return -1;
    n *= e;
  }
  return n;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string r = "[";
  for (size_t i = 0; i < shape.size(); ++i) r += (i ? ", " : "") + std::to_string(shape[i]);
  return r + "]";
}

int64_t Tensor::numel() const { return product(shape_); }

bool Tensor::is_contiguous() const {
  auto rm = row_major_strides(shape_);
  for (size_t i = 0; i < shape_.size(); ++i) {
    if (shape_[i] != 1 && strides_[i] != rm[i]) return false;
  }
  return true;
}

int64_t Tensor::offset_of(int64_t flat) const {
  if (flat < 0 || flat >= numel()) {
    throw std::out_of_range("Tensor: flat index " + std::to_string(flat) + " out of range");
  }
  int64_t off = 0;
  for (size_t i = shape_.size(); i-- > 0;) {
    off += (flat % shape_[i]) * strides_[i];
    flat /= shape_[i];
  }
  return off;
}

double Tensor::get(int64_t flat) const {
  return load(static_cast<const uint8_t*>(data()), dtype_, offset_of(flat));
}
void Tensor::set(int64_t flat, double v) {
  store(static_cast<uint8_t*>(data()), dtype_, offset_of(flat), v);
}

static int64_t multi_offset(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                            const std::vector<int64_t>& idx) {
  if (idx.size() != shape.size()) {
    throw std::out_of_range("Tensor: index of rank " + std::to_string(idx.size()) +
                            " for a tensor of rank " + std::to_string(shape.size()));
  }
  int64_t off = 0;
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] < 0 || idx[i] >= shape[i]) {
      throw std::out_of_range("Tensor: index " + std::to_string(idx[i]) + " out of range of " +
                              std::to_string(shape[i]) + " in dimension " + std::to_string(i));
    }
    off += idx[i] * strides[i];
  }
  return off;
}

double Tensor::at(const std::vector<int64_t>& idx) const {
  return load(static_cast<const uint8_t*>(data()), dtype_, multi_offset(shape_, strides_, idx));
}
void Tensor::set_at(const std::vector<int64_t>& idx, double v) {
  store(static_cast<uint8_t*>(data()), dtype_, multi_offset(shape_, strides_, idx), v);
}

void Tensor::set_int(int64_t flat, int64_t v) {
  const int64_t off = offset_of(flat);
  uint8_t* base = static_cast<uint8_t*>(data());
  if (dtype_ == DType::i64) std::memcpy(base + 8 * off, &v, 8);
  else if (dtype_ == DType::i32) {
    const int32_t w = static_cast<int32_t>(static_cast<uint32_t>(v));
    std::memcpy(base + 4 * off, &w, 4);
  } else {
    set(flat, static_cast<double>(v));
  }
}

void Tensor::copy_from(const Tensor& src) {
  if (src.dtype_ != dtype_ || src.shape_ != shape_)
    throw std::invalid_argument("Tensor::copy_from: a " + std::string(dtype_name(src.dtype_)) +
                                shape_text(src.shape_) + " into a " + dtype_name(dtype_) +
                                shape_text(shape_));
  const int64_t n = numel();
  const size_t eb = static_cast<size_t>(dtype_bytes(dtype_));
  const uint8_t* from = static_cast<const uint8_t*>(src.data());
  uint8_t* to = static_cast<uint8_t*>(data());
  if (is_contiguous() && src.is_contiguous()) {
    if (n) std::memmove(to, from, static_cast<size_t>(n) * eb);
    return;
  }
  for (int64_t j = 0; j < n; ++j)
    std::memmove(to + eb * offset_of(j), from + eb * src.offset_of(j), eb);
}

Tensor Tensor::borrow(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides,
                      void* data, size_t nbytes, std::shared_ptr<void> keep) {
  if (shape.size() != strides.size())
    throw CallError("a borrowed tensor of shape " + shape_text(shape) + " has " +
                    std::to_string(strides.size()) + " strides");
  if (checked_element_count(shape) < 0)
    throw CallError("a borrowed tensor of shape " + shape_text(shape) +
                    " has a negative extent or more than 2^" + std::to_string(kMaxElementsLog2) +
                    " elements");
  // The last element's offset, in 128 bits: extents and strides come from a caller.
  __int128 max_off = 0;
  bool empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (strides[i] < 0)
      throw CallError("a borrowed tensor of shape " + shape_text(shape) + " has a negative stride (" +
                      std::to_string(strides[i]) + " along axis " + std::to_string(i) + ")");
    if (shape[i] == 0) empty = true;
    else max_off += static_cast<__int128>(shape[i] - 1) * strides[i];
  }
  const __int128 have = static_cast<__int128>(nbytes / static_cast<size_t>(dtype_bytes(dtype)));
  if (!empty && max_off >= have)
    throw CallError("a borrowed tensor of shape " + shape_text(shape) +
                    " reaches past its memory (" + std::to_string(nbytes) + " bytes)");
  if (!empty && data == nullptr) throw CallError("a borrowed tensor has no memory (null data)");
  auto st = std::make_shared<Storage>();
  st->ptr = static_cast<uint8_t*>(data);
  st->size = nbytes;
  st->keep_or_external = true;
  st->keep = std::move(keep);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  t.storage_ = std::move(st);
  return t;
}

Tensor Tensor::with_strides(std::vector<int64_t> shape, std::vector<int64_t> strides) const {
  if (shape.size() != strides.size()) {
    throw std::invalid_argument("Tensor::with_strides: shape and strides differ in rank");
  }
  int64_t max_off = 0;
  bool empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0 || strides[i] < 0) {
      throw std::invalid_argument("Tensor::with_strides: negative extent or stride");
    }
    if (shape[i] == 0) empty = true;
    else max_off += (shape[i] - 1) * strides[i];
  }
  int64_t have = static_cast<int64_t>(nbytes()) / dtype_bytes(dtype_);
  if (!empty && max_off >= have) {
    throw std::invalid_argument("Tensor::with_strides: view reaches element " +
                                std::to_string(max_off) + " of a storage of " +
                                std::to_string(have));
  }
  Tensor t;
  t.dtype_ = dtype_;
  t.shape_ = std::move(shape);
  t.strides_ = std::move(strides);
  t.storage_ = storage_;
  return t;
}

Tensor Tensor::to(DType t) const {
  Tensor out(t, shape_);
  const int64_t n = numel();
  if (n == 0) return out;
  const uint8_t* src = static_cast<const uint8_t*>(data());
  uint8_t* dst = static_cast<uint8_t*>(out.data());
  // Walk the source in row-major order with an odometer (no per-element division).
  std::vector<int64_t> idx(shape_.size(), 0);
  int64_t off = 0;
  const bool ints = is_int_storage(dtype_) && is_int_storage(t);
  for (int64_t flat = 0; flat < n; ++flat) {
    if (ints) store_int(dst, t, flat, load_int(src, dtype_, off));  // exact for i64
    else if (dtype_ == t) {
      std::memcpy(dst + flat * dtype_bytes(t), src + off * dtype_bytes(t), dtype_bytes(t));
    } else {
      store(dst, t, flat, load(src, dtype_, off));
    }
    for (size_t d = shape_.size(); d-- > 0;) {
      off += strides_[d];
      if (++idx[d] < shape_[d]) break;
      off -= strides_[d] * shape_[d];
      idx[d] = 0;
    }
  }
  return out;
}

}  // namespace flashgen
