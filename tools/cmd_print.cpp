// `flashgen print FILE [--program NAME]`: the IR's stable text form (Program::str()).
#include <iostream>

#include "cli.h"

namespace flashgen::cli {

void add_print(CLI::App& app, int& exit_code) {
  struct Options {
    std::string file, program;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "print", "Print the IR of a program in its text form (all programs without --program).");
  cmd->add_option("FILE", o->file, "an .attn source file")->required();
  cmd->add_option("--program", o->program, "the program to print")->type_name("NAME");
  cmd->callback([o, &exit_code] {
    exit_code = guarded(o->file, [&] {
      Loaded f = load(o->file);
      if (!o->program.empty()) {
        std::cout << pick(f, o->program).str();
        return kOk;
      }
      for (size_t i = 0; i < f.programs.size(); ++i)
        std::cout << (i ? "\n" : "") << f.programs[i].str();
      return kOk;
    });
  });
}

}  // namespace flashgen::cli
