// The compiler behind the frontend, checked on one input: every program of `source` that parses
// goes through the reference evaluator on small random inputs, and through the pipeline to target
// code for the CPU and both CUDA targets, with `explain` in text and JSON. Extents come from the
// input's own bytes, so a mutation can change them: 1 to 4 a dim for the reference, and 16, 32,
// 64 or 128 a dim for the CUDA targets (what the head dims compile in; the wgmma kernels of
// cuda-sm90 need multiples of 64). No code is compiled or run: emission only.
// A correct answer is a result or a flashgen error (SourceError, ProgramError, CallError,
// BackendError) that does not say "internal error". Returns "" for a correct answer, else the
// problem. Used by fuzz/compile_fuzzer.cpp and, over fuzz/corpus/compile and mutated examples,
// by tests/property/compile_corpus_test.cpp.
#pragma once

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "compiler/pipeline.h"
#include "flashgen/compile.h"
#include "flashgen/error.h"
#include "flashgen/frontend.h"
#include "flashgen/ref.h"

namespace flashgen::fuzz {

inline std::string compile_check(const std::string& source) {
  std::vector<Program> programs;
  try {
    programs = parse_source(source, "fuzz.attn");
  } catch (const SourceError&) {
    return "";  // the parser target covers diagnostics
  }
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the input: the extents and the input seed
  for (unsigned char c : source) h = (h ^ c) * 1099511628211ull;
  std::string problem;
  // One stage: flashgen's own errors are answers unless they say "internal error".
  auto stage = [&](const std::string& name, auto f) {
    if (!problem.empty()) return;
    auto internal = [&](const std::exception& e) {
      if (std::string(e.what()).find("internal error") != std::string::npos)
        problem = name + ": " + e.what();
    };
    try {
      f();
    } catch (const SourceError& e) {
      internal(e);
    } catch (const ProgramError& e) {
      internal(e);
    } catch (const CallError& e) {
      internal(e);
    } catch (const BackendError& e) {
      internal(e);
    } catch (const std::exception& e) {
      problem = name + ": an exception that is not flashgen's: " + e.what();
    }
  };
  for (const Program& p : programs) {
    Extents ext, heads;
    for (size_t d = 0; d < p.dims.size(); ++d) {
      ext[p.dims[d]] = 1 + static_cast<int64_t>((h >> (2 * (d % 32))) & 3);
      heads[p.dims[d]] = int64_t{16} << ((h >> (2 * ((d + 7) % 32))) & 3);
    }
    const std::string of = " of program " + p.name;
    stage("reference" + of, [&] { evaluate_reference(p, random_inputs(p, ext, h)); });
    for (Target t : {Target::cpu, Target::cuda_sm80, Target::cuda_sm90}) {
      CompileOptions o;
      o.target = t;
      if (t != Target::cpu) o.sizes = heads;  // (only the head dims specialize a kernel)
      const std::string on = of + " for " + target_name(t);
      stage("compile_to_target" + on, [&] {
        Compiled c = compile_to_target(p, o);
        for (const LoweredKernel& k : c.lowered.kernels)
          if (k.why.find("internal error") != std::string::npos && problem.empty())
            problem = "lowering" + on + ": " + k.why;
      });
      stage("explain" + on, [&] { (void)explain(p, o); });
      stage("explain_json" + on, [&] { (void)explain_json(p, o); });
    }
  }
  return problem;
}

}  // namespace flashgen::fuzz
