// The per-target tables (see target.h).
#include "codegen/target.h"

#include <string>

namespace flashgen {

namespace {

// Helpers shared by every C++-like target; FG_FN is the target's helper qualifier.
const char* kCommonPrelude = R"(
FG_FN float fg_bf16(uint16_t b) { uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return f; }
FG_FN float fg_round_bf16(float x) {
  uint32_t u; memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) { if (u & 0x7fffffu) u |= 0x400000u; }
  else u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u; float f; memcpy(&f, &u, 4); return f;
}
FG_FN float fg_f16(uint16_t h) {
  uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, u;
  if (e == 0) { if (m == 0) u = s; else { int k = -1; do { ++k; m <<= 1; } while (!(m & 1024));
                 u = s | ((uint32_t)(112 - k) << 23) | ((m & 1023) << 13); } }
  else if (e == 31) u = s | 0x7f800000u | (m << 13);
  else u = s | ((e + 112) << 23) | (m << 13);
  float f; memcpy(&f, &u, 4); return f;
}
FG_FN float fg_round_f16(float x) {
  if (!(x == x) || x == INFINITY || x == -INFINITY) return x;
  float a = fabsf(x);
  if (a >= 65520.f) return x > 0 ? INFINITY : -INFINITY;
  int e; frexpf(a, &e);                       /* a = f * 2^e, f in [0.5, 1) */
  int q = e - 11; if (q < -24) q = -24;      /* 11 significant bits, subnormals at 2^-24 */
  float r = ldexpf(nearbyintf(ldexpf(a, -q)), q);
  return x < 0 ? -r : r;
}
FG_FN float fg_f8e4m3(uint8_t b) {
  int s = b >> 7, e = (b >> 3) & 15, m = b & 7; float v;
  if (e == 15 && m == 7) v = NAN;
  else if (e == 0) v = ldexpf((float)m, -9);
  else v = ldexpf((float)(8 + m), e - 10);
  return s ? -v : v;
}
FG_FN float fg_f8e5m2(uint8_t b) { return fg_f16((uint16_t)((uint16_t)b << 8)); }
FG_FN float fg_relu(float x) { return x > 0 ? x : (x != x ? x : 0.f); }
FG_FN int64_t fg_relu(int64_t x) { return x > 0 ? x : 0; }
FG_FN int fg_relu(int x) { return x > 0 ? x : 0; }
FG_FN float fg_abs(float x) { return fabsf(x); }
FG_FN int64_t fg_abs(int64_t x) { return x < 0 ? -x : x; }
FG_FN int fg_abs(int x) { return x < 0 ? -x : x; }
FG_FN float fg_max(float a, float b) { return (a != a || b != b) ? NAN : (a > b ? a : b); }
FG_FN float fg_min(float a, float b) { return (a != a || b != b) ? NAN : (a < b ? a : b); }
FG_FN int64_t fg_max(int64_t a, int64_t b) { return a > b ? a : b; }
FG_FN int64_t fg_min(int64_t a, int64_t b) { return a < b ? a : b; }
FG_FN int fg_max(int a, int b) { return a > b ? a : b; }
FG_FN int fg_min(int a, int b) { return a < b ? a : b; }
/* clamp as the reference: x < lo gives lo, else x > hi gives hi (also when lo > hi); NaN anywhere gives NaN. */
FG_FN float fg_clamp(float x, float lo, float hi) { return (lo != lo || hi != hi) ? NAN : (x < lo ? lo : (x > hi ? hi : x)); }
FG_FN int64_t fg_clamp(int64_t x, int64_t lo, int64_t hi) { return x < lo ? lo : (x > hi ? hi : x); }
FG_FN int fg_clamp(int x, int lo, int hi) { return x < lo ? lo : (x > hi ? hi : x); }
/* Floor modulo; b == -1 gives 0 (also INT64_MIN % -1); b == 0 gives 0 here (fg_mod_e reports it). */
FG_FN int64_t fg_mod(int64_t a, int64_t b) { if (b == 0 || b == -1) return 0; int64_t m = a % b; return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m; }
/* i32 values live in int64: the 32-bit wrap of an i32 op's result (ir/scalar_semantics.h). */
FG_FN int64_t fg_w32(int64_t x) { return (int64_t)(int)(unsigned)(uint64_t)x; }  /* int: 32 bits on every target */
/* Float to i32/i64: truncate toward zero, saturate, NaN -> 0 (the reference's float_to_int). */
FG_FN int64_t fg_f2i32(double x) {
  if (x != x) return 0;
  if (x <= -2147483648.0) return -2147483647LL - 1;
  if (x >= 2147483647.0) return 2147483647LL;
  return (int64_t)x;
}
FG_FN int64_t fg_f2i64(double x) {
  if (x != x) return 0;
  if (x <= -9223372036854775808.0) return -9223372036854775807LL - 1;
  if (x >= 9223372036854775808.0) return 9223372036854775807LL;
  return (int64_t)x;
}
FG_FN float fg_div0(float a, float b) { return b == 0.f ? 0.f : a / b; }
/* fg_div0(a, b) given only rb = 1.f / b, computed once (a tensor-core kernel's row sums, under
   --use_fast_math, where a / b is div.approx, a * (1 / b): the same quotient, one reciprocal a
   row; an add that follows may fuse with the product into one FMA, a last-bit change, which
   __fmul_rn would forbid at the cost of spills: bench/NOTES.md, session 29). b == 0 (or
   flushed to 0) is exactly |rb| == inf, so b itself need not stay live. */
FG_FN float fg_div0_r(float a, float rb) { return fabsf(rb) == INFINITY ? 0.f : a * rb; }
/* Multiplication with a strong zero: 0 * x = 0 for every x, NaN and inf included. The product
   is rounded on its own, as the reference rounds it (fg_mul_rn: on CUDA never fused into an
   FMA with a following add). */
FG_FN float fg_mul0(float a, float b) { return (a == 0.f || b == 0.f) ? 0.f : fg_mul_rn(a, b); }
FG_FN float fg_sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
FG_FN float fg_rsqrt(float x) { return 1.f / sqrtf(x); }
FG_FN float fg_safe(float m) { return m == -INFINITY ? 0.f : m; }
/* exp(safe(Mold) - safe(Mnew)): the rescale of an online sum when its running max moves. */
FG_FN float fg_rescale(float mold, float mnew) { return mold == -INFINITY ? 0.f : expf(mold - fg_safe(mnew)); }
)";

