// The host compiler: compile + dlopen + call, in-process and on-disk caching (also across
// processes compiling the same key at once), compiler failures and a missing compiler.
#include "runtime/host_compiler.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "flashgen/error.h"
#include "runtime/compile_cache.h"
#include "runtime/runtime_test_util.h"

extern char** environ;

namespace flashgen {
namespace {

namespace fs = std::filesystem;
using testing_runtime::ScopedEnv;
using testing_runtime::message_of;
using testing_runtime::TempCacheDir;

// An OpenMP reduction and a scalar function; SCALE comes from -DSCALE=... so flags matter.
const char* kSource = R"(
#include <cstdint>
extern "C" double weighted_sum(const double* x, std::int64_t n) {
  double s = 0;
  #pragma omp parallel for reduction(+ : s)
  for (std::int64_t i = 0; i < n; ++i) s += x[i] * (double)(i % 7 + 1);
  return s * SCALE;
}
extern "C" int add3(int a, int b, int c) { return a + b + c; }
)";

TEST(HostCompiler, CompilesLoadsAndCallsAtOddSizes) {
  TempCacheDir dir;
  std::mt19937_64 rng(31);
  const int scale = 2 + static_cast<int>(rng() % 50);
  auto lib = host_compile(kSource, {{"-DSCALE=" + std::to_string(scale)}});
  ASSERT_TRUE(lib);
  EXPECT_FALSE(lib->from_cache());
  EXPECT_TRUE(cache_lookup(lib->key(), ".so")) << "the library is in the disk cache";
  EXPECT_EQ(fs::path(lib->path()).parent_path(), fs::path(dir.path()));
  auto add3 = lib->function<int(int, int, int)>("add3");
  for (int i = 0; i < 100; ++i) {
    int a = static_cast<int>(rng() % 20001) - 10000, b = static_cast<int>(rng() % 777),
        c = -static_cast<int>(rng() % 1000);
    EXPECT_EQ(add3(a, b, c), a + b + c);
  }
  auto weighted_sum = lib->function<double(const double*, std::int64_t)>("weighted_sum");
  std::uniform_real_distribution<double> u(-1, 1);
  for (std::int64_t n : {1, 7, 77, 1000, 100003}) {
    std::vector<double> x(static_cast<size_t>(n));
    for (double& v : x) v = u(rng);
    long double expect = 0;
    for (std::int64_t i = 0; i < n; ++i) expect += x[i] * static_cast<double>(i % 7 + 1);
    expect *= scale;
    EXPECT_NEAR(weighted_sum(x.data(), n), static_cast<double>(expect),
                1e-10 * static_cast<double>(n) * scale)
        << "n=" << n;
  }
  // The same source and flags again: the same loaded library, no compiler run.
  EXPECT_EQ(host_compile(kSource, {{"-DSCALE=" + std::to_string(scale)}}), lib);
  // Different flags: a different key and a different library.
  auto other = host_compile(kSource, {{"-DSCALE=" + std::to_string(scale + 1)}});
  EXPECT_NE(other->key(), lib->key());
  double one = 1;
  EXPECT_DOUBLE_EQ(other->function<double(const double*, std::int64_t)>("weighted_sum")(&one, 1),
                   scale + 1);
}

TEST(HostCompiler, MissingSymbolIsAClearError) {
  TempCacheDir dir;
  auto lib = host_compile(kSource, {{"-DSCALE=1"}});
  std::string msg = message_of([&] { lib->symbol("no_such_function"); });
  EXPECT_NE(msg.find("no_such_function"), std::string::npos) << msg;
  EXPECT_NE(msg.find(lib->path()), std::string::npos) << msg;
}

TEST(HostCompiler, ThreadsCompilingTheSameSourceShareOneLibrary) {
  TempCacheDir dir;
  std::string source =
      std::string(kSource) + "// threads " + std::to_string(std::random_device{}());
  std::vector<std::shared_ptr<const HostLibrary>> libs(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < libs.size(); ++i) {
    threads.emplace_back([&, i] { libs[i] = host_compile(source, {{"-DSCALE=3"}}); });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& l : libs) EXPECT_EQ(l, libs[0]);
  EXPECT_EQ(libs[0]->function<int(int, int, int)>("add3")(1, 2, 3), 6);
}

TEST(HostCompiler, SyntaxErrorGivesTheCompilerLogCommandAndSavedSource) {
  TempCacheDir dir;
  const std::string bad = "extern \"C\" int f(int x) { return x +* ; }\n";
  std::string msg = message_of([&] { host_compile(bad); });
  EXPECT_NE(msg.find("host compilation failed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("error"), std::string::npos) << msg;  // the compiler's own log
  EXPECT_NE(msg.find("expected primary-expression"), std::string::npos) << msg;
  EXPECT_NE(msg.find("-march=native"), std::string::npos) << msg;  // the command
  size_t at = msg.find("generated source saved at ");
  ASSERT_NE(at, std::string::npos) << msg;
  std::string path = msg.substr(at + std::string("generated source saved at ").size());
  path = path.substr(0, path.find('\n'));
  EXPECT_EQ(read_file_bytes(path), bad);
  EXPECT_NE(msg.find(path), std::string::npos);
}

TEST(HostCompiler, MissingCompilerIsAClearError) {
  TempCacheDir dir;
  ScopedEnv cxx("FLASHGEN_CXX", "/nonexistent/c++");
  std::string msg = message_of([] { host_compile("extern \"C\" int g() { return 1; }\n"); });
  EXPECT_NE(msg.find("/nonexistent/c++"), std::string::npos) << msg;
  EXPECT_NE(msg.find("could not be run"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
  EXPECT_NE(msg.find("FLASHGEN_CXX"), std::string::npos) << msg;
  EXPECT_NE(msg.find("saved at " + dir.path()), std::string::npos) << msg;
  // A "compiler" that runs but fails (here `false`) is reported with its exit status.
  ScopedEnv cxx2("FLASHGEN_CXX", "false");
  std::string msg2 = message_of([] { host_compile("extern \"C\" int h() { return 2; }\n"); });
  EXPECT_NE(msg2.find("exited with status 1"), std::string::npos) << msg2;
}

// A compile that runs past $FLASHGEN_COMPILE_TIMEOUT is stopped with a clear error, and the
// processes the compiler started are stopped with it. The "compiler" is a script that answers
// --version and otherwise starts a long sleep, records its pid and waits for it.
TEST(HostCompiler, CompileTimeLimitStopsTheCompilerAndItsChildren) {
  TempCacheDir dir;
  const std::string script = dir.path() + "/slow-cxx";
  const std::string pid_file = dir.path() + "/child.pid";
  fs::create_directories(dir.path());
  {
    FILE* f = std::fopen(script.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fprintf(f,
                 "#!/bin/sh\n"
                 "if [ \"$1\" = --version ]; then echo slow-cxx 1.0; exit 0; fi\n"
                 "sleep 60 &\n"
                 "echo $! > %s\n"
                 "wait\n",
                 pid_file.c_str());
    std::fclose(f);
    ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  }
  ScopedEnv cxx("FLASHGEN_CXX", script.c_str());
  ScopedEnv limit("FLASHGEN_COMPILE_TIMEOUT", "1.5");
  auto t0 = std::chrono::steady_clock::now();
  std::string msg = message_of([] { host_compile("extern \"C\" int slow() { return 3; }\n"); });
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(msg.find("host compilation took longer than 1.5 s and was stopped"),
            std::string::npos) << msg;
  EXPECT_NE(msg.find("FLASHGEN_COMPILE_TIMEOUT"), std::string::npos) << msg;
  EXPECT_NE(msg.find("generated source saved at " + dir.path()), std::string::npos) << msg;
  EXPECT_LT(seconds, 20.0);
  std::optional<std::string> pid_text = read_file_bytes(pid_file);
  ASSERT_TRUE(pid_text.has_value());
  pid_t child = static_cast<pid_t>(std::stol(*pid_text));
  // The sleep was in the compiler's process group: it is gone (or a zombie of init, reaped soon).
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    std::optional<std::string> stat =
        read_file_bytes("/proc/" + std::to_string(child) + "/stat");
    gone = !stat || stat->find(") Z") != std::string::npos;
    if (!gone) ::usleep(100000);
  }
  EXPECT_TRUE(gone) << "the compiler's child " << child << " still runs";
}

TEST(HostCompiler, CompileTimeLimitMustBeANumber) {
  ScopedEnv limit("FLASHGEN_COMPILE_TIMEOUT", "soon");
  try {
    host_compile_time_limit();
    FAIL() << "no error";
  } catch (const CallError& e) {
    EXPECT_NE(std::string(e.what()).find("FLASHGEN_COMPILE_TIMEOUT must be a number of seconds"),
              std::string::npos) << e.what();
  }
  ScopedEnv none("FLASHGEN_COMPILE_TIMEOUT", "0");
  EXPECT_EQ(host_compile_time_limit(), 0.0);
}

// Run only as a child of DiskCacheServesOtherProcessesAndConcurrentBuilds: compiles kSource
// with SCALE from the environment and prints whether it came from the disk cache.
TEST(HostCompiler, DISABLED_ChildProcessCompile) {
  const char* scale = std::getenv("FLASHGEN_TEST_SCALE");
  ASSERT_NE(scale, nullptr);
  auto lib = host_compile(kSource, {{std::string("-DSCALE=") + scale}});
  double x[3] = {1, 1, 1};  // weights 1, 2, 3
  double v = lib->function<double(const double*, std::int64_t)>("weighted_sum")(x, 3);
  std::printf("child from_cache=%d value=%g\n", lib->from_cache() ? 1 : 0, v);
}

struct Child {
  pid_t pid;
  std::string out_path;
};

Child spawn_child(const std::string& scale, const std::string& out_path) {
  std::string exe = fs::read_symlink("/proc/self/exe").string();
  std::vector<std::string> args = {exe, "--gtest_also_run_disabled_tests",
                                   "--gtest_filter=HostCompiler.DISABLED_ChildProcessCompile"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::setenv("FLASHGEN_TEST_SCALE", scale.c_str(), 1);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::unsetenv("FLASHGEN_TEST_SCALE");
  EXPECT_EQ(rc, 0);
  return {pid, out_path};
}

std::string wait_child(const Child& c) {
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child failed";
  std::string out = read_file_bytes(c.out_path).value_or("");
  size_t at = out.find("child ");
  return at == std::string::npos ? out : out.substr(at, out.find('\n', at) - at);
}

TEST(HostCompiler, DiskCacheServesOtherProcessesAndConcurrentBuilds) {
  TempCacheDir dir;
  cache_dir();  // creates the folder the children's output goes to
  const std::string scale = std::to_string(10 + std::random_device{}() % 1000);
  const std::string value = std::to_string(6 * std::stoi(scale));
  // Four processes build the same key at once: all succeed with the right answer.
  std::vector<Child> children;
  for (int i = 0; i < 4; ++i) {
    children.push_back(spawn_child(scale, dir.path() + "/child" + std::to_string(i) + ".txt"));
  }
  for (const Child& c : children) {
    std::string line = wait_child(c);
    EXPECT_NE(line.find("value=" + value), std::string::npos) << line;
  }
  // A later process finds it on disk and runs no compiler.
  std::string line = wait_child(spawn_child(scale, dir.path() + "/child-late.txt"));
  EXPECT_EQ(line, "child from_cache=1 value=" + value);
  // A corrupted entry is rebuilt, not trusted.
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    if (entry.path().extension() == ".so") fs::resize_file(entry.path(), 100);
  }
  line = wait_child(spawn_child(scale, dir.path() + "/child-rebuild.txt"));
  EXPECT_EQ(line, "child from_cache=0 value=" + value);
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().rfind(".tmp-", 0), std::string::npos);
  }
}

}  // namespace
}  // namespace flashgen
