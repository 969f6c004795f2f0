// `flashgen emit FILE [--program NAME] --target cpu|cuda-sm80|cuda-sm90 [--sizes SIZES]
//                     [--dump-after STAGE]`: the generated kernel source for a target, or the
// program/plan text after one stage of the compiler pipeline. Tests: tests/cli/cli_test.cpp.
#include <iostream>

#include "cli.h"
#include "flashgen/compile.h"

namespace flashgen::cli {

void add_emit(CLI::App& app, int& exit_code) {
  struct Options {
    std::string file, program, target, sizes, dump_after;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "emit", "Print the generated source of a program for a target (C++ for cpu, CUDA C++ for "
              "cuda-*), or the program/plan after a pipeline stage.");
  cmd->add_option("FILE", o->file, "an .attn source file")->required();
  cmd->add_option("--program", o->program, "the program (if FILE holds several)")
      ->type_name("NAME");
  cmd->add_option("--target", o->target, "cpu, cuda-sm80 or cuda-sm90")
      ->required()
      ->check(CLI::IsMember({"cpu", "cuda-sm80", "cuda-sm90"}));
  cmd->add_option("--sizes", o->sizes,
                  "extents known at compile time, e.g. d=e=64 (only head dimensions may "
                  "specialize a kernel)")
      ->type_name("SIZES");
  cmd->add_option("--dump-after", o->dump_after,
                  "print the program or plan after this stage instead of the source")
      ->type_name("STAGE")
      ->check(CLI::IsMember(pipeline_stage_names()));
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
      std::string text = o->dump_after.empty() ? emit_source(p, opt)
                                               : dump_after(p, o->dump_after, opt);
      std::cout << text;
      if (!text.empty() && text.back() != '\n') std::cout << '\n';
      return kOk;
    });
  });
}

}  // namespace flashgen::cli