// fg_report: the first error of a call wins the kernel's err slot ({kind, a, b, c}: 1 = a gather
// out of range {param, dim position, index}, 2 = x % 0 {0, 0, node}); run_cpu / run_cuda raise
// the CallError. fg_mod_e: floor modulo that reports x % 0 and then yields 0.
const char* kCpuReportPrelude = R"(
static inline void fg_report(int64_t* err, int64_t kind, int64_t a, int64_t b, int64_t c) {
  int64_t z = 0;
  if (__atomic_compare_exchange_n(&err[0], &z, kind, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    err[1] = a; err[2] = b; err[3] = c;
  }
}
)";
const char* kCudaReportPrelude = R"(
static __device__ __forceinline__ void fg_report(int64_t* err, int64_t kind, int64_t a, int64_t b, int64_t c) {
  if (atomicCAS((unsigned long long*)err, 0ull, (unsigned long long)kind) == 0ull) {
    err[1] = a; err[2] = b; err[3] = c; __threadfence();
  }
}
)";
const char* kModPrelude = R"(
FG_FN int64_t fg_mod_e(int64_t* err, int64_t node, int64_t a, int64_t b) {
  if (b == 0) { fg_report(err, 2, 0, 0, node); return 0; }
  return fg_mod(a, b);
}
)";

// The C functions of float element code: the op table's (a target may replace some, as
// CUDA's tensor-core printer takes the MUFU tanh).
std::map<Op, std::string> math_fns() {
  std::map<Op, std::string> m;
  for (const OpDef* d : op_defs())
    if (d->c_fn) m[d->op] = d->c_fn;
  return m;
}

std::string with_qualifier(const std::string& text, const std::string& q) {
  std::string out, key = "FG_FN";
  size_t pos = 0;
  for (;;) {
    size_t f = text.find(key, pos);
    if (f == std::string::npos) break;
    out += text.substr(pos, f - pos) + q;
    pos = f + key.size();
  }
  return out + text.substr(pos);
}

TargetTable make_cpu() {
  TargetTable t;
  t.target = Target::cpu;
  t.float_fn = math_fns();
  // the CPU kernels' exp without branches or calls, so `omp simd` loops vectorize (fg_vexpf:
  // codegen/cpu.cpp, which defines it for every CPU translation unit)
  t.float_fn[Op::Exp] = "fg_vexpf";
  t.prelude = "#include <cmath>\n#include <cstdint>\n#include <cstring>\n#include <memory>\n"
              "#include <algorithm>\nusing std::int64_t; using std::uint16_t; using std::uint8_t;\n"
              "using std::uint32_t; using std::uint64_t;\n"
              "static inline float fg_mul_rn(float a, float b) { return a * b; }\n" +
              with_qualifier(kCommonPrelude, t.fn_qualifier) + kCpuReportPrelude +
              with_qualifier(kModPrelude, t.fn_qualifier);
  return t;
}

TargetTable make_cuda(Target which) {
  TargetTable t;
  t.target = which;
  t.fn_qualifier = "static __device__ __forceinline__";
  t.kernel_qualifier = "extern \"C\" __global__";
  t.float_fn = math_fns();
  // run_cuda rejects larger extents. Rows and keys are `int`, and below 2^30 an index plus or
  // minus small offsets (n - m + 64, a relative position) still fits 32 bits, so such element
  // code runs in 32-bit arithmetic (ElementEmitter::fits32).
  t.max_extent = int64_t{1} << 30;
  // NVRTC has no memcpy: the prelude's 4-byte bit casts go through a device helper.
  t.prelude = "typedef long long int64_t; typedef unsigned "
              "long long uint64_t;\ntypedef unsigned int uint32_t; typedef unsigned short "
              "uint16_t; typedef unsigned char uint8_t;\n#define INFINITY __int_as_float(0x7f800000)\n"
              "#define NAN __int_as_float(0x7fffffff)\n"
              "static __device__ __forceinline__ void fg_copy4(void* d, const void* s, int) { "
              "*(unsigned*)d = *(const unsigned*)s; }\n#define memcpy fg_copy4\n"
              // (NVCC contracts a * b + c into an FMA by default; __fmul_rn is never contracted)
              "static __device__ __forceinline__ float fg_mul_rn(float a, float b) { "
              "return __fmul_rn(a, b); }\n" +
              with_qualifier(kCommonPrelude, t.fn_qualifier) + kCudaReportPrelude +
              with_qualifier(kModPrelude, t.fn_qualifier);
  return t;
}

}  // namespace

const TargetTable& target_table(Target t) {
  static const TargetTable cpu = make_cpu();
  static const TargetTable sm80 = make_cuda(Target::cuda_sm80);
  static const TargetTable sm90 = make_cuda(Target::cuda_sm90);
  switch (t) {
    case Target::cpu: return cpu;
    case Target::cuda_sm80: return sm80;
    case Target::cuda_sm90: return sm90;
  }
  return cpu;
}

}  // namespace flashgen
