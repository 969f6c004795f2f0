// Tensor::borrow and run_into (flashgen.h): a call reads a caller's memory in place and writes
// its outputs into memory the caller allocated, with any strides; bad outputs are CallErrors
// that name them. The Python package (python/src/module.cpp) is built on these.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "flashgen/compile.h"
#include "flashgen/flashgen.h"

namespace flashgen {
namespace {

const char* kSrc = R"(program p(x: f32[m, d], i: i64[m]) {
  out y: f32[m] = sum(x * 2, d)
  out j: i64[m] = i * 3 + 1
  out c: i32[m] = i32(i) - 5
}
)";

Program prog() { return parse_source(kSrc, "p.attn")[0]; }

TEST(Borrow, AViewReadsAndWritesTheCallersMemory) {
  std::vector<float> mem = {1, 2, 3, 4, 5, 6};
  Tensor t = Tensor::borrow(DType::f32, {2, 3}, {1, 2}, mem.data(), mem.size() * 4);  // [3,2]^T
  EXPECT_TRUE(t.borrowed());
  EXPECT_EQ(t.at({1, 2}), 6);
  EXPECT_EQ(t.at({0, 1}), 3);
  t.set_at({1, 0}, 9.5);
  EXPECT_EQ(mem[1], 9.5f);
  EXPECT_THROW(Tensor::borrow(DType::f32, {2, 3}, {3, 1}, mem.data(), 5 * 4), CallError);
  EXPECT_THROW(Tensor::borrow(DType::f32, {2, 3}, {3, -1}, mem.data(), 24), CallError);
  EXPECT_THROW(Tensor::borrow(DType::f32, {2, 3}, {3}, mem.data(), 24), CallError);
  EXPECT_NO_THROW(Tensor::borrow(DType::f32, {0, 3}, {3, 1}, nullptr, 0));
}

TEST(RunInto, WritesEveryBackendsResultIntoStridedCallerOutputs) {
  const Program p = prog();
  std::vector<float> xs = {1, 2, 3, 4, 5, 6, 7, 8};  // x[m=4, d=2]
  std::vector<int64_t> is = {0, 1, -2, 1000000000000};
  for (Backend b : {Backend::ref, Backend::cpu}) {
    TensorMap in{{"x", Tensor::borrow(DType::f32, {4, 2}, {2, 1}, xs.data(), 32)},
                 {"i", Tensor::borrow(DType::i64, {4}, {1}, is.data(), 32)}};
    std::vector<float> y(8, -1.f);   // y written at every second element
    std::vector<int64_t> j(4, 0);
    std::vector<int32_t> c(4, 0);
    TensorMap out{{"y", Tensor::borrow(DType::f32, {4}, {2}, y.data(), 32)},
                  {"j", Tensor::borrow(DType::i64, {4}, {1}, j.data(), 32)},
                  {"c", Tensor::borrow(DType::i32, {4}, {1}, c.data(), 16)}};
    RunOptions opt;
    opt.backend = b;
    run_into(p, in, out, opt);
    SCOPED_TRACE(backend_name(b));
    EXPECT_EQ(y, (std::vector<float>{6, -1, 14, -1, 22, -1, 30, -1}));
    EXPECT_EQ(j, (std::vector<int64_t>{1, 4, -5, 3000000000001}));
    // i32(1e12) wraps to 32 bits: 1e12 mod 2^32 = -727379968, minus 5.
    EXPECT_EQ(c, (std::vector<int32_t>{-5, -4, -7, -727379973}));
  }
}

TEST(RunInto, BadOutputsAreCallErrorsThatNameThem) {
  const Program p = prog();
  TensorMap in{{"x", Tensor(DType::f32, {4, 2})}, {"i", Tensor(DType::i64, {4})}};
  auto outs = [] {
    return TensorMap{{"y", Tensor(DType::f32, {4})}, {"j", Tensor(DType::i64, {4})},
                     {"c", Tensor(DType::i32, {4})}};
  };
  auto expect = [&](TensorMap out, const std::string& what) {
    try {
      run_into(p, in, out, {});
      ADD_FAILURE() << "no error for " << what;
    } catch (const CallError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  TensorMap o = outs();
  o.erase("j");
  expect(o, "missing output 'j'");
  o = outs();
  o["y"] = Tensor(DType::bf16, {4});
  expect(o, "output 'y' is bf16; the program declares f32");
  o = outs();
  o["c"] = Tensor(DType::i32, {5});
  expect(o, "output 'c' has shape [5]; this call gives [m] = [4]");
  o = outs();
  o["z"] = Tensor(DType::f32, {4});
  expect(o, "'z' is not an output of program 'p'");
  auto shapes = output_shapes(p, in);
  EXPECT_EQ(shapes.at("y"), (std::vector<int64_t>{4}));
  EXPECT_EQ(shapes.size(), 3u);
}

TEST(Tensor, CopyFromAndSetIntKeepEveryBit) {
  Tensor a(DType::i64, {3});
  a.set_int(0, INT64_MIN);
  a.set_int(2, (int64_t{1} << 60) + 1);
  std::vector<int64_t> mem(6, 7);
  Tensor b = Tensor::borrow(DType::i64, {3}, {2}, mem.data(), 48);
  b.copy_from(a);
  EXPECT_EQ(mem, (std::vector<int64_t>{INT64_MIN, 7, 0, 7, (int64_t{1} << 60) + 1, 7}));
  EXPECT_THROW(b.copy_from(Tensor(DType::i32, {3})), std::invalid_argument);
}

}  // namespace
}  // namespace flashgen

namespace flashgen {
namespace {

// A GPU call's error word comes from device memory: cuda_raise_error_word decodes the words the
// kernels write and refuses any other as a BackendError instead of indexing with it.
TEST(CudaErrorWord, KnownWordsDecodeAndOthersAreRefused) {
  const Program p = parse_source(R"(program g(x: f32[t], i: i64[m]) { out y: f32[m] = x[i] })",
                                 "g.attn")[0];
  TensorMap shapes{{"x", Tensor(DType::f32, {4})}, {"i", Tensor(DType::i64, {3})}};
  const int64_t none[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_NO_THROW(cuda_raise_error_word(p, shapes, none));
  const int64_t gather[8] = {1, 0, 0, 9, 0, 0, 0, 0};
  try {
    cuda_raise_error_word(p, shapes, gather);
    ADD_FAILURE() << "no error";
  } catch (const CallError& e) {
    EXPECT_NE(std::string(e.what()).find("index 9 is out of range [0, 4) in a read of "
                                         "parameter 'x' (dimension 't')"),
              std::string::npos)
        << e.what();
  }
  for (auto bad : {std::vector<int64_t>{7, 0, 0, 0}, {1, 5, 0, 0}, {1, -1, 0, 0}, {1, 0, 3, 0},
                   {2, 0, 0, 100000}, {2, 0, 0, -2}}) {
    bad.resize(8, 0);
    EXPECT_THROW(cuda_raise_error_word(p, shapes, bad.data()), BackendError) << bad[0];
  }
}

}  // namespace
}  // namespace flashgen
