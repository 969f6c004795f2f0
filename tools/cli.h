// Shared pieces of the `flashgen` command-line tool: exit codes, loading a program, parsing
// SIZES, and the error guard that turns exceptions into diagnostics and exit codes.
// Each subcommand lives in its own cmd_*.cpp and registers itself through an add_* function.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "flashgen/flashgen.h"

namespace flashgen::cli {

// Exit codes (docs/cli.md).
enum Exit : int {
  kOk = 0,
  kProgramError = 1,  // the program is invalid: diagnostics on stderr
  kCallError = 2,     // the call is invalid (inputs, SIZES, options): nothing was written
  kBackendError = 3,  // a backend could not compile or run the program
  kInternalError = 4  // a bug in flashgen
};

// A parsed source file.
struct Loaded {
  std::string path;
  std::vector<Program> programs;
};
Loaded load(const std::string& path);
// The program named `name`, or the only one when `name` is empty.
const Program& pick(const Loaded& file, const std::string& name);

// Parses "b=2,h=4,m=n=512,d=e=64" (CallError on malformed text or conflicting values).
Extents parse_sizes(const std::string& text);
// Parses a --seed value: decimal digits only, at most 2^64 - 1 (CallError otherwise, so that
// "-1" or 2^64 never wrap around).
uint64_t parse_seed(const std::string& text);
// CallError if `sizes` names a dimension that `p` does not declare.
void check_sizes_known(const Program& p, const Extents& sizes);
// The inputs of `p` from DIR/<param>.npy, one per parameter (CallError naming a missing file, a
// wrong kind of array; a warning for files that match no parameter).
TensorMap load_inputs(const Program& p, const std::string& dir);
// Random inputs of the extents SIZES gives (every dim needs one: CallError naming it).
TensorMap make_random_inputs(const Program& p, const std::string& sizes_text, uint64_t seed);
// --input NAME=FILE.npy values, read (CallError on a malformed item).
TensorMap read_given_inputs(const std::vector<std::string>& items);

// Runs `body`; prints any flashgen error as a diagnostic on stderr and returns its exit code.
// `file` is the source file the command works on (for diagnostics with a location).
int guarded(const std::string& file, const std::function<int()>& body);

// Subcommands. Each adds itself to `app`; its exit code is stored into `exit_code` when it runs.
void add_check(CLI::App& app, int& exit_code);
void add_print(CLI::App& app, int& exit_code);
void add_run(CLI::App& app, int& exit_code);
void add_emit(CLI::App& app, int& exit_code);
void add_explain(CLI::App& app, int& exit_code);
void add_bench(CLI::App& app, int& exit_code);
void add_profile(CLI::App& app, int& exit_code);
void add_verify(CLI::App& app, int& exit_code);

}  // namespace flashgen::cli
