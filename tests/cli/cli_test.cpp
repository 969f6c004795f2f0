// The `flashgen` binary, run as a user would: in temporary folders, on .npy files. Checks exit
// codes (0 ok, 1 program error, 2 call error), messages, and that a failing call writes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <random>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "flashgen/flashgen.h"
#include "flashgen/npy.h"
#include "support/support.h"

namespace flashgen {
namespace {

using testing::ProcessResult;
using testing::run_flashgen;
using testing::TempDir;

const std::string kCausal = testing::source_path("examples/causal.attn");

// A small program with distinctive names, so messages can be searched for them.
const char* kRowSum = R"(program rowsum(xin: f32[rows, cols], yvec: bf16[cols]) {
  out z: f32[rows] = sum(xin * yvec, cols)
  out pos: bool[rows, cols] = xin > 0
  out cnt: i64[rows] = sum(where(xin > 0, 1, 0), cols)
}
)";

std::string dump(const ProcessResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Cli, Version) {
  ProcessResult r = run_flashgen({"--version"});
  EXPECT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_TRUE(contains(r.out, version())) << dump(r);
}

TEST(Cli, HelpOnEveryCommand) {
  ProcessResult top = run_flashgen({"--help"});
  ASSERT_EQ(top.exit_code, 0) << dump(top);
  for (const std::string cmd : {"check", "print", "run", "emit", "explain", "profile", "verify"}) {
    EXPECT_TRUE(contains(top.out, cmd)) << cmd << "\n" << dump(top);
    ProcessResult r = run_flashgen({cmd, "--help"});
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << dump(r);
    EXPECT_TRUE(contains(r.out, "FILE")) << cmd << "\n" << dump(r);
  }
  ProcessResult run = run_flashgen({"run", "--help"});
  for (const std::string opt : {"--inputs", "--random", "--seed", "--outputs", "--backend",
                                "--check", "--program"})
    EXPECT_TRUE(contains(run.out, opt)) << opt << "\n" << dump(run);
}

