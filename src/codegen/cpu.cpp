// The CPU kernel skeleton (see cpu.h): per kernel,
//   #pragma omp parallel: per-thread local arrays
//   #pragma omp for over grid points (row dim in tiles)
//     prologue arrays; accumulator init
//     for each tile of the reduction dim: classify (skip empty / unmasked full), body arrays,
//       running max/min update, online values, sums (rescaled by fg_rescale)
//     epilogue arrays; stores.
// Element code comes from ElementEmitter with the CPU TargetTable (exp as fg_vexpf, below).
// Speed (bench/cpu/NOTES.md): reductions run with their last local dim innermost as an omp
// simd loop (same per-element order, so bit-identical), contracted k tiles are stored [d][n],
// element-wise loops are omp simd, and streaming kernels get compile-time head extents for
// common sizes (a runtime instance covers the rest).
// Test: tests/cpu/cpu_examples_test.cpp, tests/property/random_programs_test.cpp.
#include "codegen/interval_code.h"
#include "codegen/cpu.h"

#include <cctype>
#include <set>
#include <sstream>

#include "codegen/element_code.h"
#include "codegen/target.h"
#include "flashgen/error.h"

namespace flashgen {

namespace {

// Outputs and intermediates the kernels write: int64 for integers (all 64 bits exact), double
// for everything else (run_cpu rounds to the declared dtype).
std::string out_storage(DType t) { return is_integer(t) ? "int64_t" : "double"; }

// CPU-only helpers appended to the shared prelude.
// fg_vexpf: expf without branches or calls, so `omp simd` loops over softmax tiles vectorize
// (glibc's expf is a call). Cephes' range reduction exp(x) = 2^n exp(r), |r| <= ln2/2, with a
// degree-6 polynomial: within 1.02 ulp of exp on normal results (checked on every 5th float);
// exact 0 below -104 (and for -inf), inf above 88.73 (by overflow of the scale), NaN for NaN.
// The scale 2^n is applied in two normal halves, so subnormal results underflow gradually.
// Every select is integer bit masks: with the host's default -ftrapping-math, GCC does not
// if-convert float compares, and a branch keeps the loop scalar.
const char* kCpuPrelude = R"(
static inline float fg_vexpf(float x) {
  int32_t ix; memcpy(&ix, &x, 4);
  const int32_t ax = ix & 0x7fffffff;
  /* all-ones masks, built without branches so the loop stays if-convertible */
  const int32_t nan = -(int32_t)(ax > 0x7f800000);
  const int32_t lo = -(int32_t)(ax > 0x42d00000) & (ix >> 31) & ~nan;  /* x < -104 */
  const int32_t hi = -(int32_t)(ax > 0x42b20000) & ~(ix >> 31) & ~nan;  /* x > 89 */
  int32_t ic = (ix & ~(lo | hi | nan)) | ((int32_t)0xc2d00000 & lo)
               | (0x42b20000 & hi);
  float xc; memcpy(&xc, &ic, 4);
  float n = (xc * 1.44269504088896341f + 12582912.f) - 12582912.f;  /* round to nearest */
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.f;
  int32_t ni = (int32_t)n, n1 = ni >> 1, n2 = ni - n1;
  uint32_t u1 = (uint32_t)(n1 + 127) << 23, u2 = (uint32_t)(n2 + 127) << 23;
  float s1, s2;
  memcpy(&s1, &u1, 4);
  memcpy(&s2, &u2, 4);
  float res = y * s1 * s2;
  int32_t ir; memcpy(&ir, &res, 4);
  ir = (ir & ~(lo | nan)) | (ix & nan);
  memcpy(&res, &ir, 4);
  return res;
}
)";

// The profile build's tile counters (err[4..6]: computed, skipped as empty, computed without
// mask code), added atomically by every thread; `flashgen profile` reads them.
const char* kCpuCountPrelude = R"(
#ifdef FG_COUNT_TILES
static inline void fg_count_tile(int64_t* err, int cls, int unmasked_full) {
  __atomic_fetch_add(&err[cls == 0 ? 5 : 4], (int64_t)1, __ATOMIC_RELAXED);
  if (cls == 2 && unmasked_full) __atomic_fetch_add(&err[6], (int64_t)1, __ATOMIC_RELAXED);
}
#endif
)";

