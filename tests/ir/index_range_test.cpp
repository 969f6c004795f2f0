// Index ranges (src/ir/index_range.h): which computed gather indices are proved inside their
// parameter's extent, and under which extent conditions; and that the proofs hold, by
// evaluating every index of small programs at many extents against the conditions.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flashgen/error.h"
#include "flashgen/frontend.h"
#include "flashgen/ref.h"
#include "flashgen/tensor.h"
#include "ir/index_range.h"

namespace flashgen {
namespace {

// The program `o = t[<index>]` over dims m, n of a table t: f32[r] (the gather's index node).
struct Case {
  Program p;
  int index = -1, dim = -1;
};

Case gather_case(const std::string& index, const std::string& extra_params = "") {
  const std::string src = "program g(t: f32[r], a: f32[m], c: f32[n]" + extra_params +
                          ") {\n  out o: f32[m, n] = t[" + index + "] + a + c\n}\n";
  Case c{parse_source(src, "g.attn").at(0)};
  for (const Node& n : c.p.nodes)
    if (n.op == Op::Gather && c.p.params[n.param].name == "t") c.index = n.args[0];
  for (size_t d = 0; d < c.p.dims.size(); ++d)
    if (c.p.dims[d] == "r") c.dim = static_cast<int>(d);
  EXPECT_GE(c.index, 0) << src;
  return c;
}

std::optional<std::vector<std::string>> proof(const std::string& index,
                                              const std::string& extra = "") {
  Case c = gather_case(index, extra);
  std::optional<std::vector<ExtentCondition>> r = prove_index_in_range(c.p, c.index, c.dim);
  if (!r) return std::nullopt;
  std::vector<std::string> out;
  for (const ExtentCondition& e : *r) out.push_back(e.str(c.p));
  return out;
}

using Strings = std::vector<std::string>;

TEST(IndexRange, ClampsMinimaAndModuliToTheExtentAreProved) {
  // clamp(x, 0, size(r) - 1) is in range for any x once the table is not empty.
  EXPECT_EQ(proof("clamp(n - m + 64, 0, size(r) - 1)"), Strings{"1 <= extent(r)"});
  EXPECT_EQ(proof("maximum(0, minimum(n - m, size(r) - 1))"), Strings{"1 <= extent(r)"});
  EXPECT_EQ(proof("minimum(maximum(n - m, 0), size(r) - 1)"), Strings{"1 <= extent(r)"});
  EXPECT_EQ(proof("(n - m) % size(r)"), Strings{"1 <= extent(r)"});
  EXPECT_EQ(proof("where(n <= m, m - n, 0) % size(r)"), Strings{"1 <= extent(r)"});
  // A plain index of another dim, shifted: the relation of the two extents.
  EXPECT_EQ(proof("m"), Strings{"extent(m) <= extent(r)"});
  EXPECT_EQ(proof("m + 2"), Strings{"extent(m) + 2 <= extent(r)"});
  EXPECT_EQ(proof("minimum(n, size(r))"), Strings{"extent(n) <= extent(r)"});  // minimum(...) <= n
  // A constant needs the extent to hold it; a constant clamp bound too.
  EXPECT_EQ(proof("3"), Strings{"4 <= extent(r)"});
  EXPECT_EQ(proof("clamp(n, 2, 5)"), Strings{"6 <= extent(r)"});
  // An index read from data is bounded only by what is done to it.
  EXPECT_EQ(proof("clamp(idx[n], 0, size(r) - 1)", ", idx: i32[n]"), Strings{"1 <= extent(r)"});
  EXPECT_EQ(proof("idx[n] % size(r)", ", idx: i64[n]"), Strings{"1 <= extent(r)"});
}

TEST(IndexRange, WhatCanLeaveTheRangeIsNotProved) {
  EXPECT_EQ(proof("n - m"), std::nullopt);                       // negative where m > n
  EXPECT_EQ(proof("maximum(n, size(r))"), std::nullopt);             // size(r) itself
  // Bounds are one extent plus a constant: extent(r) - extent(n), the least of
  // size(r) - 1 - n, is not one, so that index is not proved (a gather check stays).
  EXPECT_EQ(proof("size(r) - 1 - n"), std::nullopt);
  EXPECT_EQ(proof("idx[n]", ", idx: i32[n]"), std::nullopt);     // data
  EXPECT_EQ(proof("clamp(n, -1, size(r) - 1)"), std::nullopt);   // the lower bound -1
  EXPECT_EQ(proof("n * 2"), std::nullopt);                       // no constant bound of n
  // No wrap-around: bounds past 2^61 are not kept; a modulo's range does not depend on its
  // operand (even one that wraps).
  EXPECT_EQ(proof("clamp(n, 0, 9007199254740992) * 1024"), std::nullopt);
  EXPECT_EQ(proof("(idx[n] + 2147483647) % size(r)", ", idx: i32[n]"), Strings{"1 <= extent(r)"});
  EXPECT_EQ(proof("clamp(idx[n] + 1, 0, 3)", ", idx: i32[n]"), Strings{"4 <= extent(r)"});
}

// The proofs are sound: wherever the conditions hold, every index the reference evaluates is in
// [0, extent(r)) -- checked at every point of a grid of extents (zero extents included), with
// index data that is negative, huge or near the wrap-around of its type (i32 and i64).
TEST(IndexRange, WhereTheConditionsHoldEveryIndexIsInRange) {
  const std::vector<std::string> indices = {
      "clamp(n - m + 3, 0, size(r) - 1)", "maximum(0, minimum(n - m, size(r) - 1))",
      "(n - m) % size(r)", "m", "m + 2", "minimum(n, size(r))", "clamp(n, 2, 5)",
      "clamp(idx[n], 0, size(r) - 1)", "idx[n] % size(r)", "where(n <= m, m - n, 0) % size(r)",
      "(idx[n] + 2147483647) % size(r)", "clamp(idx[n] + 1, 0, 3)",
      "clamp(idx[n] * 3 - 7, 1, size(r) - 2)", "maximum(idx[n], 0) % size(r)"};
  const std::vector<int64_t> data = {0,  -1, 1,          -7,          2147483647, -2147483647 - 1,
                                     5,  3,  2147483646, 9000000000LL, -9000000000LL, 100};
  int checked = 0, proved = 0;
  for (const std::string& ix : indices)
    for (const char* ty : {"i32", "i64"}) {
      Case c = gather_case(ix, std::string(", idx: ") + ty + "[n]");
      std::optional<std::vector<ExtentCondition>> conds = prove_index_in_range(c.p, c.index, c.dim);
      if (!conds) continue;  // (unproved: nothing to check)
      ++proved;
      for (int64_t r = 0; r <= 7; ++r)
        for (int64_t m = 0; m <= 6; ++m)
          for (int64_t n = 0; n <= 6; ++n) {
            const Extents ext = {{"r", r}, {"m", m}, {"n", n}};
            std::vector<int64_t> extv;
            for (const std::string& d : c.p.dims) extv.push_back(ext.at(d));
            bool hold = true;
            for (const ExtentCondition& e : *conds) hold = hold && e.holds(extv);
            if (!hold) continue;
            for (size_t shift = 0; shift < data.size(); shift += 5) {
              TensorMap in = random_inputs(c.p, ext, 7 + r);
              Tensor& idx = in.at("idx");
              for (int64_t i = 0; i < idx.numel(); ++i)
                idx.set_int(i, data[(i + shift) % data.size()]);
              SCOPED_TRACE(ix + " (" + ty + ") r=" + std::to_string(r) + " m=" +
                           std::to_string(m) + " n=" + std::to_string(n));
              EXPECT_NO_THROW(evaluate_reference(c.p, in, ext));  // out of range throws
              ++checked;
            }
          }
    }
  EXPECT_EQ(proved, 2 * static_cast<int>(indices.size()));
  EXPECT_GT(checked, 5000);
}

// The check above can fail: the same sweep over an index that is not in range for every
// extent throws somewhere (the sweep reaches out-of-range points).
TEST(IndexRange, TheSoundnessSweepFindsOutOfRangeIndices) {
  Case c = gather_case("clamp(idx[n], 0, size(r))", ", idx: i64[n]");
  int threw = 0;
  for (int64_t r = 0; r <= 3; ++r) {
    const Extents ext = {{"r", r}, {"m", 2}, {"n", 3}};
    TensorMap in = random_inputs(c.p, ext, 1);
    for (int64_t i = 0; i < in.at("idx").numel(); ++i) in.at("idx").set_int(i, 9000000000LL);
    try {
      evaluate_reference(c.p, in, ext);
    } catch (const CallError&) {
      ++threw;
    }
  }
  EXPECT_EQ(threw, 4);  // clamp(huge, 0, r) = r, one past the end, at every r
}

TEST(IndexRange, ConditionsHoldAndPrint) {
  const Program p = gather_case("m").p;
  std::vector<int64_t> extv(p.dims.size(), 0);
  int r = -1, m = -1;
  for (size_t d = 0; d < p.dims.size(); ++d) {
    if (p.dims[d] == "r") r = static_cast<int>(d);
    if (p.dims[d] == "m") m = static_cast<int>(d);
  }
  const ExtentCondition c{m, 1, r};
  EXPECT_EQ(c.str(p), "extent(m) + 1 <= extent(r)");
  extv[m] = 4, extv[r] = 5;
  EXPECT_TRUE(c.holds(extv));
  extv[r] = 4;
  EXPECT_FALSE(c.holds(extv));
  EXPECT_EQ((ExtentCondition{-1, 1, r}).str(p), "1 <= extent(r)");
  EXPECT_EQ((ExtentCondition{m, -2, r}).str(p), "extent(m) - 2 <= extent(r)");
}

}  // namespace
}  // namespace flashgen
