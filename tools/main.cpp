// The `flashgen` command-line tool: one subcommand per cmd_*.cpp (see docs/cli.md).
#include <iostream>

#include "cli.h"

int main(int argc, char** argv) {
  using namespace flashgen::cli;
  CLI::App app{"flashgen: compile attention programs written as tensor code (.attn files) into "
               "fused kernels, and run them.",
               "flashgen"};
  app.set_version_flag("--version", std::string("flashgen ") + flashgen::version());
  app.require_subcommand(1);
  app.fallthrough(false);
  int exit_code = kOk;
  add_check(app, exit_code);
  add_print(app, exit_code);
  add_run(app, exit_code);
  add_emit(app, exit_code);
  add_explain(app, exit_code);
  add_bench(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a malformed command line is a call error.
    int code = app.exit(e);
    return code == 0 ? kOk : kCallError;
  }
  return exit_code;
}
