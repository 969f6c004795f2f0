// The `flashgen` command-line tool: one subcommand per cmd_*.cpp (see docs/cli.md).
#include <iostream>

#include "cli.h"
#include "flashgen/npy.h"

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
  add_profile(app, exit_code);
  add_verify(app, exit_code);
  // The first word that is not an option names the command; CLI11 would only say that a
  // subcommand is required.
  if (argc > 1 && argv[1][0] != '-') {
    std::string names, word = argv[1];
    bool known = false;
    for (const CLI::App* sub : app.get_subcommands({})) {
      names += (names.empty() ? "" : ", ") + sub->get_name();
      known = known || sub->get_name() == word;
    }
    if (!known) {
      std::cerr << "error: unknown command '" << flashgen::escape_bytes(word)
                << "' (commands: " << names << "; see flashgen --help)\n";
      return kCallError;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; a malformed command line is a call error. Messages echo
    // arguments, so their bytes are escaped.
    if (e.get_exit_code() == 0) return app.exit(e) == 0 ? kOk : kCallError;
    std::cerr << "error: " << flashgen::escape_bytes(e.what(), true)
              << "\nRun with --help for more information.\n";
    return kCallError;
  }
  return exit_code;
}