// Element code of a kernel with the CPU's vectorizable exp (see kCpuPrelude).
std::string cpu_math(std::string e) {
  const std::string from = "expf(", to = "fg_vexpf(";
  for (size_t pos = 0; (pos = e.find(from, pos)) != std::string::npos;) {
    unsigned char prev = pos > 0 ? static_cast<unsigned char>(e[pos - 1]) : ' ';
    bool ident = std::isalnum(prev) || prev == '_';
    if (ident) { pos += from.size(); continue; }
    e.replace(pos, from.size(), to);
    pos += to.size();
  }
  return e;
}

// Head sizes whose kernels get compile-time head extents (every eliminated dim equal to it):
// the contraction and output-update loops then have constant trip counts. Each costs one more
// instance of every streaming kernel at compile time (tests at odd sizes never use it), so
// only the commonest size.
constexpr int kHeadSizes[] = {64};

class KernelWriter {
 public:
  KernelWriter(const Plan& plan, const PlanKernel& k)
      : plan_(plan), p_(plan.program), k_(k), T_(target_table(Target::cpu)), em_(plan, k, T_) {}

  std::string write() {
    const std::string RT = std::to_string(k_.row_tile), NT = std::to_string(k_.red_tile);
    find_transposed();
    // Head dims (eliminated, held whole) are compile-time constants in the instances of
    // common sizes (see kHeadSizes) and runtime in the generic instance (FG_HEAD = 0); long
    // dims are always runtime.
    const bool special = k_.red_dim >= 0 && !k_.elim.empty();
    const std::string sig =
        "(void* const* bufs, const int64_t* strides, const int64_t* ext, int64_t* err)";
    if (special) os_ << "template <int64_t FG_HEAD>\nstatic void " << k_.name << "_impl" << sig
                     << " {\n";
    else os_ << T_.kernel_qualifier << " void " << k_.name << sig << " {\n";
    for (size_t d = 0; d < p_.dims.size(); ++d) {
      std::string e = "ext[" + std::to_string(d) + "]";
      if (special && dimset_contains(k_.elim, static_cast<int>(d)))
        e = "(FG_HEAD > 0 ? FG_HEAD : " + e + ")";
      os_ << "  const int64_t n_" << p_.dims[d] << " = " << e << "; (void)n_" << p_.dims[d]
          << ";\n";
    }
    int off = 0;
    for (size_t b = 0; b < plan_.buffers.size(); ++b) {
      const PlanBuffer& B = plan_.buffers[b];
      bool in = B.kind == PlanBuffer::Input;
      std::string ty = in ? storage_ctype(B.type) : out_storage(B.type);
      os_ << "  " << (in ? "const " : "") << ty << "* " << T_.restrict_kw << " B" << b << " = ("
          << (in ? "const " : "") << ty << "*)bufs[" << b << "]; (void)B" << b << ";\n";
      for (size_t i = 0; i < B.dims.size(); ++i)
        os_ << "  const int64_t s" << b << "_" << i << " = strides[" << off++ << "]; (void)s" << b
            << "_" << i << ";\n";
    }
    // Grid: every grid dim a point, the row dim in tiles.
    std::string total = "1";
    for (int d : k_.grid) total += " * " + grid_extent(d);
    os_ << "  const int64_t total = " << total << ";\n";
    os_ << "#pragma omp parallel\n  {\n";
    for (const PlanValue& v : k_.values) {
      if (v.inlined) continue;
      os_ << "    std::unique_ptr<" << em_.ctype(p_.nodes[v.node].type) << "[]> A" << v.node
          << "(new " << em_.ctype(p_.nodes[v.node].type) << "[" << array_size(v) << "]);\n";
    }
    for (const Accumulator& a : k_.accs)
      for (int m : a.rescale_by)
        if (!olds_.count(m)) {
          olds_.insert(m);
          os_ << "    std::unique_ptr<float[]> O" << m << "(new float[" << array_size(*k_.value(m))
              << "]);\n";
        }
    os_ << "#pragma omp for schedule(dynamic, 1)\n";
    os_ << "    for (int64_t t = 0; t < total; ++t) {\n";
    os_ << "      int64_t rem = t; (void)rem;\n";
    for (auto it = k_.grid.rbegin(); it != k_.grid.rend(); ++it) {
      const std::string& nm = p_.dims[*it];
      if (*it == k_.row_dim) {
        os_ << "      const int64_t r0 = (rem % " << grid_extent(*it) << ") * " << RT
            << "; rem /= " << grid_extent(*it) << ";\n";
        os_ << "      const int64_t rows = std::min<int64_t>(" << RT << ", n_" << nm
            << " - r0); (void)rows;\n";
      } else {
        os_ << "      const int64_t g_" << nm << " = rem % n_" << nm << "; rem /= n_" << nm
            << ";\n";
      }
    }
    ind_ = "      ";
    for (const PlanValue& v : k_.values)
      if (v.phase == Phase::Prologue && !v.inlined && !is_acc(v.node)) compute_value(v, -1);
    for (const Accumulator& a : k_.accs) init_acc(a);
    if (k_.red_dim >= 0) {
      const std::string& R = p_.dims[k_.red_dim];
      os_ << ind_ << "for (int64_t t0 = 0; t0 < n_" << R << "; t0 += " << NT << ") {\n";
      std::string saved = ind_;
      ind_ += "  ";
      os_ << ind_ << "const int64_t cols = std::min<int64_t>(" << NT << ", n_" << R << " - t0);\n";
      if (k_.tiles.mask >= 0 && k_.tiles.skip_empty) {
        emit_tile_class();
        emit_tile_count("cls", k_.tiles.unmasked_full);
        os_ << ind_ << "if (cls == 0) continue;\n";
        os_ << ind_ << "if (cls == 2) {\n";
        std::string s2 = ind_;
        ind_ += "  ";
        emit_body(k_.tiles.unmasked_full ? k_.tiles.mask : -1);
        ind_ = s2;
        os_ << ind_ << "} else {\n";
        ind_ += "  ";
        emit_body(-1);
        ind_ = s2;
        os_ << ind_ << "}\n";
      } else {
        // without a mask every tile runs without mask code (full); with one that is not
        // classified, every tile evaluates it
        emit_tile_count(k_.tiles.mask < 0 ? "2" : "1", k_.tiles.mask < 0);
        emit_body(-1);
      }
      ind_ = saved;
      os_ << ind_ << "}\n";
    }
    for (const PlanValue& v : k_.values)
      if (v.phase == Phase::Epilogue && !v.inlined && !is_acc(v.node)) compute_value(v, -1);
    for (int b : k_.writes) store(b);
    os_ << "    }\n  }\n}\n\n";
    if (special) {
      os_ << T_.kernel_qualifier << " void " << k_.name << sig << " {\n";
      for (int h : kHeadSizes) {
        std::string cond;
        for (int d : k_.elim)
          cond += std::string(cond.empty() ? "" : " && ") + "ext[" + std::to_string(d) +
                  "] == " + std::to_string(h);
        os_ << "  if (" << cond << ") return " << k_.name << "_impl<" << h
            << ">(bufs, strides, ext, err);\n";
      }
      os_ << "  " << k_.name << "_impl<0>(bufs, strides, ext, err);\n}\n\n";
    }
    return os_.str();
  }

