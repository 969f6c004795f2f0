// Calls at the edges of what fits: extents whose products overflow, tensors too large to
// allocate, and integer inputs that do not fit their parameter's type. Every backend that runs
// here (ref, cpu) fails the same way, before writing anything: a CallError that names the value
// and the extents, or a BackendError that says "out of memory" and the size.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "flashgen/error.h"
#include "flashgen/flashgen.h"
#include "flashgen/ref.h"

namespace flashgen {
namespace {

Program vanilla() {
  return parse_source(
             "program vanilla(q: bf16[b, h, m, d], k: bf16[b, h, n, d], v: bf16[b, h, n, e]) {\n"
             "  out o: bf16[b, h, m, e] = sum(softmax(sum(q * k, d), n) * v, n)\n"
             "}\n", "t.attn").at(0);
}

template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error of the expected kind";
  return "";
}

TEST(CallLimits, RandomInputsWhoseSizeOverflowsNameTheExtents) {
  Program p = vanilla();
  Extents ext = {{"b", 4294967296}, {"h", 4294967296}, {"m", 2}, {"n", 2}, {"d", 2}, {"e", 2}};
  std::string msg = message_of<CallError>([&] { random_inputs(p, ext, 0); });
  EXPECT_EQ(msg, "parameter 'q' would have b=4294967296 x h=4294967296 x m=2 x d=2 elements, "
                 "more than 2^60 (the most one tensor may hold)");
  Extents all = {{"b", 65536}, {"h", 65536}, {"m", 65536}, {"n", 65536}, {"d", 65536},
                 {"e", 65536}};
  EXPECT_NE(message_of<CallError>([&] { random_inputs(p, all, 0); }).find("b=65536 x h=65536"),
            std::string::npos);
}

// Small inputs (y is a stride-0 view), an output over both dims: the output would overflow.
TEST(CallLimits, AnOutputWhoseSizeOverflowsIsACallErrorOnEveryBackend) {
  Program p = parse_source(
      "program p(x: f32[m], y: f32[n]) {\n  out z: f32[m, n] = x * y\n}\n", "t.attn").at(0);
  Tensor x(DType::f32, {8});
  Tensor y = Tensor(DType::f32, {1}).with_strides({int64_t{1} << 59}, {0});
  for (Backend be : {Backend::ref, Backend::cpu}) {
    std::string msg = message_of<CallError>([&] { run(p, {{"x", x}, {"y", y}}, {be}); });
    EXPECT_EQ(msg, "output 'z' would have m=8 x n=576460752303423488 elements, more than 2^60 "
                   "(the most one tensor may hold)") << backend_name(be);
  }
}

// 2^41 bf16 elements (4 TiB) fit the element limit but no memory here: "out of memory" with
// the size, checked before allocating (not std::bad_alloc, which ASan would not throw).
TEST(CallLimits, ATensorThatCannotBeAllocatedIsOutOfMemory) {
  Program p = vanilla();
  Extents ext = {{"b", 1}, {"h", 1}, {"m", int64_t{1} << 40}, {"n", int64_t{1} << 40},
                 {"d", 2}, {"e", 2}};
  std::string msg = message_of<BackendError>([&] { random_inputs(p, ext, 0); });
  EXPECT_EQ(msg.rfind("random input for parameter 'q': out of memory: a bf16 tensor of shape "
                      "[1, 1, 1099511627776, 2] needs 4398046511104 bytes", 0),
            0u) << msg;
  std::string t = message_of<BackendError>([] { Tensor(DType::f32, {int64_t{1} << 42}); });
  EXPECT_NE(t.find("out of memory"), std::string::npos) << t;
  EXPECT_NE(t.find("17592186044416 bytes"), std::string::npos) << t;
}

// A value too large for the memory here (an input converted to its declared type, a value the
// reference materializes) is "out of memory" with its size on every backend, never bad_alloc.
TEST(CallLimits, AValueTooLargeForMemoryIsOutOfMemoryWithItsSize) {
  Program p = parse_source(
      "program p(x: f32[m], y: bf16[n]) {\n  out z: f32[m] = max(x * y, n)\n}\n", "t.attn").at(0);
  Tensor x(DType::f32, {3});
  Tensor y = Tensor(DType::f32, {1}).with_strides({int64_t{1} << 50}, {0});
  for (Backend be : {Backend::ref, Backend::cpu}) {
    std::string msg = message_of<BackendError>([&] { run(p, {{"x", x}, {"y", y}}, {be}); });
    EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1125899906842624"), std::string::npos) << msg;
  }
}

// An i32 index parameter given int64 values that do not fit i32: every backend rejects the
// call as the reference does (a wrapped index would read the wrong element silently).
TEST(CallLimits, AnI32ParameterRejectsInt64ValuesThatDoNotFitOnEveryBackend) {
  Program p = parse_source(
      "program g(idx: i32[m], t: f32[n]) {\n  out y: f32[m] = t[idx]\n}\n", "t.attn").at(0);
  Tensor idx(DType::i64, {3});
  const int64_t vals[3] = {(int64_t{1} << 32) + 1, 0, 1};
  std::memcpy(idx.data(), vals, sizeof vals);
  Tensor t(DType::f32, {4});
  // run() checks the values before any backend starts: the CUDA backend says the same whether
  // or not this machine has a GPU.
  for (Backend be : {Backend::ref, Backend::cpu, Backend::cuda}) {
    std::string msg = message_of<CallError>(
        [&] { run(p, {{"idx", idx}, {"t", t}}, RunOptions{be}); });
    EXPECT_EQ(msg, "parameter 'idx' is i32[m] but its input holds 4294967297 (element 0), which "
                   "does not fit in i32") << backend_name(be);
  }
}

}  // namespace
}  // namespace flashgen
