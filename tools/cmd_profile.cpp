// `flashgen profile FILE [--program NAME] --sizes SIZES [--backend cpu|cuda] [--trace OUT.json]
//                        [--warmup N] [--iters N] [--seed S] [--input NAME=FILE.npy]...`:
// per kernel of the plan, compile time, median time over warm runs, the work it must do,
// achieved rates against the device's roofline, the key tiles the kernel counted and its launch
// (flashgen/profile.h). Tests: tests/cli/cli_test.cpp, tests/tools/profile_test.cpp.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli.h"
#include "flashgen/profile.h"
#include "runtime/cuda_driver.h"

namespace flashgen::cli {

void add_profile(CLI::App& app, int& exit_code) {
  struct Options {
    std::string file, program, sizes, backend, seed = "1", trace;
    int warmup = 3, iters = 20;
    std::vector<std::string> inputs;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "profile", "Time each kernel of a program's plan on random inputs and show the work it "
                 "must do, achieved rates against the device's roofline, the tiles it computed "
                 "and skipped (counted by the kernel) and its launch.");
  cmd->add_option("FILE", o->file, "an .attn source file")->required();
  cmd->add_option("--program", o->program, "the program (if FILE holds several)")
      ->type_name("NAME");
  cmd->add_option("--sizes", o->sizes, "every dimension's extent, e.g. b=4,h=16,m=n=4096,d=e=128")
      ->required()
      ->type_name("SIZES");
  cmd->add_option("--backend", o->backend, "cpu or cuda (default: cuda when a GPU is present)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--trace", o->trace,
                  "write a Chrome trace (open it in Perfetto or chrome://tracing)")
      ->type_name("OUT.json");
  cmd->add_option("--warmup", o->warmup, "untimed runs first (default 3)")->type_name("N");
  cmd->add_option("--iters", o->iters, "timed runs (default 20)")->type_name("N");
  cmd->add_option("--seed", o->seed, "seed of the random inputs, 0 to 2^64 - 1 (default 1)")
      ->type_name("S");
  cmd->add_option("--input", o->inputs,
                  "NAME=FILE.npy: this array for parameter NAME instead of random data; "
                  "repeatable")
      ->type_name("NAME=FILE.npy");
  cmd->callback([o, &exit_code] {
    exit_code = guarded(o->file, [&] {
      Loaded f = load(o->file);
      const Program& p = pick(f, o->program);
      ProfileOptions po;
      po.backend = o->backend == "cpu"    ? Backend::cpu
                   : o->backend == "cuda" ? Backend::cuda
                   : cuda_available()     ? Backend::cuda
                                          : Backend::cpu;
      po.warmup = o->warmup;
      po.iters = o->iters;
      po.seed = parse_seed(o->seed);
      po.given = read_given_inputs(o->inputs);
      Extents sizes = parse_sizes(o->sizes);
      check_sizes_known(p, sizes);
      // The trace's folder is checked before anything runs; the file is written (to a
      // temporary name, then renamed) only after the profile succeeded.
      namespace fs = std::filesystem;
      if (!o->trace.empty()) {
        std::error_code ec;
        const fs::path t = fs::absolute(o->trace, ec);
        if (ec || fs::is_directory(t, ec))
          throw CallError("--trace: '" + o->trace + "' is a folder or cannot be resolved");
        const fs::path dir = t.parent_path();
        if (!fs::is_directory(dir, ec) || ::access(dir.c_str(), W_OK | X_OK) != 0)
          throw CallError("--trace: cannot write to folder '" + dir.string() + "'");
      }
      ProfileReport r = profile(p, sizes, po);
      std::cout << profile_text(r);
      if (!o->trace.empty()) {
        const std::string tmp = o->trace + ".tmp" + std::to_string(::getpid());
        {
          std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
          out << chrome_trace_json(r) << '\n';
          out.close();
          if (!out) {
            std::remove(tmp.c_str());
            throw BackendError("--trace: writing '" + tmp + "' failed");
          }
        }
        std::error_code ec;
        fs::rename(tmp, o->trace, ec);
        if (ec) {
          std::remove(tmp.c_str());
          throw BackendError("--trace: cannot rename to '" + o->trace + "': " + ec.message());
        }
        std::cout << "\nwrote " << o->trace << " (" << r.trace.size() << " spans)\n";
      }
      return kOk;
    });
  });
}

}  // namespace flashgen::cli
