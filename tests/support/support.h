// Shared test helpers: temporary folders, running a program and capturing its output and exit
// status, random host tensors, and comparisons. Generic on purpose: any test may use them.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "flashgen/ir.h"
#include "flashgen/ref.h"
#include "flashgen/tensor.h"

namespace flashgen::testing {

// A fresh folder under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// What a finished process did.
struct ProcessResult {
  int exit_code = -1;  // the exit status; 128 + signal number if a signal ended it
  std::string out;     // everything written to stdout
  std::string err;     // everything written to stderr
};

// Runs argv[0] (a path) with the given arguments, in `cwd` if not empty, with stdin from
// /dev/null, and waits for it. Kills it after `timeout_s` seconds (exit_code 128 + SIGKILL).
ProcessResult run_process(const std::vector<std::string>& argv, const std::string& cwd = "",
                          int timeout_s = 300);

// The `flashgen` binary built beside the tests (only in binaries that define FLASHGEN_BIN).
#ifdef FLASHGEN_BIN
inline std::string flashgen_bin() { return FLASHGEN_BIN; }
inline ProcessResult run_flashgen(std::vector<std::string> args, const std::string& cwd = "") {
  args.insert(args.begin(), flashgen_bin());
  return run_process(args, cwd);
}
#endif

// The example programs (examples/NAME.attn), every one, in a fixed order.
const std::vector<std::string>& example_names();
// examples/NAME.attn parsed (its first program); with `f32`, its bf16 types read as f32.
Program example_program(const std::string& name, bool f32 = false);
// The same for a file of the source tree (source_program("bench/programs/four_acc.attn")) and
// for source text (its first program).
Program source_program(const std::string& relative, bool f32 = false);
Program parse_typed(std::string text, const std::string& path, bool f32 = false);

// Extents for an example at the given row, key and head sizes: m, n, d, e as given; dims that
// only gathers reach (document ids' t) cover m and n; every other dim is `batch`.
Extents example_extents(const Program& p, int64_t m, int64_t n, int64_t d, int64_t e,
                        int64_t batch = 2);

// Key tiles of a kernel counted on the host from a mask predicate over (row, key) (true: kept),
// for `grid_points` grid points that share the mask, M rows in tiles of `row_tile` and N keys in
// tiles of `key_tile`: a tile is skipped when no element is kept, full when every element is
// (and, with `full_needs_whole_tile`, the tile is not cut short by N), else computed masked.
struct HostTileCounts {
  int64_t computed = 0, skipped = 0, full = 0;
};
HostTileCounts host_tile_counts(const std::function<bool(int64_t, int64_t)>& kept,
                                int64_t grid_points, int64_t M, int64_t N, int64_t row_tile,
                                int64_t key_tile, bool full_needs_whole_tile);
// The same for the mask `n < len[b] and m < len[b]`, summed over the batch entries `lens`, each
// with `grid_points` points of the other grid dims.
HostTileCounts length_mask_tile_counts(const std::vector<int64_t>& lens, int64_t grid_points,
                                       int64_t M, int64_t N, int64_t row_tile, int64_t key_tile,
                                       bool full_needs_whole_tile);

// Examples with a tile mask, each with the mask written out independently of the compiler:
// kept(m, n, doc) for rows m and keys n (`doc`: the document ids, for the document example).
struct ExampleMask {
  std::string example;
  std::function<bool(int64_t, int64_t, const Tensor&)> kept;
};
const std::vector<ExampleMask>& example_masks();
// Index masks through arithmetic the interval rules bound (codegen/interval_code.cpp): the mask
// text (over m and n), the same mask written out independently, and whether the rules decide
// every tile exactly (else soundly: a quotient by 48, a modulo with several quotients a tile,
// products that overflow f32).
struct IndexMask {
  std::string mask;
  std::function<bool(int64_t, int64_t)> kept;
  bool exact;
};
const std::vector<IndexMask>& arithmetic_index_masks();
// program t(q: T[h, m, d], k: T[h, n, d], v: T[h, n, e]): softmax attention under `mask`.
Program index_mask_program(const IndexMask& c, const std::string& type);
// Sorted, consecutive document ids with ragged lengths (tiles straddle document edges), each
// length times `scale`.
Tensor document_ids(int64_t t, int64_t scale = 1);

// A file of the source tree, e.g. source_path("examples/causal.attn").
std::string source_path(const std::string& relative);

std::string read_text_file(const std::string& path);
void write_text_file(const std::string& path, const std::string& text);
bool file_exists(const std::string& path);
// The names of the entries of a folder (not "." or ".."), sorted.
std::vector<std::string> list_dir(const std::string& path);

// Random tensors, contiguous, of any dtype. Floats are N(0, scale^2) rounded to the dtype;
// integers are uniform in [lo, hi); bools are true with probability p_true.
Tensor random_float_tensor(DType t, const std::vector<int64_t>& shape, std::mt19937_64& rng,
                           double scale = 1.0);
Tensor random_int_tensor(DType t, const std::vector<int64_t>& shape, int64_t lo, int64_t hi,
                         std::mt19937_64& rng);
Tensor random_bool_tensor(const std::vector<int64_t>& shape, double p_true, std::mt19937_64& rng);

// The largest |x| over the finite elements (0 if none).
double max_abs(const Tensor& t);
// Compares two tensors of the same shape element by element: non-finite values must be equal
// (same infinity, or both NaN); finite ones may differ by at most `tol`. Returns "" if they
// agree, else a description of the first and the worst disagreement.
std::string compare_tensors(const Tensor& got, const Tensor& want, double tol);

// ---- masks over data (the tile classifiers bound gathers by the data a tile reads) ----
// `docs`: where(doc[m] == doc[n] and w[n] > 0, q.k / sqrt(d), -inf) over [h, m, n], q/k/v of
// type `qkv`, and its ids and weights for case 0 (ragged sorted documents around the tile sizes,
// NaN and negative weights), 1 (unsorted ids) or 2 (sorted, every weight > 0: whole tiles run
// unmasked).
Program data_mask_program(DType qkv);
void set_data_mask_inputs(TensorMap& in, int64_t len, int which);
// Masks over one gathered `doc: T[t]` whose data sits at the edges of exactness (i64 above 2^53,
// i32 wrap, rounding casts, NaN through maximum, inf - inf, clamp with lo > hi), each with its
// data; `hard_mask_program` applies one over [m, n] with q/k/v of type `qkv`.
struct HardMask {
  const char* mask;
  DType type;
  double (*value)(int64_t i);
};
const std::vector<HardMask>& hard_masks();
Program hard_mask_program(const HardMask& h, DType qkv);
Tensor hard_mask_data(const HardMask& h, int64_t len);

// ---- the element path (f32 arithmetic) against the reference ----
// Each output of `got` within a tolerance of `want` (1e-4 for f32 and wider, 1e-3 for f16,
// 8e-3 for bf16: of the least precise among the output's dtype and the float parameters'),
// relative to the output's largest magnitude: "" or the first difference, naming the output.
std::string element_mismatch(const Program& p, const TensorMap& got, const TensorMap& want);
// Runs `check(program, inputs, what)` on the random programs of the CPU property test's
// generator (seed 20261130 and `count` programs unless FLASHGEN_PROPERTY_SEED / _COUNT say
// otherwise; printed under `label`), each inside a trace naming its seed; stops at the first
// fatal failure. With chunks > 1, only chunk `chunk` of the programs (a contiguous range of
// indices), so that one draw can run as several tests in parallel shards.
void for_each_random_program(
    const char* label, int count,
    const std::function<void(const Program&, const TensorMap&, int index)>& check,
    int chunk = 0, int chunks = 1);

}  // namespace flashgen::testing
