// `flashgen emit FILE [--program NAME] --target cpu|cuda-sm80|cuda-sm90 [--sizes SIZES]
//                     [--dump-after STAGE] [--cubin PATH]`: the generated kernel source for a
// target, or the program/plan text after one stage of the compiler pipeline. For cuda-* targets
// without the head dims in --sizes the kernels print on the element path (the first line says
// why); --cubin compiles with NVRTC (no GPU needed) and writes the cubin (PATH.N for a plan of
// several kernels). cuda-sm90 emits the tensor-core template for sm_90a with wgmma products where
// its tiles line up (docs/design.md, Printers).
// Tests: tests/cli/cli_test.cpp, tests/cuda/nvrtc_examples_test.cpp.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli.h"
#include "lower/launch.h"
#include "compiler/pipeline.h"
#include "flashgen/compile.h"
#include "flashgen/error.h"

namespace flashgen::cli {

void add_emit(CLI::App& app, int& exit_code) {
  struct Options {
    std::string file, program, target, sizes, dump_after, cubin;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "emit", "Print the generated source of a program for a target (C++ for cpu, CUDA C++ for "
              "cuda-*), or the program/plan after a pipeline stage.");
  cmd->add_option("FILE", o->file, "an .attn source file")->required();
  cmd->add_option("--program", o->program, "the program (if FILE holds several)")
      ->type_name("NAME");
  cmd->add_option("--target", o->target,
                  "cpu, cuda-sm80 or cuda-sm90 (cuda-sm90: the tensor-core kernels for sm_90a, "
                  "with wgmma products where the tiles line up and K/V copied by TMA)")
      ->required()
      ->check(CLI::IsMember({"cpu", "cuda-sm80", "cuda-sm90"}));
  cmd->add_option("--sizes", o->sizes,
                  "extents known at compile time, e.g. d=e=64 (only head dimensions may "
                  "specialize a kernel; cuda-* targets need every head dim)")
      ->type_name("SIZES");
  cmd->add_option("--dump-after", o->dump_after,
                  "print the program or plan after this stage instead of the source")
      ->type_name("STAGE")
      ->check(CLI::IsMember(pipeline_stage_names()));
  cmd->add_option("--cubin", o->cubin,
                  "cuda-* only: compile with NVRTC (sm_80 for cuda-sm80, sm_90a for cuda-sm90; "
                  "no GPU needed) and write the cubin to this path");
  cmd->callback([o, &exit_code] {
    exit_code = guarded(o->file, [&] {
      Loaded f = load(o->file);
      const Program& p = pick(f, o->program);
      CompileOptions opt;
      opt.target = *parse_target(o->target);
      if (!o->sizes.empty()) {
        opt.sizes = parse_sizes(o->sizes);
        check_sizes_known(p, opt.sizes);
      }
      const bool cuda = opt.target != Target::cpu;
      if (!o->cubin.empty() && !cuda)
        throw CallError("--cubin needs a cuda-sm80 or cuda-sm90 target");
      const bool source = o->dump_after.empty() || o->dump_after == "emit";
      if (!o->cubin.empty()) {
        std::error_code ec;
        if (std::filesystem::is_directory(o->cubin, ec))
          throw CallError("--cubin: cannot write " + o->cubin + ": it is a folder");
        // One kernel: PATH; several: PATH.0, PATH.1, ... in plan order.
        const std::vector<std::string> bins = compile_cuda_cubins(p, opt.target, opt.sizes);
        for (size_t i = 0; i < bins.size(); ++i) {
          const std::string path = bins.size() == 1 ? o->cubin : o->cubin + "." + std::to_string(i);
          const std::string& bin = bins[i];
          errno = 0;
          std::ofstream f(path, std::ios::binary);
          if (!f || !f.write(bin.data(), static_cast<std::streamsize>(bin.size())) || !f.flush())
            throw CallError("--cubin: cannot write " + path + ": " +
                            (errno ? std::strerror(errno) : "write error"));
          std::cerr << "wrote " << path << " (" << bin.size() << " bytes)\n";
        }
        return kOk;
      }
      std::string text = !source ? dump_after(p, o->dump_after, opt)
                         : cuda      ? emit_cuda(p, opt.target, opt.sizes)
                                     : emit_source(p, opt);
      std::cout << text;
      if (!text.empty() && text.back() != '\n') std::cout << '\n';
      return kOk;
    });
  });
}

}  // namespace flashgen::cli