 private:
  const Plan& plan_;
  const Program& p_;
  const PlanKernel& k_;
  const TargetTable& T_;
  ElementEmitter em_;
  std::ostringstream os_;
  std::string ind_;
  std::set<int> olds_;
  std::set<int> transposed_;  // tile-loaded params stored with the reduction dim innermost

  bool is_acc(int node) const {
    for (const Accumulator& a : k_.accs)
      if (a.node == node) return true;
    return false;
  }
  std::string grid_extent(int d) const {
    const std::string& nm = p_.dims[d];
    if (d == k_.row_dim) {
      std::string RT = std::to_string(k_.row_tile);
      return "((n_" + nm + " + " + RT + " - 1) / " + RT + ")";
    }
    return "n_" + nm;
  }
  // Extent of a local dim in a local array.
  std::string local_extent(int d) const {
    if (d == k_.row_dim) return std::to_string(k_.row_tile);
    if (d == k_.red_dim) return std::to_string(k_.red_tile);
    return "n_" + p_.dims[d];
  }
  std::string loop_bound(int d) const {
    if (d == k_.row_dim) return "rows";
    if (d == k_.red_dim) return "cols";
    return "n_" + p_.dims[d];
  }
  std::string array_size(const PlanValue& v) const {
    std::string s = "1";
    for (int d : v.local_dims) s += " * " + local_extent(d);
    return "(size_t)(" + s + ")";
  }
  std::string offset(const std::vector<int>& local_dims) const {
    std::string s = "0";
    for (int d : local_dims) s = "(" + s + ") * " + local_extent(d) + " + i_" + p_.dims[d];
    return s;
  }
  // The order of a value's local array: its local dims, except that a tile-loaded parameter
  // (k) contracted over its eliminated dims into a value whose innermost dim is the reduction
  // dim keeps the reduction dim innermost (k as [d][n]), so that contraction runs unit-stride
  // over n with the eliminated dims outside.
  std::vector<int> layout(int node) const {
    const PlanValue& v = *k_.value(node);
    if (!transposed_.count(node)) return v.local_dims;
    std::vector<int> out;
    for (int d : v.local_dims)
      if (d != k_.red_dim) out.push_back(d);
    out.push_back(k_.red_dim);
    return out;
  }
  std::string arr(int node) const {
    return "A" + std::to_string(node) + "[" + offset(layout(node)) + "]";
  }
  // Params to store transposed (see layout): operands, through casts, of a Mul summed over
  // eliminated dims only into a value whose last local dim is the reduction dim.
  void find_transposed() {
    if (k_.red_dim < 0) return;
    for (const PlanValue& v : k_.values) {
      const Node& n = p_.nodes[v.node];
      if (v.inlined || n.op != Op::Sum || dimset_contains(n.reduce, k_.red_dim)) continue;
      if (v.local_dims.empty() || v.local_dims.back() != k_.red_dim) continue;
      if (!dimset_subset(n.reduce, k_.elim)) continue;
      const Node& m = p_.nodes[n.args[0]];
      if (m.op != Op::Mul) continue;
      for (int a : m.args) {
        while (p_.nodes[a].op == Op::Cast && k_.value(a) && k_.value(a)->inlined)
          a = p_.nodes[a].args[0];
        const PlanValue* pv = k_.value(a);
        if (!pv || pv->inlined || p_.nodes[a].op != Op::Param || pv->load_buffer >= 0) continue;
        bool has_red = false, has_elim = false;
        for (int d : pv->local_dims) {
          has_red = has_red || d == k_.red_dim;
          has_elim = has_elim || dimset_contains(k_.elim, d);
        }
        if (has_red && has_elim) transposed_.insert(a);
      }
    }
  }
  std::string index_of(int d) const {
    const std::string& nm = p_.dims[d];
    if (d == k_.row_dim) return "(r0 + i_" + nm + ")";
    if (d == k_.red_dim) return "(t0 + i_" + nm + ")";
    if (dimset_contains(k_.elim, d)) return "i_" + nm;
    for (int g : k_.grid)
      if (g == d) return "g_" + nm;
    throw BackendError("internal error: dim " + nm + " has no index in kernel " + k_.name);
  }
  ElementContext context(int assume_true) const {
    ElementContext c;
    c.assume_true = assume_true;
    c.index = [this](int d) { return index_of(d); };
    c.extent = [this](int d) { return "n_" + p_.dims[d]; };
    c.local = [this](int node) {
      return arr(node);
    };
    c.param = [this](int param, const std::vector<std::string>& idx) {
      const PlanBuffer& B = plan_.buffers[param];  // inputs come first, in parameter order
      std::string off = "0";
      for (size_t i = 0; i < idx.size(); ++i)
        off += " + " + idx[i] + " * s" + std::to_string(param) + "_" + std::to_string(i);
      return load_element(B.type, "B" + std::to_string(param) + "[" + off + "]");
    };
    c.gather = [this](int, int param, const std::vector<std::string>& idx) {
      std::string args;
      for (const auto& e : idx) args += ", " + e;
      return "G" + std::to_string(param) + "(err" + args + ")";
    };
    c.load = [this](int b, int node) {
      (void)node;
      const PlanBuffer& B = plan_.buffers[b];
      std::string off = "0";
      for (size_t i = 0; i < B.dims.size(); ++i)
        off += " + " + index_of(B.dims[i]) + " * s" + std::to_string(b) + "_" + std::to_string(i);
      return "((" + em_.ctype(B.type) + ")B" + std::to_string(b) + "[" + off + "])";
    };
    return c;
  }
  void open_loops(const std::vector<int>& dims) {
    for (int d : dims) {
      const std::string& nm = p_.dims[d];
      os_ << ind_ << "for (int64_t i_" << nm << " = 0; i_" << nm << " < " << loop_bound(d)
          << "; ++i_" << nm << ") {\n";
      ind_ += "  ";
    }
  }
  void close_loops(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      ind_.resize(ind_.size() - 2);
      os_ << ind_ << "}\n";
    }
  }
  std::string init_of(Op op, DType t) const {
    bool integer = is_integer(t);
    if (op == Op::Max) return integer ? "INT64_MIN" : "(-INFINITY)";
    if (op == Op::Min) return integer ? "INT64_MAX" : "INFINITY";
    return integer ? "((int64_t)0)" : "0.f";
  }
  std::string combine(Op op, const std::string& a, const std::string& x) const {
    if (op == Op::Max) return "fg_max(" + a + ", " + x + ")";
    if (op == Op::Min) return "fg_min(" + a + ", " + x + ")";
    return a + " + " + x;
  }
  // Whether a reduction into `v` runs with its last local dim innermost (vectorized, unit
  // stride in the destination) and the reduce loops outside it. Each element still combines
  // its terms in the same order as the scalar form, so results are bit-identical.
  bool interchange(const PlanValue& v) const {
    return !v.local_dims.empty() && v.local_dims.back() != k_.row_dim &&
           layout(v.node).back() == v.local_dims.back();
  }
  // Emits `dst = combine(dst, x)` over the reduce dims of `n`, for every local element, with
  // `first` run per element before the terms (init or rescale).
  // `hoist`, when not empty, is a factor of `first` (= dst * hoist) that depends only on the
  // outer local dims.
  void reduce_into(const PlanValue& v, const Node& n, Op op, const std::string& first,
                   const ElementContext& c, const std::string& hoist = "") {
    std::string ty = em_.ctype(n.type);
    std::string x = "((" + ty + ")" + cpu_math(em_.value(n.args[0], c)) + ")";
    std::string dst = arr(v.node);
    if (interchange(v)) {
      std::vector<int> outer(v.local_dims.begin(), v.local_dims.end() - 1);
      std::vector<int> inner = {v.local_dims.back()};
      open_loops(outer);
      std::string f = first;
      if (!hoist.empty()) {  // a row-invariant rescale: one expf per row, not per element
        os_ << ind_ << "const " << ty << " fg_f = " << hoist << ";\n";
        f = "fg_mul0(" + dst + ", fg_f)";
      }
      os_ << ind_ << "#pragma omp simd\n";
      open_loops(inner);
      os_ << ind_ << dst << " = " << f << ";\n";
      close_loops(1);
      open_loops(n.reduce);
      os_ << ind_ << "#pragma omp simd\n";
      open_loops(inner);
      os_ << ind_ << dst << " = " << combine(op, dst, x) << ";\n";
      close_loops(1 + n.reduce.size() + outer.size());
      return;
    }
    open_loops(v.local_dims);
    os_ << ind_ << ty << " acc = " << first << ";\n";
    open_loops(n.reduce);
    os_ << ind_ << "acc = " << combine(op, "acc", x) << ";\n";
    close_loops(n.reduce.size());
    os_ << ind_ << dst << " = acc;\n";
    close_loops(v.local_dims.size());
  }
  // Computes a non-inlined value into its local array.
  void compute_value(const PlanValue& v, int assume_true) {
    const Node& n = p_.nodes[v.node];
    ElementContext c = context(assume_true);
    os_ << ind_ << "{\n";
    ind_ += "  ";
    if (is_reduction(n.op)) {
      reduce_into(v, n, n.op, init_of(n.op, n.type), c);
    } else {
      // Element-wise: independent elements, so the innermost loop is a simd loop.
      std::vector<int> outer = v.local_dims;
      if (!outer.empty()) outer.pop_back();
      open_loops(outer);
      if (!v.local_dims.empty()) {
        os_ << ind_ << "#pragma omp simd\n";
        open_loops({v.local_dims.back()});
      }
      os_ << ind_ << arr(v.node) << " = " << cpu_math(em_.compute(v.node, c)) << ";\n";
      close_loops(v.local_dims.size());
    }
    close_loops(1);
  }
  void init_acc(const Accumulator& a) {
    const PlanValue& v = *k_.value(a.node);
    const Node& n = p_.nodes[a.node];
    open_loops(v.local_dims);
    os_ << ind_ << arr(a.node) << " = " << init_of(a.op, n.type) << ";\n";
    close_loops(v.local_dims.size());
  }
  void update_acc(const Accumulator& a, int assume_true) {
    const PlanValue& v = *k_.value(a.node);
    const Node& n = p_.nodes[a.node];
    ElementContext c = context(assume_true);
    std::string first = arr(a.node), hoist;
    bool invariant = !v.local_dims.empty();
    for (int m : a.rescale_by) {
      std::string off = offset(layout(m));
      std::string r = "fg_rescale(O" + std::to_string(m) + "[" + off + "], A" +
                      std::to_string(m) + "[" + off + "])";
      first = "fg_mul0(" + first + ", " + r + ")";
      hoist = hoist.empty() ? r : "(" + hoist + ") * " + r;
      for (int d : k_.value(m)->local_dims)
        invariant = invariant && d != v.local_dims.back();
    }
    if (!invariant || a.rescale_by.size() != 1) hoist.clear();  // keep the rounding order
    os_ << ind_ << "{\n";
    ind_ += "  ";
    reduce_into(v, n, a.op, first, c, hoist);
    close_loops(1);
  }
  // Non-inlined epilogue values read (directly or through inlined nodes) by online body
  // values, with their epilogue dependencies, when none depends on a sum accumulator (sums
  // are updated after the online values).
  std::set<int> epilogue_reads_of_online() const {
    std::set<int> out;
    std::vector<int> stack;
    for (const PlanValue& v : k_.values)
      if (v.phase == Phase::Body && !v.inlined && v.online && !is_acc(v.node))
        for (int a : p_.nodes[v.node].args) stack.push_back(a);
    std::set<int> seen;
    while (!stack.empty()) {
      int id = stack.back();
      stack.pop_back();
      if (!seen.insert(id).second) continue;
      const PlanValue* pv = k_.value(id);
      if (!pv || pv->load_buffer >= 0 || is_acc(id)) {
        for (const Accumulator& a : k_.accs)
          if (a.node == id && a.op == Op::Sum) return {};
        continue;
      }
      if (!pv->inlined && pv->phase == Phase::Epilogue) out.insert(id);
      if (pv->inlined || pv->phase == Phase::Epilogue)
        for (int a : p_.nodes[id].args) stack.push_back(a);
    }
    return out;
  }
  void emit_body(int assume_true) {
    for (const PlanValue& v : k_.values)
      if (v.phase == Phase::Body && !v.inlined && !v.online && !is_acc(v.node))
        compute_value(v, assume_true);
    for (int m : olds_) {
      const PlanValue& v = *k_.value(m);
      open_loops(v.local_dims);
      os_ << ind_ << "O" << m << "[" << offset(layout(m)) << "] = " << arr(m) << ";\n";
      close_loops(v.local_dims.size());
    }
    for (const Accumulator& a : k_.accs)
      if (a.op != Op::Sum) update_acc(a, assume_true);
    // Epilogue arrays that online values read (e.g. eq(running max, -inf) shared by several
    // safe-max wheres) are refreshed from the running max first; else the body would read
    // them before the epilogue computes them.
    std::set<int> refresh = epilogue_reads_of_online();
    for (const PlanValue& v : k_.values)
      if (refresh.count(v.node)) compute_value(v, -1);
    for (const PlanValue& v : k_.values)
      if (v.phase == Phase::Body && !v.inlined && v.online && !is_acc(v.node))
        compute_value(v, assume_true);
    for (const Accumulator& a : k_.accs)
      if (a.op == Op::Sum) update_acc(a, assume_true);
  }
  void store(int b) {
    const PlanBuffer& B = plan_.buffers[b];
    const PlanValue& v = *k_.value(B.node);
    ElementContext c = context(-1);
    open_loops(v.local_dims);
    std::string off = "0";
    for (size_t i = 0; i < B.dims.size(); ++i)
      off += " + " + index_of(B.dims[i]) + " * s" + std::to_string(b) + "_" + std::to_string(i);
    os_ << ind_ << "B" << b << "[" << off << "] = (" << out_storage(B.type) << ")("
        << cpu_math(em_.value(B.node, c)) << ");\n";
    close_loops(v.local_dims.size());
  }
  // Interval arithmetic of the mask over the tile (codegen/interval_code.h): cls 0 = false everywhere (skip), 2 = true
  // everywhere (no mask evaluation), 1 = partial.
  // The profile build (FG_COUNT_TILES): count this key tile by its class (0 skipped, 1 masked,
  // 2 full; full counts as unmasked only when the kernel runs full tiles without mask code).
  void emit_tile_count(const std::string& cls, bool unmasked_full) {
    os_ << "#ifdef FG_COUNT_TILES\n"
        << ind_ << "fg_count_tile(err, " << cls << ", " << (unmasked_full ? 1 : 0) << ");\n"
        << "#endif\n";
  }

  void emit_tile_class() {
    std::set<int> ranged;  // mask gathers bounded by their data over the tile
    IntervalTarget t;
    t.indent = ind_;
    t.leaf = [&](int id) -> std::optional<std::pair<std::string, std::string>> {
      const Node& n = p_.nodes[id];
      bool boolean = n.type == DType::boolean;
      const PlanValue* pv = k_.value(id);
      if (pv && pv->load_buffer >= 0)  // read from memory: unknown
        return std::make_pair(std::string(boolean ? "0.0" : "NAN"),
                              std::string(boolean ? "1.0" : "NAN"));
      switch (n.op) {
        case Op::Const: {  // the value of the node's type (an f32 constant rounded to f32)
          if (is_float(n.type) && n.type != DType::f32) return std::nullopt;  // unknown
          std::string v = boolean ? (n.value != 0 ? "1.0" : "0.0")
                                  : "(double)" + em_.literal(n.value, n.type);
          return std::make_pair(v, v);
        }
        case Op::Size: return std::make_pair("(double)n_" + p_.dims[n.dim], "(double)n_" + p_.dims[n.dim]);
        case Op::Index: {
          int d = n.dim;
          if (d == k_.row_dim) return std::make_pair(std::string("(double)r0"), std::string("(double)(r0 + rows - 1)"));
          if (d == k_.red_dim) return std::make_pair(std::string("(double)t0"), std::string("(double)(t0 + cols - 1)"));
          if (dimset_contains(k_.elim, d))
            return std::make_pair(std::string("0.0"), "(double)(n_" + p_.dims[d] + " - 1)");
          return std::make_pair("(double)" + index_of(d), "(double)" + index_of(d));
        }
        case Op::Gather:
          if (ranged.count(id)) return std::make_pair("r" + std::to_string(id) + "lo",
                                                      "r" + std::to_string(id) + "hi");
          return std::nullopt;
        default: return std::nullopt;
      }
    };
    // Data in the mask (doc[m] == doc[n]; which gathers: data_range_gathers) is bounded by the
    // min and max of the values the tile reads, as on CUDA (emit_sm80.cpp, data_ranges); a NaN
    // makes it unknown (NaN bounds).
    auto grid = [this](int d) {
      return std::find(k_.grid.begin(), k_.grid.end(), d) != k_.grid.end();
    };
    for (const DataRange& dr : data_range_gathers(p_, k_.tiles.mask, k_.row_dim, k_.red_dim, grid)) {
      const int id = dr.node, over = dr.over;
      const Node& n = p_.nodes[id];
      const bool row = over == k_.row_dim;
      std::string args, r = "r" + std::to_string(id);
      for (int a : n.args) {
        int d = p_.nodes[a].dim;
        args += ", " + (d == over ? std::string("i") : index_of(d));
      }
      os_ << ind_ << "double " << r << "lo = INFINITY, " << r << "hi = -INFINITY;  // "
          << node_text(p_, id) << " over the tile\n"
          << ind_ << "for (int64_t i = " << (row ? "r0" : "t0") << "; i < "
          << (row ? "r0 + rows" : "t0 + cols") << "; ++i) {\n"
          << ind_ << "  const double v = (double)G" << n.param << "(err" << args << ");\n"
          << ind_ << "  if (v != v) { " << r << "lo = NAN; " << r << "hi = NAN; break; }\n"
          << ind_ << "  " << r << "lo = std::min(" << r << "lo, v); " << r << "hi = std::max(" << r
          << "hi, v);\n"
          << ind_ << "}\n";
      ranged.insert(id);
    }
    os_ << emit_interval_bounds(p_, k_.tiles.mask, t);
    int m = k_.tiles.mask;
    os_ << ind_ << "const int cls = " << interval_hi(m) << " == 0.0 ? 0 : (" << interval_lo(m)
        << " == 1.0 ? 2 : 1);\n";
  }
};

