// `flashgen run FILE [--program NAME] (--inputs DIR | --random SIZES [--seed S])
//                    [--outputs DIR] [--backend ref|cpu|cuda] [--check]`
//
// Every call-time check (inputs, SIZES, extents, the output folder) happens before the backend
// runs, and output files are written only after everything succeeded (to temporary names, then
// renamed), so a failing call leaves nothing behind. Tests: tests/cli/cli_test.cpp.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli.h"
#include "flashgen/npy.h"

namespace flashgen::cli {

namespace {

namespace fs = std::filesystem;

struct Options {
  std::string file, program, inputs, random, outputs, backend = "ref";
  uint64_t seed = 0;
  bool check = false, has_inputs = false, has_random = false;
};

std::string fmt(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

std::string describe(const Program& p, const Parameter& par) {
  return par.name + ": " + dtype_name(par.type) + p.dim_list(par.dims);
}

TensorMap load_inputs(const Program& p, const std::string& dir) {
  if (!fs::is_directory(dir))
    throw CallError("--inputs: '" + dir + "' is not a folder");
  TensorMap inputs;
  for (const auto& par : p.params) {
    const std::string path = dir + "/" + par.name + ".npy";
    if (!fs::exists(path))
      throw CallError("missing input for parameter '" + par.name + "': expected " + path +
                      " holding " + describe(p, par));
    inputs[par.name] = read_npy(path).tensor;
  }
  for (const auto& entry : fs::directory_iterator(dir)) {
    const fs::path& f = entry.path();
    if (f.extension() == ".npy" && p.find_param(f.stem().string()) < 0)
      std::cerr << "warning: " << f.string() << " matches no parameter of program '" << p.name
                << "' and is ignored\n";
  }
  return inputs;
}

TensorMap make_random_inputs(const Program& p, const std::string& sizes_text, uint64_t seed) {
  Extents sizes = parse_sizes(sizes_text);
  check_sizes_known(p, sizes);
  for (const auto& par : p.params)
    for (int d : par.dims)
      if (!sizes.count(p.dims[d]))
        throw CallError("dimension '" + p.dims[d] + "' of parameter '" + par.name + "' (" +
                        describe(p, par) + ") has no extent: add " + p.dims[d] +
                        "=N to SIZES");
  for (const auto& d : p.dims)
    if (!sizes.count(d))
      throw CallError("dimension '" + d + "' has no extent: add " + d + "=N to SIZES");
  return random_inputs(p, sizes, seed);
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
  if (finite > 0) {
    double mean = sum / finite, var = std::max(0.0, sum2 / finite - mean * mean);
    std::cout << "  mean " << fmt(mean) << "  std " << fmt(std::sqrt(var)) << "  min " << fmt(lo)
              << "  max " << fmt(hi) << '\n';
  }
  if (nan + pinf + ninf > 0)
    std::cout << "  non-finite: " << nan << " nan, " << pinf << " +inf, " << ninf << " -inf\n";
  std::cout << "  values:";
  const int64_t shown = std::min<int64_t>(t.numel(), 6);
  for (int64_t i = 0; i < shown; ++i) std::cout << ' ' << fmt(t.get(i));
  std::cout << (t.numel() > shown ? " ...\n" : "\n");
}

// Max absolute error, and that error relative to the largest |reference| of the output.
// Returns how many non-finite values differ (NaN/inf where the other has something else).
int64_t print_error(const Output& out, const Tensor& got, const Tensor& ref) {
  double max_abs = 0, scale = 0;
  int64_t mismatched = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    double a = got.get(i), r = ref.get(i);
    if (std::isfinite(r)) scale = std::max(scale, std::abs(r));
    if (std::isfinite(a) && std::isfinite(r)) max_abs = std::max(max_abs, std::abs(a - r));
    else if (!(a == r || (std::isnan(a) && std::isnan(r)))) ++mismatched;
  }
  std::cout << "  " << out.name << ": max abs err " << fmt(max_abs) << ", max rel err "
            << fmt(scale > 0 ? max_abs / scale : max_abs) << " (relative to max |ref| "
            << fmt(scale) << ")";
  if (mismatched) std::cout << ", " << mismatched << " non-finite values differ";
  std::cout << '\n';
  return mismatched;
}

void write_outputs(const Program& p, const TensorMap& outs, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw CallError("--outputs: cannot create folder '" + dir + "': " + ec.message());
  // Write every file under a temporary name first, so a failure leaves no partial result.
  std::vector<std::pair<std::string, std::string>> staged;
  try {
    for (const auto& out : p.outputs) {
      const Tensor& t = outs.at(out.name);
      const std::string final_path = dir + "/" + out.name + ".npy";
      const std::string tmp = dir + "/." + out.name + ".npy.tmp" + std::to_string(getpid());
      staged.emplace_back(tmp, final_path);
      write_npy(tmp, is_float(t.dtype()) ? t.to(DType::f32) : t);
    }
  } catch (...) {
    for (const auto& [tmp, final_path] : staged) fs::remove(tmp, ec);
    throw;
  }
  for (const auto& [tmp, final_path] : staged) {
    fs::rename(tmp, final_path, ec);
    if (ec) throw CallError("--outputs: cannot write '" + final_path + "': " + ec.message());
    std::cout << "wrote " << final_path << '\n';
  }
}

int run_command(const Options& o) {
  Loaded f = load(o.file);
  const Program& p = pick(f, o.program);
  auto backend = parse_backend(o.backend);
  if (!backend) throw CallError("--backend: unknown backend '" + o.backend + "'");
  if (o.has_inputs == o.has_random)
    throw CallError("give exactly one of --inputs DIR and --random SIZES");
  if (!o.outputs.empty() && fs::exists(o.outputs) && !fs::is_directory(o.outputs))
    throw CallError("--outputs: '" + o.outputs + "' exists and is not a folder");

  TensorMap inputs = o.has_random ? make_random_inputs(p, o.random, o.seed)
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
  if (o.has_random) std::cout << " (random inputs, seed " << o.seed << ")";
  std::cout << "; " << fmt(ms) << " ms";
  if (*backend != Backend::ref) std::cout << " (includes compiling, unless cached)";
  std::cout << '\n';
  if (o.outputs.empty())
    for (const auto& out : p.outputs) print_summary(p, out, outs.at(out.name));
  int64_t mismatched = 0;
  if (o.check) {
    std::cout << "error against the reference evaluator (f64):\n";
    for (const auto& out : p.outputs)
      mismatched += print_error(out, outs.at(out.name), ref.at(out.name));
  }
  if (!o.outputs.empty()) write_outputs(p, outs, o.outputs);
  if (mismatched) {
    // Finite errors are a matter of precision; a NaN/inf that the reference does not have (or
    // the reverse) is a wrong result.
    std::cerr << "error: --check: " << mismatched << " non-finite value"
              << (mismatched == 1 ? "" : "s") << " of the " << backend_name(*backend)
              << " backend differ from the reference\n";
    return kBackendError;
  }
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
  cmd->add_option("--seed", o->seed, "seed of --random (default 0)")
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
