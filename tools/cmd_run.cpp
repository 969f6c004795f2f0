// `flashgen run FILE [--program NAME] (--inputs DIR | --random SIZES [--seed S])
//                    [--outputs DIR] [--backend ref|cpu|cuda] [--check]`
//
// Every call-time check (inputs, SIZES, extents, the output folder and every output's path)
// happens before the backend runs, and output files are written only after everything
// succeeded, all or nothing (write_npy_files), so a failing call leaves nothing behind.
// Tests: tests/cli/cli_test.cpp.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli.h"
#include "flashgen/check.h"
#include "flashgen/npy.h"

namespace flashgen::cli {

namespace {

namespace fs = std::filesystem;

struct Options {
  std::string file, program, inputs, random, outputs, backend = "ref", seed_text = "0";
  bool check = false, has_inputs = false, has_random = false;
};

std::string fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

// Element i of a contiguous integer or bool tensor, exactly (get() goes through a double).
int64_t int_at(const Tensor& c, int64_t i) {
  switch (c.dtype()) {
    case DType::i64: return static_cast<const int64_t*>(c.data())[i];
    case DType::i32: return static_cast<const int32_t*>(c.data())[i];
    default: return static_cast<int64_t>(c.get(i));
  }
}

void print_summary(const Program& p, const Output& out, const Tensor& t) {
  std::cout << out.name << ": " << dtype_name(out.type) << p.dim_list(out.dims) << " shape (";
  for (int i = 0; i < t.rank(); ++i) std::cout << (i ? ", " : "") << t.shape()[i];
  std::cout << ")\n";
  double sum = 0, sum2 = 0, lo = INFINITY, hi = -INFINITY;
  int64_t finite = 0, nan = 0, pinf = 0, ninf = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.get(i);
    if (std::isnan(v)) ++nan;
    else if (std::isinf(v)) ++(v > 0 ? pinf : ninf);
    else {
      ++finite;
      sum += v;
      sum2 += v * v;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  // Integer and bool outputs: minimum, maximum and values printed exactly, as integers.
  const bool exact = !is_float(t.dtype());
  const Tensor c = exact ? t.contiguous() : t;
  int64_t ilo = 0, ihi = 0;
  if (exact)
    for (int64_t i = 0; i < c.numel(); ++i) {
      int64_t v = int_at(c, i);
      ilo = i == 0 ? v : std::min(ilo, v);
      ihi = i == 0 ? v : std::max(ihi, v);
    }
  if (finite > 0) {
    double mean = sum / finite, var = std::max(0.0, sum2 / finite - mean * mean);
    std::cout << "  mean " << fmt(mean) << "  std " << fmt(std::sqrt(var)) << "  min "
              << (exact ? std::to_string(ilo) : fmt(lo)) << "  max "
              << (exact ? std::to_string(ihi) : fmt(hi)) << '\n';
  }
  if (nan + pinf + ninf > 0)
    std::cout << "  non-finite: " << nan << " nan, " << pinf << " +inf, " << ninf << " -inf\n";
  std::cout << "  values:";
  const int64_t shown = std::min<int64_t>(t.numel(), 6);
  for (int64_t i = 0; i < shown; ++i)
    std::cout << ' ' << (exact ? std::to_string(int_at(c, i)) : fmt(t.get(i)));
  std::cout << (t.numel() > shown ? " ...\n" : "\n");
}

// One output's error against the reference (check_outputs): max abs and max rel error, where
// the largest is, the tolerance of its dtype and non-finite values that differ.
void print_error(const Program& p, const Output& o, const OutputCheck& c, const Extents& ext) {
  std::cout << "  " << c.name << ": max abs err " << fmt(c.max_abs) << ", max rel err "
            << fmt(c.max_rel) << " (relative to max |ref| " << fmt(c.scale) << ")";
  if (c.worst >= 0 && c.max_abs > 0) {
    std::cout << " at [";
    int64_t rest = c.worst, stride = 1;
    std::vector<int64_t> shape;
    for (int d : o.dims) shape.push_back(ext.at(p.dims[d]));
    for (int64_t e : shape) stride *= e;
    for (size_t k = 0; k < shape.size(); ++k) {
      stride /= shape[k];
      std::cout << (k ? ", " : "") << p.dims[o.dims[k]] << "=" << rest / stride;
      rest %= stride;
    }
    std::cout << "]";
  }
  std::cout << "; tolerance " << fmt(c.tolerance) << " (" << dtype_name(c.precision) << ")";
  if (c.nonfinite_mismatch) std::cout << ", " << c.nonfinite_mismatch << " non-finite values differ";
  std::cout << (c.ok() ? "" : "  FAILED") << '\n';
}

// The path output `out` is written to.
std::string output_path(const std::string& dir, const Output& out) {
  return (fs::path(dir) / (out.name + ".npy")).string();
}

// Checks before anything runs that every output can be written: the folder (or the nearest
// existing folder above it, when it is to be created) is a writable folder, and no target path
// is a folder or something that cannot be inspected.
void check_output_targets(const Program& p, const std::string& dir) {
  std::error_code ec;
  fs::path existing = fs::absolute(fs::path(dir), ec);
  if (ec) throw CallError("--outputs: '" + dir + "': " + ec.message());
  while (!fs::exists(existing, ec)) {
    if (ec)
      throw CallError("--outputs: cannot inspect '" + existing.string() + "': " + ec.message());
    if (!existing.has_relative_path()) break;
    existing = existing.parent_path();
  }
  if (!fs::is_directory(existing, ec)) {
    if (existing == fs::absolute(fs::path(dir), ec))
      throw CallError("--outputs: '" + dir + "' exists and is not a folder");
    throw CallError("--outputs: cannot create folder '" + dir + "': '" + existing.string() +
                    "' is not a folder");
  }
  if (::access(existing.c_str(), W_OK | X_OK) != 0)
    throw CallError("--outputs: cannot write to folder '" + existing.string() + "': " +
                    std::strerror(errno));
  for (const auto& out : p.outputs) {
    const std::string target = output_path(dir, out);
    fs::file_status st = fs::status(target, ec);
    if (st.type() == fs::file_type::not_found) continue;
    if (ec)
      throw CallError("--outputs: cannot write output '" + out.name + "' to " + target + ": " +
                      ec.message());
    if (st.type() == fs::file_type::directory)
      throw CallError("--outputs: cannot write output '" + out.name + "' to " + target +
                      ": it is a folder");
    if (st.type() != fs::file_type::regular)
      throw CallError("--outputs: cannot write output '" + out.name + "' to " + target +
                      ": it is not a regular file");
  }
}

// Writes every output, all or nothing (write_npy_files): on failure no output file is created
// or replaced, no temporary file remains, and folders this call created are removed again.
void write_outputs(const Program& p, const TensorMap& outs, const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> created;  // the folders this call creates, outermost first
  for (fs::path d = fs::absolute(fs::path(dir), ec); !ec && !fs::exists(d, ec) &&
                                                     d.has_relative_path();
       d = d.parent_path())
    created.insert(created.begin(), d);
  auto remove_created = [&] {
    std::error_code ignored;
    for (auto it = created.rbegin(); it != created.rend(); ++it) fs::remove(*it, ignored);
  };
  fs::create_directories(dir, ec);
  if (ec) {
    remove_created();
    throw CallError("--outputs: cannot create folder '" + dir + "': " + ec.message());
  }
  std::vector<std::pair<std::string, Tensor>> files;
  for (const auto& out : p.outputs) {
    const Tensor& t = outs.at(out.name);
    files.emplace_back(output_path(dir, out), is_float(t.dtype()) ? t.to(DType::f32) : t);
  }
  try {
    write_npy_files(files);
  } catch (...) {
    remove_created();
    throw;
  }
  for (const auto& f : files) std::cout << "wrote " << f.first << '\n';
}

int run_command(const Options& o) {
  Loaded f = load(o.file);
  const Program& p = pick(f, o.program);
  auto backend = parse_backend(o.backend);
  if (!backend) throw CallError("--backend: unknown backend '" + o.backend + "'");
  if (o.has_inputs == o.has_random)
    throw CallError("give exactly one of --inputs DIR and --random SIZES");
  const uint64_t seed = parse_seed(o.seed_text);
  if (!o.outputs.empty()) check_output_targets(p, o.outputs);

  TensorMap inputs = o.has_random ? make_random_inputs(p, o.random, seed)
                                   : load_inputs(p, o.inputs);
  Extents extents = bind_extents(p, inputs);

  RunOptions opt;
  opt.backend = *backend;
  auto t0 = std::chrono::steady_clock::now();
  TensorMap outs = run(p, inputs, opt);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count();
  TensorMap ref;
  if (o.check) ref = evaluate_reference_f64(p, inputs);

  std::cout << "program " << p.name << " on the " << backend_name(*backend) << " backend: ";
  for (size_t i = 0; i < p.dims.size(); ++i)
    std::cout << (i ? ", " : "") << p.dims[i] << "=" << extents.at(p.dims[i]);
  if (o.has_random) std::cout << " (random inputs, seed " << seed << ")";
  std::cout << "; " << fmt(ms) << " ms";
  if (*backend != Backend::ref) std::cout << " (includes compiling, unless cached)";
  std::cout << '\n';
  if (o.outputs.empty())
    for (const auto& out : p.outputs) print_summary(p, out, outs.at(out.name));
  if (o.check) {
    std::cout << "error against the reference evaluator (f64):\n";
    std::vector<OutputCheck> checks = check_outputs(p, outs, ref);
    int failed = 0;
    for (size_t k = 0; k < checks.size(); ++k) {
      print_error(p, p.outputs[k], checks[k], extents);
      failed += !checks[k].ok();
    }
    if (failed) {
      // Beyond the dtype's tolerance, or a NaN/inf that the reference does not have (or the
      // reverse): a wrong result, so no output is written.
      std::cerr << "error: --check: " << failed << " output" << (failed == 1 ? "" : "s")
                << " of the " << backend_name(*backend)
                << " backend differ from the reference beyond the tolerance"
                << (o.outputs.empty() ? "" : "; no output was written") << '\n';
      return kBackendError;
    }
  }
  if (!o.outputs.empty()) write_outputs(p, outs, o.outputs);
  return kOk;
}

}  // namespace

void add_run(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "run", "Run a program on inputs from .npy files or on random inputs; print a summary of "
             "each output or write them as .npy files.");
  cmd->add_option("FILE", o->file, "an .attn source file")->required();
  cmd->add_option("--program", o->program, "the program to run (if FILE holds several)")
      ->type_name("NAME");
  auto* in = cmd->add_option("--inputs", o->inputs,
                             "folder with one DIR/<param>.npy per parameter, in the parameter's "
                             "declared dimension order");
  in->type_name("DIR");
  auto* rnd = cmd->add_option("--random", o->random,
                              "random inputs of these extents, e.g. b=2,h=4,m=n=512,d=e=64");
  rnd->type_name("SIZES");
  in->excludes(rnd);
  cmd->add_option("--seed", o->seed_text, "seed of --random, 0 to 2^64 - 1 (default 0)")
      ->needs(rnd)
      ->type_name("S");
  cmd->add_option("--outputs", o->outputs,
                  "write DIR/<output>.npy (floats as float32 holding the declared type's "
                  "values) instead of printing a summary")
      ->type_name("DIR");
  cmd->add_option("--backend", o->backend, "ref (f64 reference evaluator), cpu or cuda")
      ->check(CLI::IsMember({"ref", "cpu", "cuda"}));
  cmd->add_flag("--check", o->check,
                "also run the reference evaluator (f64) and print each output's error; exit 3 "
                "if non-finite values (NaN, inf) differ from it");
  cmd->callback([o, in, rnd, &exit_code] {
    o->has_inputs = in->count() > 0;
    o->has_random = rnd->count() > 0;
    exit_code = guarded(o->file, [&] { return run_command(*o); });
  });
}

}  // namespace flashgen::cli
