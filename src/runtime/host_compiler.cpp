// The host compiler: see host_compiler.h. Tests: tests/runtime/host_compiler_test.cpp.
#include "runtime/host_compiler.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>

#include "flashgen/error.h"
#include "runtime/compile_cache.h"

extern char** environ;

namespace flashgen {
namespace {

struct ProcessResult {
  int spawn_errno = 0;     // non-zero: the program could not be started
  int exit_code = -1;      // the exit status, or -1 if killed by a signal
  bool timed_out = false;  // killed after the time limit
  std::string output;      // stdout and stderr, interleaved
};

// Runs argv[0] (searched in PATH) with stdout and stderr captured. posix_spawn is safe to use
// from a multi-threaded process, unlike fork + arbitrary code. The child leads its own process
// group, so that when it runs longer than `limit_s` seconds (0: no limit) the whole group (the
// compiler driver and the cc1plus/as/ld it started) is killed.
ProcessResult run_process(const std::vector<std::string>& argv, double limit_s = 0) {
  ProcessResult r;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    r.spawn_errno = errno;
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    r.spawn_errno = rc;
    return r;
  }
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(limit_s));
  char buf[4096];
  for (;;) {
    int wait_ms = -1;
    if (limit_s > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        r.timed_out = true;
        ::kill(-pid, SIGKILL);
        break;
      }
      wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 1000));
    }
    pollfd pfd{fds[0], POLLIN, 0};
    int pr = ::poll(&pfd, 1, wait_ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) continue;  // no output yet: check the deadline again
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      r.output.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (r.timed_out) ::kill(-pid, SIGKILL);  // anything of the group still running
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string join(const std::vector<std::string>& words, const char* sep) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) out += (i ? sep : "") + words[i];
  return out;
}

bool in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    std::filesystem::path candidate(dir.empty() ? std::string(".") : dir);
    candidate /= name;
    if (::access(candidate.c_str(), X_OK) == 0) return true;
  }
  return false;
}

// The CPU's model name and feature flags: part of the key of -march=native builds.
std::string cpu_identity() {
  static const std::string id = [] {
    std::string out;
    std::optional<std::string> info = read_file_bytes("/proc/cpuinfo");
    if (!info) return out;
    std::stringstream ss(*info);
    std::string line;
    bool model = false, flags = false;
    while (std::getline(ss, line) && !(model && flags)) {
      if (!model && line.rfind("model name", 0) == 0) {
        out += line + "\n";
        model = true;
      }
      if (!flags && line.rfind("flags", 0) == 0) {
        out += line + "\n";
        flags = true;
      }
    }
    return out;
  }();
  return id;
}

std::string describe_command(const std::vector<std::string>& cmd) { return join(cmd, " "); }

[[noreturn]] void throw_cannot_run(const std::vector<std::string>& cmd, const ProcessResult& r,
                                   const std::string& saved_source) {
  std::string msg = "host compiler '" + cmd[0] + "' could not be run";
  if (r.spawn_errno) {
    msg += ": " + std::string(std::strerror(r.spawn_errno)) + "\ncommand: " + describe_command(cmd);
  } else {
    msg += "\ncommand: " + describe_command(cmd) + "\nexited with status " +
           std::to_string(r.exit_code) + "; output:\n" + r.output;
  }
  msg += "\nSet FLASHGEN_CXX to a working C++ compiler (g++ or clang++).";
  if (!saved_source.empty()) msg += "\nGenerated source saved at " + saved_source;
  throw BackendError(msg);
}

std::mutex g_mutex;                                                     // guards the maps below
std::map<std::string, std::string> g_versions;                          // command -> version
std::map<std::string, std::shared_ptr<const HostLibrary>> g_libraries;  // key -> library
std::map<std::string, std::shared_ptr<std::mutex>> g_key_locks;         // key -> build lock

// `cmd --version`, memoized; on failure throws, first saving `source` (if given) for the user.
std::string compiler_version(const std::vector<std::string>& cmd, std::string_view source,
                             const std::string& source_key) {
  std::string id = join(cmd, "\n");
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = g_versions.find(id);
    if (it != g_versions.end()) return it->second;
  }
  std::vector<std::string> argv = cmd;
  argv.push_back("--version");
  ProcessResult r = run_process(argv);
  if (r.spawn_errno || r.exit_code != 0) {
    std::string saved;
    if (!source_key.empty()) saved = cache_save_source(source_key, ".cpp", source);
    throw_cannot_run(argv, r, saved);
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_versions[id] = r.output;
  return r.output;
}

void* open_library(const std::string& path, std::string* error) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    *error = e ? e : "unknown dlopen error";
  }
  return h;
}

}  // namespace

void* HostLibrary::symbol(const std::string& name) const {
  ::dlerror();
  void* p = ::dlsym(handle_, name.c_str());
  if (!p) {
    const char* e = ::dlerror();
    throw BackendError("symbol '" + name + "' not found in " + path_ +
                       (e ? ": " + std::string(e) : "") + " (is it declared extern \"C\"?)");
  }
  return p;
}

