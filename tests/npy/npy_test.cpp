// Tests of src/runtime/npy.cpp: round trips of every dtype, byte images laid out exactly as
// numpy's np.save writes them (hand-made here so the tests need no numpy), other header
// versions, Fortran order, and malformed files (each error names the file).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "flashgen/error.h"
#include "flashgen/npy.h"

namespace flashgen {
namespace {

namespace fs = std::filesystem;

class Npy : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("flashgen_npy_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write_bytes(const std::string& name, const std::string& bytes) {
    std::ofstream f(path(name), std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return path(name);
  }
  static std::string read_bytes(const std::string& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  // A .npy image as numpy writes it: version major.0, the dict, spaces, '\n', padded to 64.
  static std::string image(const std::string& dict, const std::string& data, int major = 1) {
    size_t prefix = major == 1 ? 10 : 12;
    size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
    std::string h = dict + std::string(total - prefix - dict.size() - 1, ' ') + "\n";
    std::string s = "\x93NUMPY";
    s += static_cast<char>(major);
    s += '\0';
    for (size_t i = 0; i < prefix - 8; ++i) s += static_cast<char>((h.size() >> (8 * i)) & 0xff);
    return s + h + data;
  }
  template <class T>
  static std::string raw(const std::vector<T>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  fs::path dir_;
};

TEST_F(Npy, RoundTripEveryDtype) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> nd;
  for (DType t : {DType::f64, DType::f32, DType::f16, DType::bf16, DType::f8e4m3, DType::f8e5m2,
                  DType::i32, DType::i64, DType::boolean}) {
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{}, {1}, {7}, {3, 0}, {2, 7, 5}, {1, 77}}) {
      Tensor a(t, shape);
      for (int64_t i = 0; i < a.numel(); ++i) {
        double x = nd(rng) * 10;
        a.set(i, is_float(t) ? x : std::round(x));
      }
      std::string p = path("a.npy");
      write_npy(p, a);
      NpyArray r = read_npy(p);
      // bf16 and f8 come back as f32 holding the same values.
      DType expect = (t == DType::bf16 || t == DType::f8e4m3 || t == DType::f8e5m2) ? DType::f32
                                                                                       : t;
      ASSERT_EQ(r.tensor.dtype(), expect) << dtype_name(t);
      ASSERT_EQ(r.tensor.shape(), shape);
      for (int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(r.tensor.get(i), a.get(i));
      // The file is exactly header (multiple of 64) + data.
      auto size = fs::file_size(p);
      EXPECT_EQ((size - a.numel() * dtype_bytes(expect)) % 64, 0u);
    }
  }
}

TEST_F(Npy, WritesTheBytesNumpyWrites) {
  // np.save(p, np.arange(6, dtype='<f4').reshape(2, 3))
  Tensor a(DType::f32, {2, 3});
  for (int i = 0; i < 6; ++i) a.set(i, i);
  write_npy(path("a.npy"), a);
  std::string expect = image("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                             raw(std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(read_bytes(path("a.npy")), expect);
  EXPECT_EQ(expect.substr(0, 10), std::string("\x93NUMPY\x01\x00\x76\x00", 10));
  // A 1-d array's shape is written "(5,)"; a scalar's "()".
  Tensor b(DType::i64, {5});
  write_npy(path("b.npy"), b);
  EXPECT_EQ(read_bytes(path("b.npy")),
            image("{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }",
                  raw(std::vector<int64_t>(5, 0))));
  Tensor c(DType::boolean, {});
  c.set(0, 1);
  write_npy(path("c.npy"), c);
  EXPECT_EQ(read_bytes(path("c.npy")),
            image("{'descr': '|b1', 'fortran_order': False, 'shape': (), }", std::string("\1")));
}

TEST_F(Npy, ReadsNumpyImagesOfEveryDtype) {
  struct Case {
    std::string descr, data;
    DType dtype;
    std::vector<double> values;
  };
  std::vector<Case> cases = {
      {"<f2", raw(std::vector<uint16_t>{0x3c00, 0xc000, 0x3555}), DType::f16,
       {1, -2, 0.333251953125}},
      {"<f4", raw(std::vector<float>{1.5f, -0.25f, 1e30f}), DType::f32, {1.5, -0.25, 1e30f}},
      {"<f8", raw(std::vector<double>{0.1, -7, 1e300}), DType::f64, {0.1, -7, 1e300}},
      {"|b1", std::string("\1\0\1", 3), DType::boolean, {1, 0, 1}},
      {"|i1", std::string("\xff\x7f\x80", 3), DType::i64, {-1, 127, -128}},
      {"|u1", std::string("\xff\x7f\x80", 3), DType::i64, {255, 127, 128}},
      {"<i2", raw(std::vector<int16_t>{-2, 300, -32768}), DType::i64, {-2, 300, -32768}},
      {"<u2", raw(std::vector<uint16_t>{65535, 300, 0}), DType::i64, {65535, 300, 0}},
      {"<i4", raw(std::vector<int32_t>{-5, 1 << 30, 7}), DType::i32, {-5, 1 << 30, 7}},
      {"<u4", raw(std::vector<uint32_t>{4000000000u, 1, 2}), DType::i64, {4000000000.0, 1, 2}},
      {"<i8", raw(std::vector<int64_t>{-9, int64_t{1} << 40, 3}), DType::i64,
       {-9, 1099511627776.0, 3}},
      {"<u8", raw(std::vector<uint64_t>{9, uint64_t{1} << 62, 3}), DType::i64,
       {9, 4611686018427387904.0, 3}},
  };
  for (const auto& c : cases) {
    std::string p = write_bytes(
        "x.npy", image("{'descr': '" + c.descr + "', 'fortran_order': False, 'shape': (3,), }",
                       c.data));
    NpyArray r = read_npy(p);
    EXPECT_EQ(r.descr, c.descr);
    ASSERT_EQ(r.tensor.dtype(), c.dtype) << c.descr;
    ASSERT_EQ(r.tensor.shape(), std::vector<int64_t>{3});
    for (int i = 0; i < 3; ++i) EXPECT_EQ(r.tensor.get(i), c.values[i]) << c.descr << " " << i;
  }
}

TEST_F(Npy, HeaderVersionsKeyOrderAndFortranOrder) {
  std::vector<float> data = {0, 1, 2, 3, 4, 5};
  // Fortran order: memory holds column-major data of logical shape (2, 3): a[i][j] = data[j*2+i].
  for (int major : {1, 2, 3}) {
    std::string p = write_bytes(
        "f.npy",
        image("{'shape': (2, 3), 'fortran_order': True, \"descr\": '<f4'}", raw(data), major));
    NpyArray r = read_npy(p);
    ASSERT_EQ(r.tensor.shape(), (std::vector<int64_t>{2, 3}));
    EXPECT_TRUE(r.tensor.is_contiguous());
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) EXPECT_EQ(r.tensor.at({i, j}), data[j * 2 + i]) << major;
  }
  // 3-d Fortran order with odd extents.
  std::vector<int32_t> d3(2 * 3 * 5);
  for (size_t i = 0; i < d3.size(); ++i) d3[i] = static_cast<int32_t>(i);
  std::string p = write_bytes(
      "g.npy", image("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 5), }", raw(d3)));
  NpyArray r = read_npy(p);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 5; ++k) EXPECT_EQ(r.tensor.at({i, j, k}), i + 2 * j + 6 * k);
}

TEST_F(Npy, MalformedFilesNameTheFile) {
  auto expect_error = [&](const std::string& name, const std::string& bytes,
                          const std::string& needle) {
    std::string p = write_bytes(name, bytes);
    try {
      read_npy(p);
      ADD_FAILURE() << "no error for " << name;
    } catch (const CallError& e) {
      std::string m = e.what();
      EXPECT_NE(m.find(p), std::string::npos) << m;
      EXPECT_NE(m.find(needle), std::string::npos) << m;
    }
  };
  std::string four = raw(std::vector<float>{1, 2, 3, 4});
  expect_error("big.npy", image("{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }", four),
               "big-endian");
  expect_error("magic.npy", "NUMPY not really", "bad magic");
  expect_error("short.npy",
               image("{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", four),
               "truncated data");
  expect_error("dtype.npy",
               image("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", four),
               "unsupported dtype '<c8'");
  expect_error("nokey.npy", image("{'descr': '<f4', 'shape': (4,), }", four), "fortran_order");
  expect_error("garbage.npy", image("{'descr': '<f4', 'fortran_order': Maybe}", four),
               "malformed");
  expect_error("struct.npy",
               image("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", four),
               "structured");
  std::string v9 = image("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", four);
  v9[6] = 9;
  expect_error("v9.npy", v9, "version 9");
  std::string cut = image("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", four);
  expect_error("cut.npy", cut.substr(0, 40), "truncated header");
  try {
    read_npy(path("absent.npy"));
    ADD_FAILURE();
  } catch (const CallError& e) {
    EXPECT_NE(std::string(e.what()).find("absent.npy: cannot open"), std::string::npos);
  }
  try {
    read_npy(dir_.string());
    ADD_FAILURE();
  } catch (const CallError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  std::string huge = raw(std::vector<uint64_t>{uint64_t{1} << 63});
  expect_error("u8.npy", image("{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }", huge),
               "does not fit in i64");
}

// Bytes of a malformed header that are not printable are escaped in the message, so a message
// never carries raw control or non-UTF-8 bytes to a terminal.
TEST_F(Npy, MessagesEscapeRawBytes) {
  std::string four = raw(std::vector<float>{1, 2, 3, 4});
  std::string p = write_bytes(
      "raw.npy", image("{'descr': '<f4', 'fortran_order': \xff\x1b[31m, 'shape': (4,), }", four));
  try {
    read_npy(p);
    ADD_FAILURE() << "no error";
  } catch (const CallError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'fortran_order': \\xff\\x1b[31m,"), std::string::npos) << m;
    for (char c : m) {
      unsigned char u = static_cast<unsigned char>(c);
      EXPECT_TRUE(u >= 0x20 && u < 0x7f) << "raw byte " << int(u) << " in: " << m;
    }
  }
}

TEST_F(Npy, EscapeBytes) {
  EXPECT_EQ(escape_bytes("plain text"), "plain text");
  EXPECT_EQ(escape_bytes(std::string("a\0b\x01\x7f", 5)), "a\\x00b\\x01\\x7f");
  EXPECT_EQ(escape_bytes("l1\n\tl2"), "l1\\x0a\\x09l2");
  EXPECT_EQ(escape_bytes("l1\n\tl2", true), "l1\n\tl2");
  // Valid UTF-8 is kept; stray continuation bytes, truncated sequences, overlong forms and
  // surrogates are escaped byte by byte.
  EXPECT_EQ(escape_bytes("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(escape_bytes("\x80x\xe2\x82y\xc0\xaf\xed\xa0\x80\xff"),
            "\\x80x\\xe2\\x82y\\xc0\\xaf\\xed\\xa0\\x80\\xff");
}

TEST_F(Npy, DtypeNames) {
  EXPECT_EQ(npy_dtype_name("|u1"), "uint8");
  EXPECT_EQ(npy_dtype_name("|b1"), "bool");
  EXPECT_EQ(npy_dtype_name("<f4"), "float32");
  EXPECT_EQ(npy_dtype_name("<i8"), "int64");
  EXPECT_EQ(npy_dtype_name("<c8"), "<c8");
}

// All or nothing: a target that cannot be replaced (a folder) makes the call fail after the
// other files were renamed into place; they are undone: the new file is removed, the previous
// file is back with its content, and no temporary or backup file remains.
TEST_F(Npy, WriteFilesIsAllOrNothing) {
  Tensor t(DType::f32, {3});
  for (int i = 0; i < 3; ++i) t.set(i, i + 0.5);
  write_bytes("old.npy", "previous content");
  fs::create_directory(path("dir.npy"));
  try {
    write_npy_files({{path("old.npy"), t}, {path("new.npy"), t}, {path("dir.npy"), t}});
    ADD_FAILURE() << "no error";
  } catch (const CallError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(path("dir.npy")), std::string::npos) << m;
    EXPECT_NE(m.find("directory"), std::string::npos) << m;
  }
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"dir.npy", "old.npy"}));
  EXPECT_EQ(read_bytes(path("old.npy")), "previous content");
  EXPECT_TRUE(fs::is_empty(path("dir.npy")));