TEST(Cli, UsageErrorsExit2) {
  EXPECT_EQ(run_flashgen({}).exit_code, 2);
  EXPECT_EQ(run_flashgen({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(run_flashgen({"run", kCausal, "--random", "b=1", "--backend", "tpu"}).exit_code, 2);
  // SIZES: an empty item, a trailing comma (a size the user meant to type), a bad number
  for (const char* sizes : {"b=1,,h=2", "b=1,h=2,m=n=7,d=e=5,", "b=x"}) {
    const ProcessResult r = run_flashgen({"run", kCausal, "--random", sizes});
    EXPECT_EQ(r.exit_code, 2) << sizes << "\n" << dump(r);
    EXPECT_TRUE(contains(r.err, "invalid SIZES")) << sizes << "\n" << dump(r);
  }
}

TEST(Cli, CheckExamplesOk) {
  for (const auto& f : testing::list_dir(testing::source_path("examples"))) {
    ProcessResult r = run_flashgen({"check", testing::source_path("examples/" + f)});
    EXPECT_EQ(r.exit_code, 0) << f << "\n" << dump(r);
    EXPECT_EQ(r.err, "") << f;
  }
}

TEST(Cli, CheckReportsDiagnostics) {
  TempDir dir;
  const std::string bad = dir.file("bad.attn");
  testing::write_text_file(
      bad, "program p(x: f32[m, n]) {\n  y = x + 1\n  out o: f32[m] = sum(y, d)\n}\n");
  ProcessResult r = run_flashgen({"check", bad});
  EXPECT_EQ(r.exit_code, 1) << dump(r);
  EXPECT_TRUE(contains(r.err, bad + ":3:")) << dump(r);
  EXPECT_TRUE(contains(r.err, "error:")) << dump(r);
  EXPECT_TRUE(contains(r.err, "out o: f32[m] = sum(y, d)")) << dump(r);  // the source line
  EXPECT_TRUE(contains(r.err, "^")) << dump(r);                          // and a caret

  // The same program fails `print` and `run` the same way, before anything runs.
  EXPECT_EQ(run_flashgen({"print", bad}).exit_code, 1);
  ProcessResult rr = run_flashgen({"run", bad, "--random", "m=n=3", "--outputs", dir.file("o")});
  EXPECT_EQ(rr.exit_code, 1) << dump(rr);
  EXPECT_FALSE(testing::file_exists(dir.file("o")));
}

TEST(Cli, MissingFileIsACallError) {
  TempDir dir;
  for (const std::string cmd : {"check", "print"}) {
    ProcessResult r = run_flashgen({cmd, dir.file("nope.attn")});
    EXPECT_EQ(r.exit_code, 2) << dump(r);
    EXPECT_TRUE(contains(r.err, "nope.attn")) << dump(r);
  }
}

TEST(Cli, PrintMatchesTheIr) {
  ProcessResult r = run_flashgen({"print", kCausal});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_EQ(r.out, parse_file(kCausal).at(0).str());

  TempDir dir;
  const std::string two = dir.file("two.attn");
  testing::write_text_file(two, std::string(kRowSum) +
                                    "program neg(a: f32[i]) {\n  out b: f32[i] = -a\n}\n");
  std::vector<Program> ps = parse_file(two);
  ASSERT_EQ(ps.size(), 2u);
  ProcessResult one = run_flashgen({"print", two, "--program", "neg"});
  EXPECT_EQ(one.exit_code, 0) << dump(one);
  EXPECT_EQ(one.out, ps[1].str());
  ProcessResult all = run_flashgen({"print", two});
  EXPECT_EQ(all.out, ps[0].str() + "\n" + ps[1].str());
  ProcessResult unknown = run_flashgen({"print", two, "--program", "nope"});
  EXPECT_EQ(unknown.exit_code, 2) << dump(unknown);
  EXPECT_TRUE(contains(unknown.err, "rowsum") && contains(unknown.err, "neg")) << dump(unknown);
  // `run` needs to know which one.
  ProcessResult amb = run_flashgen({"run", two, "--random", "rows=2,cols=3,i=4"});
  EXPECT_EQ(amb.exit_code, 2) << dump(amb);
}

TEST(Cli, RunRandomWritesOutputs) {
  TempDir dir;
  const std::string out = dir.file("out");
  ProcessResult r = run_flashgen({"run", kCausal, "--random", "b=2,h=3,m=7,n=77,d=e=5",
                                  "--seed", "42", "--outputs", out});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_EQ(testing::list_dir(out), std::vector<std::string>{"o.npy"});
  NpyArray o = read_npy(out + "/o.npy");
  EXPECT_EQ(o.descr, "<f4");
  EXPECT_EQ(o.tensor.shape(), (std::vector<int64_t>{2, 3, 7, 5}));

  // The same inputs through the library give the same values (bf16 values stored as f32).
  const Program p = parse_file(kCausal).at(0);
  Extents ext = {{"b", 2}, {"h", 3}, {"m", 7}, {"n", 77}, {"d", 5}, {"e", 5}};
  Tensor want = evaluate_reference(p, random_inputs(p, ext, 42)).at("o");
  for (int64_t i = 0; i < want.numel(); ++i) {
    ASSERT_EQ(o.tensor.get(i), want.get(i)) << i;
    ASSERT_EQ(round_to_dtype(o.tensor.get(i), DType::bf16), o.tensor.get(i)) << i;
  }
}

TEST(Cli, RunPrintsSummaryAndCheck) {
  ProcessResult r = run_flashgen({"run", testing::source_path("examples/lse.attn"), "--random",
                                  "b=1,h=2,m=n=9,d=e=4", "--check"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  for (const std::string part : {"o: bf16[b, h, m, e]", "lse: f32[b, h, m]", "mean", "std",
                                 "min", "max", "max abs err", "max rel err"})
    EXPECT_TRUE(contains(r.out, part)) << part << "\n" << dump(r);
}

// --check applies the dtype's tolerance: the evoformer program whose -1e9 key-mask bias absorbs
// the scores in f32 (the reference computes f32 values as f32 too) passes; an output that
// differs from the reference by a non-finite value fails with exit 3 and writes nothing. The
// difference is the documented one of docs/language.md §8: a row whose scores hold +inf has a
// NaN softmax, and the CPU's weighted sum of zeros is NaN there where the reference gives 0.
TEST(Cli, RunCheckAppliesTheTolerance) {
  ProcessResult ok = run_flashgen({"run", testing::source_path("examples/evoformer_row.attn"),
                                   "--random", "b=4,s=8,h=1,m=3,n=2,i=3,j=2,d=8", "--backend",
                                   "cpu", "--check"});
  ASSERT_EQ(ok.exit_code, 0) << dump(ok);
  EXPECT_TRUE(contains(ok.out, "; tolerance 0.015625 (bf16)")) << dump(ok);
  EXPECT_FALSE(contains(ok.out, "FAILED")) << dump(ok);

  TempDir dir;
  const std::string prog = dir.file("w.attn"), in = dir.file("in"), out = dir.file("out");
  testing::write_text_file(prog,
                           "program w(s: f32[m, n], v: f32[n, e]) {\n"
                           "  out o: f32[m, e] = sum(softmax(s, n) * v, n)\n"
                           "}\n");
  std::filesystem::create_directory(in);
  Tensor sc(DType::f32, {2, 3}), v(DType::f32, {3, 2});
  for (int64_t i = 0; i < 6; ++i) sc.set(i, 0.25 * static_cast<double>(i));
  sc.set_at({0, 1}, std::numeric_limits<double>::infinity());
  for (int64_t i = 0; i < 3; ++i) v.set_at({i, 1}, 1.0);  // column 0 stays 0
  write_npy(in + "/s.npy", sc);
  write_npy(in + "/v.npy", v);
  ProcessResult bad = run_flashgen(
      {"run", prog, "--inputs", in, "--backend", "cpu", "--check", "--outputs", out});
  EXPECT_EQ(bad.exit_code, 3) << dump(bad);
  EXPECT_TRUE(contains(bad.out, "1 non-finite values differ  FAILED")) << dump(bad);
  EXPECT_TRUE(contains(bad.err, "--check: 1 output of the cpu backend differ")) << dump(bad);
  EXPECT_FALSE(std::filesystem::exists(out)) << dump(bad);
}

// Inputs of other float widths (f64 here) are rounded to the declared dtype; bool and integer
// outputs keep their type.
TEST(Cli, RunInputsFromNpy) {
  TempDir dir;
  const std::string prog = dir.file("rowsum.attn"), in = dir.file("in"), out = dir.file("out");
  testing::write_text_file(prog, kRowSum);
  std::filesystem::create_directory(in);
  std::mt19937_64 rng(5);
  Tensor x = testing::random_float_tensor(DType::f64, {7, 13}, rng);
  Tensor y = testing::random_float_tensor(DType::f64, {13}, rng);
  write_npy(in + "/xin.npy", x);
  write_npy(in + "/yvec.npy", y);
  ProcessResult r = run_flashgen({"run", prog, "--inputs", in, "--outputs", out});
  ASSERT_EQ(r.exit_code, 0) << dump(r);

  NpyArray z = read_npy(out + "/z.npy"), pos = read_npy(out + "/pos.npy"),
           cnt = read_npy(out + "/cnt.npy");
  EXPECT_EQ(z.descr, "<f4");
  EXPECT_EQ(pos.descr, "|b1");
  EXPECT_EQ(cnt.descr, "<i8");
  for (int64_t i = 0; i < 7; ++i) {
    double acc = 0;
    int64_t c = 0;
    for (int64_t j = 0; j < 13; ++j) {
      double xv = round_to_dtype(x.at({i, j}), DType::f32);
      // Each product is an f32 value (docs/language.md §5); the sum is rounded once.
      acc += round_to_dtype(xv * round_to_dtype(y.at({j}), DType::bf16), DType::f32);
      c += xv > 0;
      EXPECT_EQ(pos.tensor.at({i, j}), xv > 0 ? 1.0 : 0.0);
    }
    EXPECT_EQ(z.tensor.at({i}), round_to_dtype(acc, DType::f32)) << i;
    EXPECT_EQ(cnt.tensor.at({i}), double(c));
  }
}

// The cpu backend agrees with the reference backend (bf16 outputs: within a few bf16 ulps).
TEST(Cli, RunCpuBackendMatchesRef) {
  TempDir dir;
  const std::string prog = testing::source_path("examples/alibi.attn");
  for (const std::string backend : {"ref", "cpu"}) {
    ProcessResult r = run_flashgen({"run", prog, "--random", "b=1,h=3,m=7,n=77,d=5,e=3",
                                    "--backend", backend, "--outputs", dir.file(backend)});
    ASSERT_EQ(r.exit_code, 0) << dump(r);
  }
  Tensor ref = read_npy(dir.file("ref") + "/o.npy").tensor;
  Tensor cpu = read_npy(dir.file("cpu") + "/o.npy").tensor;
  EXPECT_EQ(testing::compare_tensors(cpu, ref, 2e-2 * testing::max_abs(ref)), "");
}

TEST(Cli, Explain) {
  ProcessResult r = run_flashgen({"explain", kCausal, "--sizes", "b=1,h=2,m=n=100,d=e=64"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_TRUE(contains(r.out, "kernel")) << dump(r);
  ProcessResult j = run_flashgen({"explain", kCausal, "--json", "--strict"});
  ASSERT_EQ(j.exit_code, 0) << dump(j);
  nlohmann::json doc = nlohmann::json::parse(j.out);
  ASSERT_TRUE(doc["kernels"].is_array()) << j.out;
  ASSERT_EQ(doc["kernels"].size(), 1u) << j.out;
  EXPECT_EQ(doc["kernels"][0]["reads"], nlohmann::json({"q", "k", "v"})) << j.out;
  EXPECT_EQ(doc["kernels"][0]["writes"], nlohmann::json({"o"})) << j.out;

  ProcessResult unknown = run_flashgen({"explain", kCausal, "--sizes", "zz=3"});
  EXPECT_EQ(unknown.exit_code, 2) << dump(unknown);
  EXPECT_TRUE(contains(unknown.err, "zz")) << dump(unknown);
}

// --strict fails exactly when explain reports a materialized intermediate (exit 1, with the
// reason). Whether this program fuses is the compiler's decision; the CLI must agree with it.
TEST(Cli, ExplainStrictAgreesWithMaterialized) {
  TempDir dir;
  const std::string prog = dir.file("colrow.attn");
  testing::write_text_file(prog, "program colrow(x: f32[m, n]) {\n"
                                 "  out r: f32[m] = max(sum(x, m) + x, n)\n}\n");
  ProcessResult j = run_flashgen({"explain", prog, "--json"});
  ASSERT_EQ(j.exit_code, 0) << dump(j);
  nlohmann::json doc = nlohmann::json::parse(j.out);
  ASSERT_TRUE(doc["materialized"].is_array()) << j.out;
  ProcessResult s = run_flashgen({"explain", prog, "--strict"});
  if (doc["materialized"].empty()) {
    EXPECT_EQ(s.exit_code, 0) << dump(s);
  } else {
    EXPECT_EQ(s.exit_code, 1) << dump(s);
    EXPECT_TRUE(contains(s.err, prog + ":1:")) << dump(s);
    EXPECT_TRUE(contains(s.err, "materialized")) << dump(s);
  }
}

TEST(Cli, Emit) {
  ProcessResult r = run_flashgen({"emit", kCausal, "--target", "cpu"});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_TRUE(contains(r.out, "causal")) << dump(r);
  ProcessResult d = run_flashgen({"emit", kCausal, "--target", "cpu", "--dump-after",
                                  "canonicalize"});
  EXPECT_EQ(d.exit_code, 0) << dump(d);
  EXPECT_FALSE(d.out.empty());
  EXPECT_EQ(run_flashgen({"emit", kCausal, "--target", "cpu", "--dump-after", "nope"}).exit_code,
            2);
  EXPECT_EQ(run_flashgen({"emit", kCausal, "--target", "tpu"}).exit_code, 2);
  EXPECT_EQ(run_flashgen({"emit", kCausal}).exit_code, 2);  // --target is required
}

// A program with two outputs, for the all-or-nothing writes of --outputs.
const char* kTwoOutputs = R"(program two(x: f32[m]) {
  out y: f32[m] = x + 1
  out z: f32[m] = x * 2
}
)";

// No output file is created or replaced, and no temporary file remains, when one output's
// path is a folder: the call fails before anything runs.
TEST(Cli, OutputsAreAllOrNothingWhenATargetIsAFolder) {
  TempDir dir;
  const std::string prog = dir.file("two.attn"), od = dir.file("od");
  testing::write_text_file(prog, kTwoOutputs);
  std::filesystem::create_directories(od + "/z.npy");
  ProcessResult r = run_flashgen({"run", prog, "--random", "m=5", "--outputs", od});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_TRUE(contains(r.err, "'z'") && contains(r.err, od + "/z.npy") &&
              contains(r.err, "it is a folder"))
      << dump(r);
  EXPECT_EQ(testing::list_dir(od), std::vector<std::string>{"z.npy"});
  EXPECT_TRUE(testing::list_dir(od + "/z.npy").empty());

  // A previous y.npy is left as it was.
  testing::write_text_file(od + "/y.npy", "previous");
  r = run_flashgen({"run", prog, "--random", "m=5", "--outputs", od});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_EQ(testing::list_dir(od), (std::vector<std::string>{"y.npy", "z.npy"}));
  EXPECT_EQ(testing::read_text_file(od + "/y.npy"), "previous");

  // Once the path is free, both are written (y.npy replaced) and nothing else is left.
  std::filesystem::remove(od + "/z.npy");
  r = run_flashgen({"run", prog, "--random", "m=5", "--outputs", od});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_EQ(testing::list_dir(od), (std::vector<std::string>{"y.npy", "z.npy"}));
  EXPECT_EQ(read_npy(od + "/y.npy").tensor.numel(), 5);
}

// --outputs under a file: the folder cannot be created; nothing is created.
TEST(Cli, OutputsUnderAFile) {
  TempDir dir;
  const std::string prog = dir.file("two.attn");
  testing::write_text_file(prog, kTwoOutputs);
  testing::write_text_file(dir.file("f"), "x");
  ProcessResult r = run_flashgen({"run", prog, "--random", "m=5", "--outputs",
                                  dir.file("f") + "/sub/out"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_TRUE(contains(r.err, "is not a folder")) << dump(r);
  EXPECT_EQ(testing::list_dir(dir.path()), (std::vector<std::string>{"f", "two.attn"}));
}

// An --outputs folder that cannot be written is found before the program runs.
TEST(Cli, OutputsInAnUnwritableFolder) {
  TempDir dir;
  const std::string prog = dir.file("two.attn"), od = dir.file("od");
  testing::write_text_file(prog, kTwoOutputs);
  std::filesystem::create_directory(od);
  std::filesystem::permissions(od, std::filesystem::perms::owner_read |
                                       std::filesystem::perms::owner_exec);
  if (::access(od.c_str(), W_OK) == 0) {
    std::filesystem::permissions(od, std::filesystem::perms::owner_all);
    GTEST_SKIP() << "file permissions do not apply to this user (root)";
  }
  ProcessResult r = run_flashgen({"run", prog, "--random", "m=5", "--outputs", od + "/sub"});
  std::filesystem::permissions(od, std::filesystem::perms::owner_all);
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_TRUE(contains(r.err, "cannot write to folder '" + od + "'")) << dump(r);
  EXPECT_FALSE(contains(r.out, "program two")) << "the program ran\n" << dump(r);
  EXPECT_TRUE(testing::list_dir(od).empty());
}

// A FILE argument that is a folder is a call error naming it, for every command.
TEST(Cli, FileArgumentIsAFolder) {
  TempDir dir;
  const std::vector<std::vector<std::string>> calls = {
      {"check", dir.path()},
      {"print", dir.path()},
      {"run", dir.path(), "--random", "m=1"},
      {"explain", dir.path()},
      {"emit", dir.path(), "--target", "cpu"},
  };
  for (const auto& args : calls) {
    ProcessResult r = run_flashgen(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << "\n" << dump(r);
    EXPECT_EQ(r.err, "error: cannot read " + dir.path() + ": is a directory\n") << dump(r);
  }
}

TEST(Cli, UnknownCommandIsNamed) {
  ProcessResult r = run_flashgen({"bogus", "x.attn"});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_TRUE(contains(r.err, "unknown command 'bogus'")) << dump(r);
  EXPECT_TRUE(contains(r.err, "check, print, run, emit, explain, bench")) << dump(r);
  // Raw bytes of the command line are escaped.
  ProcessResult raw = run_flashgen({"\xff\x1b"});
  EXPECT_EQ(raw.exit_code, 2) << dump(raw);
  EXPECT_TRUE(contains(raw.err, "unknown command '\\xff\\x1b'")) << dump(raw);
}

// --seed takes 0 .. 2^64 - 1; anything else is an error, never a wrapped value.
TEST(Cli, SeedRange) {
  TempDir dir;
  const std::string prog = dir.file("two.attn");
  testing::write_text_file(prog, kTwoOutputs);
  for (const std::string seed : {"-1", "18446744073709551616", "99999999999999999999999", "1x",
                                 "+3", " 3"}) {
    ProcessResult r = run_flashgen({"run", prog, "--random", "m=2", "--seed", seed});
    EXPECT_EQ(r.exit_code, 2) << seed << "\n" << dump(r);
    EXPECT_TRUE(contains(r.err, "--seed: '" + seed + "' is not an integer from 0 to "
                                "18446744073709551615"))
        << dump(r);
  }
  ProcessResult ok = run_flashgen({"run", prog, "--random", "m=2", "--seed",
                                   "18446744073709551615"});
  EXPECT_EQ(ok.exit_code, 0) << dump(ok);
  EXPECT_TRUE(contains(ok.out, "seed 18446744073709551615")) << dump(ok);
}

// Integer outputs are summarized exactly (not as -9.22337e+18).
TEST(Cli, IntegerOutputsPrintedExactly) {
  TempDir dir;
  const std::string prog = dir.file("ints.attn"), in = dir.file("in");
  testing::write_text_file(prog, "program ints(a: i64[m]) {\n  out b: i64[m] = a + 0\n}\n");
  std::filesystem::create_directory(in);
  Tensor a(DType::i64, {3});
  int64_t* v = static_cast<int64_t*>(a.data());
  v[0] = 123456789;
  v[1] = std::numeric_limits<int64_t>::min();
  v[2] = int64_t{1} << 62;
  write_npy(in + "/a.npy", a);
  ProcessResult r = run_flashgen({"run", prog, "--inputs", in});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  EXPECT_TRUE(contains(r.out, "min -9223372036854775808  max 4611686018427387904")) << dump(r);
  EXPECT_TRUE(contains(r.out, "values: 123456789 -9223372036854775808 4611686018427387904\n"))
      << dump(r);
}

// The tensor-core kernel compiles its head dims in: without them, emit prints the element path
// and its first line says why; with them, the tensor-core kernel (head extents in its header).
// `--dump-after lower` says which path each kernel takes.
TEST(Cli, EmitCudaTakesTheTensorCorePathWithTheHeadDims) {
  TempDir dir;
  const std::string vanilla = testing::source_path("examples/vanilla.attn");
  for (const std::string target : {"cuda-sm80", "cuda-sm90"}) {
    ProcessResult src = run_flashgen({"emit", vanilla, "--target", target});
    EXPECT_EQ(src.exit_code, 0) << dump(src);
    EXPECT_TRUE(contains(src.out, "CUDA element path (the extents of its head dims (d, e) are "
                                  "not given"))
        << dump(src);
    ProcessResult lower = run_flashgen({"emit", vanilla, "--target", target, "--sizes",
                                        "d=64,e=32", "--dump-after", "lower"});
    EXPECT_EQ(lower.exit_code, 0) << dump(lower);
    EXPECT_TRUE(contains(lower.out, "kernel vanilla_k0: path tensor_core")) << dump(lower);
  }
  ProcessResult full = run_flashgen({"emit", vanilla, "--target", "cuda-sm80", "--sizes",
                                     "d=64,e=32"});
  EXPECT_EQ(full.exit_code, 0) << dump(full);
  EXPECT_TRUE(contains(full.out, "d=64 e=32")) << dump(full);
  // --dump-after emit is the same source; earlier stages need no extents.
  ProcessResult dumped = run_flashgen({"emit", vanilla, "--target", "cuda-sm80", "--sizes",
                                       "d=64,e=32", "--dump-after", "emit"});
  EXPECT_EQ(dumped.exit_code, 0) << dump(dumped);
  EXPECT_EQ(dumped.out, full.out);
  EXPECT_EQ(run_flashgen({"emit", vanilla, "--target", "cuda-sm80", "--dump-after", "fuse"})
                .exit_code,
            0);
}

// Call-time errors: exit 2, a message naming the parameter and the dimension, nothing written.
class CallErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    prog_ = dir_.file("rowsum.attn");
    testing::write_text_file(prog_, kRowSum);
    std::filesystem::create_directory(in_);
  }
  void put(const std::string& name, const Tensor& t) { write_npy(in_ + "/" + name + ".npy", t); }
  Tensor f64(std::vector<int64_t> shape) {
    return testing::random_float_tensor(DType::f64, shape, rng_);
  }
  // Runs with extra arguments and --outputs; expects exit 2, every `parts` in stderr, no files.
  void expect_error(std::vector<std::string> args, std::vector<std::string> parts) {
    args.insert(args.begin(), {"run", prog_});
    args.insert(args.end(), {"--outputs", out_});
    ProcessResult r = run_flashgen(args);
    EXPECT_EQ(r.exit_code, 2) << dump(r);
    for (const auto& part : parts) EXPECT_TRUE(contains(r.err, part)) << part << "\n" << dump(r);
    EXPECT_FALSE(testing::file_exists(out_)) << "an output folder was created";
  }
  TempDir dir_;
  std::string prog_, in_ = dir_.file("in"), out_ = dir_.file("out");
  std::mt19937_64 rng_{3};
};

TEST_F(CallErrors, MissingInputFile) {
  put("xin", f64({4, 5}));
  expect_error({"--inputs", in_}, {"yvec", "cols"});
}

TEST_F(CallErrors, MissingInputFolder) { expect_error({"--inputs", dir_.file("nope")}, {"nope"}); }

TEST_F(CallErrors, WrongRank) {
  put("xin", f64({4, 5, 1}));
  put("yvec", f64({5}));
  expect_error({"--inputs", in_}, {"xin", "rows", "cols"});
}

TEST_F(CallErrors, WrongDtypeKind) {
  put("xin", f64({4, 5}));
  put("yvec", testing::random_bool_tensor({5}, 0.5, rng_));
  expect_error({"--inputs", in_}, {"yvec", "bool"});
}

TEST_F(CallErrors, IntegerParameterGivenFloats) {
  const std::string doc = testing::source_path("examples/document.attn");
  prog_ = doc;
  for (const char* p : {"q", "k"}) put(p, f64({1, 2, 5, 3}));
  put("v", f64({1, 2, 5, 4}));
  put("doc", f64({5}));
  expect_error({"--inputs", in_}, {"doc", "i32"});
}

// The message names the file's numpy dtype (a uint8 array is not reported as the i64 it is
// widened to).
TEST_F(CallErrors, BoolParameterGivenUint8) {
  prog_ = dir_.file("mask.attn");
  testing::write_text_file(prog_, "program mask(x: f32[n], keep: bool[n]) {\n"
                                  "  out o: f32[n] = where(keep, x, 0.0)\n}\n");
  put("x", f64({4}));
  // numpy's np.save of np.ones(4, np.uint8): '|u1' data.
  std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }";
  std::string header = dict + std::string(128 - 10 - dict.size() - 1, ' ') + "\n";
  std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) +
                      '\0' + header + std::string(4, '\x01');
  testing::write_text_file(in_ + "/keep.npy", bytes);
  expect_error({"--inputs", in_}, {"'keep'", "bool[n]", "uint8 ('|u1')",
                                   "bool parameters need a bool array"});
  ProcessResult r = run_flashgen({"run", prog_, "--inputs", in_});
  EXPECT_FALSE(contains(r.err, "i64")) << dump(r);
}

// Raw bytes from an input file (here a malformed header) are escaped in the message.
TEST_F(CallErrors, RawBytesOfAnInputAreEscaped) {
  put("yvec", f64({5}));
  std::string dict = "{'descr': '<f8', 'fortran_order': \xff\x1b[2J, 'shape': (4, 5), }";
  std::string header = dict + std::string(128 - 10 - dict.size() - 1, ' ') + "\n";
  testing::write_text_file(in_ + "/xin.npy", std::string("\x93NUMPY\x01\x00", 8) +
                                                 static_cast<char>(header.size()) + '\0' +
                                                 header + std::string(160, '\0'));
  expect_error({"--inputs", in_}, {"xin.npy", "\\xff\\x1b[2J"});
  ProcessResult r = run_flashgen({"run", prog_, "--inputs", in_});
  EXPECT_FALSE(contains(r.err, "\xff")) << dump(r);
  EXPECT_FALSE(contains(r.err, "\x1b")) << dump(r);
}

TEST_F(CallErrors, InputsDisagreeOnADimension) {
  put("xin", f64({4, 5}));
  put("yvec", f64({6}));
  expect_error({"--inputs", in_}, {"cols", "xin", "yvec", "5", "6"});
}

TEST_F(CallErrors, UnboundDimensionInSizes) {
  expect_error({"--random", "rows=3"}, {"cols", "xin"});
}

TEST_F(CallErrors, SizesNameAnUnknownDimension) {
  expect_error({"--random", "rows=3,cols=4,depth=2"}, {"depth", "rowsum"});
}

TEST_F(CallErrors, MalformedSizes) {
  for (const std::string s : {"rows=3,cols", "rows=x,cols=2", "rows=-1,cols=2", "=3",
                              "rows=3,rows=4,cols=1", ""})
    expect_error({"--random", s}, {"SIZES"});
}

TEST_F(CallErrors, OutOfRangeGather) {
  // doc has t = 3 entries but is read at every query and key position up to 7.
  prog_ = testing::source_path("examples/document.attn");
  expect_error({"--random", "b=1,h=1,m=n=7,d=e=2,t=3"}, {"doc"});
}

TEST_F(CallErrors, InputsAndRandomTogetherOrNeither) {
  put("xin", f64({4, 5}));
  put("yvec", f64({5}));
  expect_error({"--inputs", in_, "--random", "rows=4,cols=5"}, {});
  expect_error({}, {"--inputs", "--random"});
}

TEST_F(CallErrors, OutputsIsAFile) {
  testing::write_text_file(dir_.file("file"), "x");
  ProcessResult r = run_flashgen({"run", prog_, "--random", "rows=2,cols=2", "--outputs",
                                  dir_.file("file")});
  EXPECT_EQ(r.exit_code, 2) << dump(r);
  EXPECT_EQ(testing::read_text_file(dir_.file("file")), "x");
}

TEST(Cli, VerifyPassesOnEveryBackendHereAndFailsAtZeroTolerance) {
  TempDir dir;
  ProcessResult ok = run_flashgen({"verify", kCausal, "--random", "b=1,h=2,m=33,n=40,d=e=16",
                                   "--seed", "7"});
  ASSERT_EQ(ok.exit_code, 0) << dump(ok);
  EXPECT_TRUE(contains(ok.out, "\nref: ok")) << dump(ok);
  EXPECT_TRUE(contains(ok.out, "\ncpu: ok")) << dump(ok);
  EXPECT_TRUE(contains(ok.out, "\ncuda: ")) << dump(ok);
  EXPECT_TRUE(contains(ok.out, "tolerance 0.0156 (bf16)")) << dump(ok);
  EXPECT_EQ(ok.out.rfind("random inputs b=1,h=2,m=33,n=40,d=e=16, seed 7\n", 0), 0u) << dump(ok);
  EXPECT_TRUE(contains(ok.out, "backends ran; all that ran agree")) << dump(ok);
  ProcessResult zero = run_flashgen({"verify", kCausal, "--random", "b=1,h=2,m=33,n=40,d=e=16",
                                     "--tolerance", "0"});
  EXPECT_EQ(zero.exit_code, 3) << dump(zero);
  EXPECT_TRUE(contains(zero.out, "cpu: FAILED")) << dump(zero);
  EXPECT_TRUE(contains(zero.out, "tolerance 0 (given)")) << dump(zero);
  // Call errors: both or neither of --inputs / --random, a bad tolerance, a missing extent.
  EXPECT_EQ(run_flashgen({"verify", kCausal}).exit_code, 2);
  EXPECT_EQ(run_flashgen({"verify", kCausal, "--random", "b=1,h=1,m=n=4,d=e=4", "--tolerance",
                          "-1"}).exit_code, 2);
  ProcessResult missing = run_flashgen({"verify", kCausal, "--random", "b=1,h=1,m=n=4,d=4"});
  EXPECT_EQ(missing.exit_code, 2) << dump(missing);
  EXPECT_TRUE(contains(missing.err, "'e'")) << dump(missing);
}

TEST(Cli, VerifyReadsInputsFromAFolder) {
  TempDir dir;
  const std::string src = dir.file("rowsum.attn");
  testing::write_text_file(src, kRowSum);
  std::mt19937_64 rng(5);
  write_npy(dir.file("xin.npy"), testing::random_float_tensor(DType::f32, {5, 9}, rng));
  write_npy(dir.file("yvec.npy"), testing::random_float_tensor(DType::f32, {9}, rng));
  ProcessResult r = run_flashgen({"verify", src, "--inputs", dir.path()});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  // Integer and bool outputs of integer data must match exactly: tolerance 0.
  EXPECT_TRUE(contains(r.out, "cnt: max abs err 0")) << dump(r);
}

TEST(Cli, ProfilePrintsEveryFieldAndWritesATrace) {
  TempDir dir;
  const std::string trace = dir.file("t.json");
  ProcessResult r = run_flashgen({"profile", kCausal, "--sizes", "b=1,h=2,m=n=200,d=e=16",
                                  "--backend", "cpu", "--iters", "3", "--trace", trace});
  ASSERT_EQ(r.exit_code, 0) << dump(r);
  for (const std::string field : {"peak compute:", "peak memory:", "compile:", "time:", "work:",
                                  "achieved:", "roofline:", "tiles:", "launch:"})
    EXPECT_TRUE(contains(r.out, "\n  " + field)) << field << "\n" << dump(r);
  EXPECT_TRUE(contains(r.out, "over 3 runs")) << dump(r);
  nlohmann::json j = nlohmann::json::parse(testing::read_text_file(trace));
  int kernels = 0;
  for (const auto& e : j["traceEvents"]) kernels += e.value("cat", "") == "kernel";
  EXPECT_EQ(kernels, 3);
  EXPECT_EQ(testing::list_dir(dir.path()), std::vector<std::string>{"t.json"});  // no temp files
}

TEST(Cli, ProfileChecksItsCallBeforeRunningAndWritesNothingOnError) {
  TempDir dir;
  ProcessResult no_dir = run_flashgen({"profile", kCausal, "--sizes", "b=1,h=1,m=n=8,d=e=4",
                                       "--backend", "cpu", "--trace", dir.file("no/t.json")});
  EXPECT_EQ(no_dir.exit_code, 2) << dump(no_dir);
  EXPECT_TRUE(contains(no_dir.err, "--trace")) << dump(no_dir);
  ProcessResult bad = run_flashgen({"profile", kCausal, "--sizes", "b=1,h=1,m=n=8,d=4",
                                    "--backend", "cpu", "--trace", dir.file("t.json")});
  EXPECT_EQ(bad.exit_code, 2) << dump(bad);
  EXPECT_TRUE(contains(bad.err, "'e'")) << dump(bad);
  EXPECT_TRUE(testing::list_dir(dir.path()).empty());
  ProcessResult iters = run_flashgen({"profile", kCausal, "--sizes", "b=1,h=1,m=n=8,d=e=4",
                                      "--backend", "cpu", "--iters", "0"});
  EXPECT_EQ(iters.exit_code, 2) << dump(iters);
}

}  // namespace
}  // namespace flashgen
