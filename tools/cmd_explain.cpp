// `flashgen explain FILE [--program NAME] [--sizes SIZES] [--target T] [--json] [--strict]`: what the
// compiler made of a program — its kernels, what each reads and writes, estimated work, and
// which intermediates are materialized and why. Tests: tests/cli/cli_test.cpp.
#include <iostream>

#include "cli.h"
#include "flashgen/compile.h"

namespace flashgen::cli {

void add_explain(CLI::App& app, int& exit_code) {
  struct Options {
    std::string file, program, sizes, target = "cpu";
    bool json = false, strict = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "explain", "Report the plan of a program: kernels, their grid and reduction loop, memory "
                 "reads and writes, estimated FLOPs and bytes, materialized intermediates.");
  cmd->add_option("FILE", o->file, "an .attn source file")->required();
  cmd->add_option("--program", o->program, "the program (if FILE holds several)")
      ->type_name("NAME");
  cmd->add_option("--sizes", o->sizes,
                  "extents for the FLOP and byte estimates, e.g. b=2,h=16,m=n=4096,d=e=128")
      ->type_name("SIZES");
  cmd->add_option("--target", o->target,
                  "cpu (default), or cuda-sm80 / cuda-sm90: also report each kernel's launch "
                  "shape on the CUDA template, or why it does not fit (needs the head dims in "
                  "--sizes)")
      ->check(CLI::IsMember({"cpu", "cuda-sm80", "cuda-sm90"}));
  cmd->add_flag("--json", o->json, "print a JSON object (with a top-level \"kernels\" array)");
  cmd->add_flag("--strict", o->strict,
                "make a materialized intermediate an error (exit 1)");
  cmd->callback([o, &exit_code] {
    exit_code = guarded(o->file, [&] {
      Loaded f = load(o->file);
      const Program& p = pick(f, o->program);
      CompileOptions opt;
      opt.strict = o->strict;
      opt.target = *parse_target(o->target);
      if (!o->sizes.empty()) {
        opt.sizes = parse_sizes(o->sizes);
        check_sizes_known(p, opt.sizes);
      }
      std::string text = o->json ? explain_json(p, opt) : explain(p, opt);
      std::cout << text;
      if (!text.empty() && text.back() != '\n') std::cout << '\n';
      return kOk;
    });
  });
}

}  // namespace flashgen::cli