std::vector<std::string> host_compiler_command() {
  std::vector<std::string> words;
  if (const char* cxx = std::getenv("FLASHGEN_CXX"); cxx && *cxx) {
    std::stringstream ss(cxx);
    std::string w;
    while (ss >> w) words.push_back(w);
  }
  if (words.empty()) words.push_back(in_path("c++") || !in_path("g++") ? "c++" : "g++");
  return words;
}

std::string host_compiler_version() { return compiler_version(host_compiler_command(), {}, {}); }

double host_compile_time_limit() {
  const char* text = std::getenv("FLASHGEN_COMPILE_TIMEOUT");
  if (!text || !*text) return kDefaultHostCompileTimeLimit;
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(v >= 0) || !std::isfinite(v)) {
    throw CallError("FLASHGEN_COMPILE_TIMEOUT must be a number of seconds >= 0 (0: no limit), "
                    "got '" + std::string(text) + "'");
  }
  return v;
}

std::vector<std::string> host_default_flags() {
  // -fwrapv: integer arithmetic in generated code wraps (the reference's i64 semantics).
  return {"-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c++17", "-fwrapv"};
}

std::shared_ptr<const HostLibrary> host_compile(std::string_view source,
                                                const HostCompileOptions& opt) {
  std::vector<std::string> cmd = host_compiler_command();
  std::vector<std::string> flags = host_default_flags();
  flags.insert(flags.end(), opt.extra_flags.begin(), opt.extra_flags.end());
  std::string flag_text = join(flags, "\n");
  bool native = false;
  for (const std::string& f : flags)
    native = native || f == "-march=native" || f == "-mtune=native";

  // Identifies the source before the compiler is known to work (to save it on failure).
  std::string source_key = cache_key({"host-source", source, join(cmd, "\n"), flag_text});
  std::string version = compiler_version(cmd, source, source_key);
  std::string key = cache_key(
      {"host", source, join(cmd, "\n"), version, flag_text, native ? cpu_identity() : ""});

  std::shared_ptr<std::mutex> key_lock;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (auto it = g_libraries.find(key); it != g_libraries.end()) return it->second;
    auto& slot = g_key_locks[key];
    if (!slot) slot = std::make_shared<std::mutex>();
    key_lock = slot;
  }
  std::lock_guard<std::mutex> build_lock(*key_lock);
  {
    std::lock_guard<std::mutex> lock(g_mutex);  // another thread may have built it meanwhile
    if (auto it = g_libraries.find(key); it != g_libraries.end()) return it->second;
  }

  std::string error;
  void* handle = nullptr;
  bool from_cache = false;
  std::string path;
  if (std::optional<std::string> cached = cache_lookup(key, ".so")) {
    handle = open_library(*cached, &error);  // on failure (e.g. a foreign file): rebuild
    from_cache = handle != nullptr;
    path = *cached;
  }
  if (!handle) {
    std::string src_path = cache_save_source(key, ".cpp", source);
    std::string tmp = cache_temp_path(key, ".so");
    std::vector<std::string> argv = cmd;
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {src_path, "-o", tmp});
    const double limit_s = host_compile_time_limit();
    ProcessResult r = run_process(argv, limit_s);
    if (r.timed_out) {
      std::remove(tmp.c_str());
      char limit[32];
      std::snprintf(limit, sizeof limit, "%g", limit_s);
      throw BackendError("host compilation took longer than " + std::string(limit) +
                         " s and was stopped (the limit is $FLASHGEN_COMPILE_TIMEOUT seconds; " +
                         "0 means none)\ncommand: " + describe_command(argv) +
                         "\ngenerated source saved at " + src_path + " (" +
                         std::to_string(source.size()) + " bytes)");
    }
    if (r.spawn_errno) {
      std::remove(tmp.c_str());
      throw_cannot_run(argv, r, src_path);
    }
    if (r.exit_code != 0) {
      std::remove(tmp.c_str());
      throw BackendError("host compilation failed (exit status " + std::to_string(r.exit_code) +
                         ")\ncommand: " + describe_command(argv) + "\ncompiler output:\n" +
                         r.output + "\ngenerated source saved at " + src_path);
    }
    std::optional<std::string> bytes = read_file_bytes(tmp);
    std::remove(tmp.c_str());
    if (!bytes) throw BackendError("host compiler produced no output file " + tmp);
    path = cache_store(key, ".so", *bytes);
    handle = open_library(path, &error);
    if (!handle) {
      throw BackendError("cannot load the compiled library " + path + ": " + error +
                         "\ngenerated source saved at " + src_path);
    }
  }
  auto lib = std::make_shared<const HostLibrary>(handle, path, key, from_cache);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_libraries[key] = lib;
  g_key_locks.erase(key);
  return lib;
}

}  // namespace flashgen