  // When everything can be written, previous files are replaced and nothing else remains.
  fs::remove(path("dir.npy"));
  write_npy_files({{path("old.npy"), t}, {path("new.npy"), t}});
  names.clear();
  for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"new.npy", "old.npy"}));
  for (const char* f : {"old.npy", "new.npy"}) {
    NpyArray r = read_npy(path(f));
    ASSERT_EQ(r.tensor.numel(), 3) << f;
    EXPECT_EQ(r.tensor.get(2), 2.5) << f;
  }
}

// A failing write (a target in a folder that does not exist) leaves no temporary file of the
// files written before it.
TEST_F(Npy, WriteFilesRemovesTemporariesWhenAWriteFails) {
  Tensor t(DType::f32, {2});
  EXPECT_THROW(write_npy_files({{path("a.npy"), t}, {path("missing/b.npy"), t}}), CallError);
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(Npy, StridedTensorIsWrittenInLogicalOrder) {
  Tensor a(DType::f32, {3, 4});
  for (int i = 0; i < 12; ++i) a.set(i, i);
  Tensor tr = a.with_strides({4, 3}, {1, 4});
  write_npy(path("t.npy"), tr);
  NpyArray r = read_npy(path("t.npy"));
  ASSERT_EQ(r.tensor.shape(), (std::vector<int64_t>{4, 3}));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(r.tensor.at({i, j}), j * 4 + i);
}

}  // namespace
}  // namespace flashgen
