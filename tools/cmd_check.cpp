// `flashgen check FILE`: parse and check every program of a file.
#include <iostream>

#include "cli.h"

namespace flashgen::cli {

void add_check(CLI::App& app, int& exit_code) {
  auto file = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "check", "Parse and check every program in FILE; print diagnostics and exit 1 on errors.");
  cmd->add_option("FILE", *file, "an .attn source file")->required();
  cmd->callback([file, &exit_code] {
    exit_code = guarded(*file, [&] {
      Loaded f = load(*file);
      std::string names;
      for (const auto& p : f.programs) names += (names.empty() ? "" : ", ") + p.name;
      std::cout << *file << ": ok (" << f.programs.size()
                << (f.programs.size() == 1 ? " program: " : " programs: ") << names << ")\n";
      return kOk;
    });
  });
}

}  // namespace flashgen::cli
