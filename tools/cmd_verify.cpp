// `flashgen verify FILE [--program NAME] (--random SIZES [--seed S] | --inputs DIR)
//                       [--tolerance REL]`: runs the program on every backend this machine has
// (ref, cpu, cuda) on the same inputs and prints each output's error against the f64 reference
// (flashgen/verify.h). Exit 0 when every backend that ran is within the tolerance, 3 when one
// is not; backends that could not run are listed with why. Tests: tests/cli/cli_test.cpp,
// tests/tools/verify_test.cpp.
#include <iostream>

#include "cli.h"
#include "flashgen/verify.h"

namespace flashgen::cli {

void add_verify(CLI::App& app, int& exit_code) {
  struct Options {
    std::string file, program, inputs, random, seed = "0", tolerance;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "Run a program on every backend available here (ref, cpu, cuda) on the same "
                "inputs and compare each output with the f64 reference evaluator; exit 3 if any "
                "backend differs beyond the tolerance.");
  cmd->add_option("FILE", o->file, "an .attn source file")->required();
  cmd->add_option("--program", o->program, "the program (if FILE holds several)")
      ->type_name("NAME");
  auto* in = cmd->add_option("--inputs", o->inputs, "folder with one DIR/<param>.npy per parameter")
                 ->type_name("DIR");
  auto* rnd = cmd->add_option("--random", o->random,
                              "random inputs of these extents, e.g. b=2,h=4,m=n=512,d=e=64")
                  ->type_name("SIZES");
  in->excludes(rnd);
  cmd->add_option("--seed", o->seed, "seed of --random, 0 to 2^64 - 1 (default 0)")
      ->needs(rnd)
      ->type_name("S");
  cmd->add_option("--tolerance", o->tolerance,
                  "hold every output to this relative error (default: its dtype's tolerance)")
      ->type_name("REL");
  cmd->callback([o, in, rnd, &exit_code] {
    exit_code = guarded(o->file, [&] {
      Loaded f = load(o->file);
      const Program& p = pick(f, o->program);
      if ((in->count() > 0) == (rnd->count() > 0))
        throw CallError("give exactly one of --inputs DIR and --random SIZES");
      VerifyOptions vo;
      if (!o->tolerance.empty()) {
        size_t used = 0;
        double t = -1;
        try {
          t = std::stod(o->tolerance, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != o->tolerance.size() || !(t >= 0))
          throw CallError("--tolerance: '" + o->tolerance + "' is not a non-negative number");
        vo.tolerance = t;
      }
      const uint64_t seed = parse_seed(o->seed);
      TensorMap inputs = rnd->count() ? make_random_inputs(p, o->random, seed)
                                      : load_inputs(p, o->inputs);
      const Extents ext = bind_extents(p, inputs);
      if (rnd->count()) std::cout << "random inputs " << o->random << ", seed " << seed << "\n";
      VerifyReport r = verify(p, inputs, vo);
      std::cout << verify_text(p, r, ext);
      return r.ok() ? kOk : kBackendError;
    });
  });
}

}  // namespace flashgen::cli
