// Static ranges of integer element code (ElementEmitter::int_range / fits32): index arithmetic
// that provably fits 32 bits is emitted as `int` on CUDA (extents up to 2^30, so an index
// difference plus a small offset fits), never on the CPU
// (extents up to 2^63); products that could exceed 32 bits, i32 ops that may wrap and i64
// inputs stay 64-bit. The CUDA source of such a program says so, and compiles (NVRTC test).
#include <gtest/gtest.h>

#include <climits>

#include "codegen/element_code.h"
#include "codegen/target.h"
#include "compiler/pipeline.h"
#include "flashgen/compile.h"
#include "flashgen/frontend.h"
#include "runtime/nvrtc.h"

namespace flashgen {
namespace {

const char* kProgram =
    "program f(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e], w: i32[h], big: i64[h]) {\n"
    "  t = f32(n - m) + f32(m * n) + f32(w * w) + f32(big + n) + f32((m - n) % 4) + f32(clamp(n - m + 64, 0, size(n) - 1))\n"
    "  s = sum(q * k, d) + t\n"
    "  out o: bf16[h, m, e] = sum(softmax(s, n) * v, n)\n"
    "}\n";

struct Fixture {
  Program src = parse_source(kProgram, "f.attn").at(0);
  Plan plan;
  explicit Fixture(Target t) {
    CompileOptions opt;
    opt.target = t;
    plan = compile_program(src, opt).plan;
  }
  const Program& p() const { return plan.program; }
  // The first node with this op whose args have these ops (Index/Param/Const/...).
  int find(Op op, std::vector<Op> args, bool integer = true) const {
    for (size_t i = 0; i < p().nodes.size(); ++i) {
      const Node& n = p().nodes[i];
      if (n.op != op || n.args.size() != args.size() || is_integer(n.type) != integer) continue;
      bool ok = true;
      for (size_t a = 0; a < args.size(); ++a) ok = ok && p().nodes[n.args[a]].op == args[a];
      if (ok) return static_cast<int>(i);
    }
    return -1;
  }
};

TEST(IntRange, CudaNarrowsIndexDifferencesOnly) {
  Fixture f(Target::cuda_sm80);
  ElementEmitter em(f.plan, f.plan.kernels.at(0), target_table(Target::cuda_sm80));
  int diff = f.find(Op::Sub, {Op::Index, Op::Index});
  ASSERT_GE(diff, 0);
  auto r = em.int_range(diff);
  ASSERT_TRUE(r.has_value());
  // indices below 2^30 (the CUDA table's max_extent)
  const int64_t most = int64_t{1} << 30;
  EXPECT_EQ(target_table(Target::cuda_sm80).max_extent, most);
  EXPECT_EQ(r->first, -(most - 1));
  EXPECT_EQ(r->second, most - 1);
  EXPECT_TRUE(em.fits32(diff));
  // m * n can reach (2^30 - 1)^2: 64-bit.
  int prod = f.find(Op::Mul, {Op::Index, Op::Index});
  ASSERT_GE(prod, 0);
  EXPECT_FALSE(em.fits32(prod));
  // i32 * i32 may wrap: stays an int64 op with the 32-bit wrap; its value range is i32's.
  int w3 = f.find(Op::Mul, {Op::Param, Op::Param});
  ASSERT_GE(w3, 0);
  EXPECT_FALSE(em.fits32(w3));
  auto rw = em.int_range(w3);
  ASSERT_TRUE(rw.has_value());
  EXPECT_EQ(rw->first, INT32_MIN);
  // An i64 input is unbounded.
  int bign = f.find(Op::Add, {Op::Param, Op::Index});
  ASSERT_GE(bign, 0);
  EXPECT_FALSE(em.int_range(bign).has_value());
  EXPECT_FALSE(em.fits32(bign));
  // Floor modulo by 4: [0, 3].
  int mod = f.find(Op::Mod, {Op::Sub, Op::Const});
  ASSERT_GE(mod, 0);
  auto rm = em.int_range(mod);
  ASSERT_TRUE(rm.has_value());
  EXPECT_EQ(rm->first, 0);
  EXPECT_EQ(rm->second, 3);
  // A relative position: the difference plus an offset, clamped to a table's rows.
  int off = f.find(Op::Add, {Op::Sub, Op::Const});
  ASSERT_GE(off, 0);
  EXPECT_TRUE(em.fits32(off));
  int cl = f.find(Op::Clamp, {Op::Add, Op::Const, Op::Sub});
  ASSERT_GE(cl, 0);
  EXPECT_TRUE(em.fits32(cl));
}

TEST(IntRange, CpuKeepsSixtyFourBitIndices) {
  Fixture f(Target::cpu);
  ElementEmitter em(f.plan, f.plan.kernels.at(0), target_table(Target::cpu));
  int diff = f.find(Op::Sub, {Op::Index, Op::Index});
  ASSERT_GE(diff, 0);
  EXPECT_FALSE(em.fits32(diff));
  EXPECT_FALSE(em.fits32(f.find(Op::Add, {Op::Sub, Op::Const})));
}

TEST(IntRange, CudaSourceComputesTheDifferenceInInt) {
  Program p = parse_source(kProgram, "f.attn").at(0);
  std::string src = emit_cuda(p, Target::cuda_sm80, {{"d", 64}, {"e", 64}});
  // f32(n - m) is a value per diagonal (a conversion is dearer than a shared-memory read): the
  // template passes the diagonal's n - m as an int, and the value converts that int.
  EXPECT_NE(src.find("static __device__ void diagonals(const Ctx& ctx, int delta,"),
            std::string::npos);
  EXPECT_NE(src.find("(float)((((float)((int)(delta)))))"), std::string::npos);
  // The per-head parameters are read once per block (hoisted into Ctx), not per element.
  EXPECT_NE(src.find("ctx.h"), std::string::npos);
  // Where n - m stays per element (m % 3 breaks the function of the diagonal), the element
  // code subtracts the indices as int.
  Program pe = parse_source(
      "program g(q: bf16[h, m, d], k: bf16[h, n, d], v: bf16[h, n, e], w: f32[h, n]) {\n"
      "  s = sum(q * k, d) + w * f32(n - m + m % 3)\n"
      "  out o: bf16[h, m, e] = sum(softmax(s, n) * v, n)\n"
      "}\n", "g.attn").at(0);
  std::string per_element = emit_cuda(pe, Target::cuda_sm80, {{"d", 64}, {"e", 64}});
  EXPECT_EQ(per_element.find("diagonals("), std::string::npos);
  EXPECT_NE(per_element.find("(((int)(((int)n))) - ((int)(((int)m))))"), std::string::npos);
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "no NVRTC: " << why;
  for (const Program* prog : {&p, &pe}) {
    std::string cubin =
        compile_cuda_cubin(*prog, Target::cuda_sm80, {{"d", 64}, {"e", 64}}, "sm_90a");
    EXPECT_EQ(cubin.substr(1, 3), "ELF");
  }
}

}  // namespace
}  // namespace flashgen