std::string gather_helpers(const Plan& plan, const TargetTable& T) {
  const Program& p = plan.program;
  std::set<int> gathered;
  for (const Node& n : p.nodes)
    if (n.op == Op::Gather) gathered.insert(n.param);
  std::ostringstream os;
  (void)T;
  for (int q : gathered) {
    const Parameter& P = p.params[q];
    const PlanBuffer& B = plan.buffers[q];
    std::string ty = storage_ctype(P.type);
    // A macro-free helper per gathered parameter; bounds come from the kernel (ext/strides).
    os << "#undef G" << q << "\n#define G" << q << "(err";
    for (size_t i = 0; i < P.dims.size(); ++i) os << ", a" << i;
    os << ") fg_gather_" << p.name << q << "(err, B" << q;
    for (size_t i = 0; i < P.dims.size(); ++i)
      os << ", n_" << p.dims[P.dims[i]] << ", s" << q << "_" << i << ", (a" << i << ")";
    os << ")\n";
    os << "static inline auto fg_gather_" << p.name << q << "(int64_t* err, const " << ty << "* base";
    for (size_t i = 0; i < P.dims.size(); ++i)
      os << ", int64_t n" << i << ", int64_t s" << i << ", int64_t a" << i;
    os << ") {\n  int64_t off = 0;\n";
    for (size_t i = 0; i < P.dims.size(); ++i) {
      os << "  if (a" << i << " < 0 || a" << i << " >= n" << i << ") {\n"
         << "    int64_t z = 0;\n"
         << "    if (__atomic_compare_exchange_n(&err[0], &z, (int64_t)1, false, __ATOMIC_SEQ_CST,"
            " __ATOMIC_SEQ_CST)) {\n"
         << "      err[1] = " << q << "; err[2] = " << i << "; err[3] = a" << i << ";\n    }\n"
         << "    return " << load_element(B.type, "(" + ty + ")0") << ";\n  }\n"
         << "  off += a" << i << " * s" << i << ";\n";
    }
    os << "  return " << load_element(B.type, "base[off]") << ";\n}\n";
  }
  return os.str();
}

}  // namespace

std::string emit_cpu_kernels(const Plan& plan) {
  const TargetTable& T = target_table(Target::cpu);
  std::ostringstream os;
  os << "// Kernels of program " << plan.program.name << ".\n";
  os << gather_helpers(plan, T) << "\n";
  for (const PlanKernel& k : plan.kernels) os << KernelWriter(plan, k).write();
  return os.str();
}

std::string emit_cpu_prelude() {
  return target_table(Target::cpu).prelude + kCpuPrelude + kCpuCountPrelude;
}

std::string emit_cpu_source(const Plan& plan) {
  return "// Generated by flashgen for program " + plan.program.name + " (target cpu).\n" +
         emit_cpu_prelude() + "\n" + emit_cpu_kernels(plan);
}

}  // namespace flashgen
