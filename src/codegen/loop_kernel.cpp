// The loop-nest printer (see loop_kernel.h).
#include "codegen/loop_kernel.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "codegen/element_code.h"
#include "codegen/interval_code.h"
#include "codegen/target.h"
#include "flashgen/error.h"
#include "passes/passes.h"

namespace flashgen {

namespace {

// The expression that stores element value `e` in a buffer of dtype `t` (CUDA outputs): the
// declared encoding, rounded once to nearest even (fg_enc, the CUDA element prelude).
std::string store_element(DType t, const std::string& e) {
  switch (t) {
    case DType::f32: return "(float)(" + e + ")";
    case DType::f64: return "(double)(" + e + ")";
    case DType::bf16: return "fg_bf16_bits(" + e + ")";
    case DType::f16: return "(uint16_t)fg_enc(" + e + ", 5, 10, 15, true)";
    case DType::f8e4m3: return "(uint8_t)fg_enc(" + e + ", 4, 3, 7, false)";
    case DType::f8e5m2: return "(uint8_t)fg_enc(" + e + ", 5, 2, 15, true)";
    case DType::i32: return "(int)(" + e + ")";
    case DType::i64: return "(int64_t)(" + e + ")";
    case DType::boolean: return "(uint8_t)((" + e + ") ? 1 : 0)";
  }
  return e;
}

// Head sizes whose CPU kernels get compile-time head extents (every eliminated dim equal to
// it): the contraction and output-update loops then have constant trip counts. Each costs one
// more instance of every streaming kernel at compile time (tests at odd sizes never use it),
// so only the commonest size.
constexpr int kHeadSizes[] = {64};

class KernelWriter {
 public:
  KernelWriter(const Plan& plan, const PlanKernel& k, LoopSkeleton s, const ElementLaunch* e,
               const std::vector<DType>* storage)
      : plan_(plan), p_(plan.program), k_(k), s_(s), e_(e), storage_(storage),
        T_(target_table(s == LoopSkeleton::cpu ? Target::cpu : Target::cuda_sm80)),
        em_(plan, k, T_) {
    if (gpu() && (!e_ || !storage_ || storage_->size() != plan.buffers.size()))
      throw BackendError("internal error: a CUDA element kernel needs its launch and the "
                         "storage of every buffer");
  }

  std::string write() {
    const std::string RT = std::to_string(k_.row_tile), NT = std::to_string(k_.red_tile);
    const std::vector<ElementArray> arrays = gpu() ? e_->arrays : element_arrays(plan_, k_);
    for (const ElementArray& a : arrays)
      if (!a.old_max) layouts_[a.node] = a.layout;  // O<m> arrays share A<m>'s order
    // CPU: head dims (eliminated, held whole) are compile-time constants in the instances of
    // common sizes (see kHeadSizes) and runtime in the generic instance (FG_HEAD = 0); long
    // dims are always runtime. CUDA element kernels take every extent at run time.
    const bool special = !gpu() && k_.red_dim >= 0 && !k_.elim.empty();
    const std::string sig =
        "(void* const* bufs, const int64_t* strides, const int64_t* ext, int64_t* err)";
    if (gpu()) {
      os_ << T_.kernel_qualifier << " void __launch_bounds__(" << e_->threads << ") " << k_.name
          << "(const " << k_.name << "_params P) {\n"
          << "  const void* const* bufs = P.buf; const int64_t* strides = P.st;\n"
          << "  const int64_t* ext = P.ext; int64_t* err = P.err;\n";
    } else if (special) {
      os_ << "template <int64_t FG_HEAD>\nstatic void " << k_.name << "_impl" << sig << " {\n";
    } else {
      os_ << T_.kernel_qualifier << " void " << k_.name << sig << " {\n";
    }
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
      const std::string ty = in ? storage_ctype(B.type) : held_ctype(static_cast<int>(b));
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
    for (const Accumulator& a : k_.accs)
      for (int m : a.rescale_by) olds_.insert(m);
    if (gpu()) {
      // The block's workspace: shared memory, or its slice of the device scratch. A point per
      // thread keeps arrays of one element in registers and the others element-major there
      // (element i of this thread at i * threads + threadIdx.x); a block per point has every
      // array there, then the reduction slots.
      bool workspace = !e_->thread_per_point || lanes();
      for (const ElementArray& a : e_->arrays) workspace = workspace || !a.dims.empty();
      if (workspace)
        os_ << "  extern __shared__ __align__(16) char fg_smem[];\n"
            << "  char* const fg_ws = P.use_smem ? fg_smem : P.scratch + (int64_t)blockIdx.x * "
               "P.ws;\n";
      for (size_t i = 0; i < e_->arrays.size(); ++i) {
        const ElementArray& a = e_->arrays[i];
        const std::string name = (a.old_max ? "O" : "A") + std::to_string(a.node);
        if (e_->thread_per_point && !lanes() && a.dims.empty())
          os_ << "  " << a.ctype << " " << name << "[1];\n";
        else
          os_ << "  " << a.ctype << "* const " << name << " = (" << a.ctype
              << "*)(fg_ws + P.off[" << i << "]);\n";
      }
      if (lanes()) {
        // fg_L lanes a point (the host's choice; 1 where the block has one thread, as in the
        // host's emulation), fg_P points a block; slot fg_q, lane fg_l. Every thread runs every
        // block-wide iteration (the barriers); a slot past the last point computes the last
        // point again and stores nothing.
        os_ << "  const int fg_L = (int)P.off[" << e_->arrays.size() + 1
            << "] < (int)blockDim.x ? (int)P.off[" << e_->arrays.size() + 1
            << "] : (int)blockDim.x;\n"
            << "  const int fg_P = (int)blockDim.x / fg_L;\n"
            << "  const int fg_q = (int)threadIdx.x % fg_P, fg_l = (int)threadIdx.x / fg_P;\n"
            << "  for (int64_t fg_t0 = (int64_t)blockIdx.x * fg_P; fg_t0 < total; "
               "fg_t0 += (int64_t)gridDim.x * fg_P) {\n"
            << "      const bool fg_live = fg_t0 + fg_q < total;\n"
            << "      const int64_t t = fg_live ? fg_t0 + fg_q : total - 1;\n";
      } else if (e_->thread_per_point) {
        os_ << "  for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; "
               "t += (int64_t)gridDim.x * blockDim.x) {\n";
      }
      else
        os_ << "  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {\n";
    } else {
      os_ << "#pragma omp parallel\n  {\n";
      for (const ElementArray& a : arrays) {
        std::string size = "1";
        for (int d : a.dims) size += " * " + local_extent(d);
        os_ << "    std::unique_ptr<" << a.ctype << "[]> " << (a.old_max ? "O" : "A") << a.node
            << "(new " << a.ctype << "[(size_t)(" << size << ")]);\n";
      }
      os_ << "#pragma omp for schedule(dynamic, 1)\n";
      os_ << "    for (int64_t t = 0; t < total; ++t) {\n";
    }
    os_ << "      int64_t rem = t; (void)rem;\n";
    for (auto it = k_.grid.rbegin(); it != k_.grid.rend(); ++it) {
      const std::string& nm = p_.dims[*it];
      if (*it == k_.row_dim) {
        os_ << "      const int64_t r0 = (rem % " << grid_extent(*it) << ") * " << RT
            << "; rem /= " << grid_extent(*it) << ";\n";
        os_ << "      const int64_t rows = " << min_of(RT, "n_" + nm + " - r0")
            << "; (void)rows;\n";
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
      os_ << ind_ << "const int64_t cols = " << min_of(NT, "n_" + R + " - t0") << ";\n";
      if (k_.tiles.mask >= 0 && k_.tiles.skip_empty) {
        // Every thread of a block classifies the tile alike, so the branches stay uniform.
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
    if (gpu()) os_ << "  }\n}\n\n";
    else os_ << "    }\n  }\n}\n\n";
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
  const LoopSkeleton s_;
  const ElementLaunch* e_;
  const std::vector<DType>* storage_;
  const TargetTable& T_;
  ElementEmitter em_;
  std::ostringstream os_;
  std::string ind_;
  std::set<int> olds_;
  std::map<int, std::vector<int>> layouts_;  // node -> its local array's storage order

  bool gpu() const { return s_ == LoopSkeleton::cuda_block; }
  bool per_thread() const { return gpu() && e_->thread_per_point; }
  // A point's lanes (ElementLaunch::lane_dims): fg_L threads a point, fg_P points a block.
  bool lanes() const { return per_thread() && !e_->lane_dims.empty(); }
  static std::string min_of(const std::string& a, const std::string& b) {
    return "((" + a + ") < (" + b + ") ? (int64_t)(" + a + ") : (int64_t)(" + b + "))";
  }
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
  std::string offset(const std::vector<int>& local_dims) const {
    std::string s = "0";
    for (int d : local_dims) s = "(" + s + ") * " + local_extent(d) + " + i_" + p_.dims[d];
    return s;
  }
  // The order of a value's local array (ElementArray::layout: the lowering's choice).
  const std::vector<int>& layout(int node) const { return layouts_.at(node); }
  // The element of array `name` (A<n> or O<n>) at `offset` in storage order `dims`: a point per
  // thread interleaves the threads' elements (ElementLaunch::thread_per_point).
  std::string element(const std::string& name, const std::vector<int>& dims) const {
    const std::string off = offset(dims);
    if (lanes()) return name + "[(" + off + ") * fg_P + fg_q]";
    if (per_thread() && !dims.empty())
      return name + "[(" + off + ") * " + std::to_string(e_->threads) + " + threadIdx.x]";
    return name + "[" + off + "]";
  }
  std::string arr(int node) const { return element("A" + std::to_string(node), layout(node)); }
  std::string index_of(int d) const {
    const std::string& nm = p_.dims[d];
    if (d == k_.row_dim) return "(r0 + i_" + nm + ")";
    if (d == k_.red_dim) return "(t0 + i_" + nm + ")";
    if (dimset_contains(k_.elim, d)) return "i_" + nm;
    for (int g : k_.grid)
      if (g == d) return "g_" + nm;
    throw BackendError("internal error: dim " + nm + " has no index in kernel " + k_.name);
  }
  std::string buffer_offset(int b) const {
    const PlanBuffer& B = plan_.buffers[b];
    std::string off = "0";
    for (size_t i = 0; i < B.dims.size(); ++i)
      off += " + " + index_of(B.dims[i]) + " * s" + std::to_string(b) + "_" + std::to_string(i);
    return off;
  }
  ElementContext context(int assume_true) const {
    ElementContext c;
    c.assume_true = assume_true;
    c.index = [this](int d) { return index_of(d); };
    c.extent = [this](int d) { return "n_" + p_.dims[d]; };
    c.local = [this](int node) { return arr(node); };
    c.param = [this](int param, const std::vector<std::string>& idx) {
      const PlanBuffer& B = plan_.buffers[param];  // inputs come first, in parameter order
      std::string off = "0";
      for (size_t i = 0; i < idx.size(); ++i)
        off += " + " + idx[i] + " * s" + std::to_string(param) + "_" + std::to_string(i);
      return load_element(B.type, "B" + std::to_string(param) + "[" + off + "]");
    };
    c.gather = [](int, int param, const std::vector<std::string>& idx) {
      std::string args;
      for (const auto& e : idx) args += ", " + e;
      return "G" + std::to_string(param) + "(err" + args + ")";
    };
    c.load = [this](int b, int) {
      return "((" + em_.ctype(plan_.buffers[b].type) + ")B" + std::to_string(b) + "[" +
             buffer_offset(b) + "])";
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
  // The elements of a local array: nested loops on the CPU (the innermost an omp simd loop
  // when `simd`); on CUDA one loop over the flattened elements, strided by the block's
  // threads. close_elements ends it (CUDA: with a barrier, the array is read next).
  void open_elements(const std::vector<int>& dims, bool simd) {
    if (!gpu()) {
      if (!simd || dims.empty()) return open_loops(dims);
      open_loops(std::vector<int>(dims.begin(), dims.end() - 1));
      os_ << ind_ << "#pragma omp simd\n";
      return open_loops({dims.back()});
    }
    std::string count = "(int64_t)1";
    for (int d : dims) count += " * " + loop_bound(d);
    if (lanes())  // (a point's elements, by its lanes in turn)
      os_ << ind_ << "for (int64_t fg_e = fg_l; fg_e < " << count << "; fg_e += fg_L) {\n";
    else if (per_thread())  // (a point's elements, by its one thread)
      os_ << ind_ << "for (int64_t fg_e = 0; fg_e < " << count << "; ++fg_e) {\n";
    else
      os_ << ind_ << "for (int64_t fg_e = threadIdx.x; fg_e < " << count
          << "; fg_e += blockDim.x) {\n";
    ind_ += "  ";
    decode("fg_e", dims);
  }
  // The index i_<dim> of each of `dims` from the flat index `flat` (the last dim fastest).
  void decode(const std::string& flat, const std::vector<int>& dims) {
    if (!dims.empty()) os_ << ind_ << "int64_t fg_r = " << flat << ";\n";
    for (size_t i = dims.size(); i-- > 0;) {
      const std::string& nm = p_.dims[dims[i]];
      if (i == 0) os_ << ind_ << "const int64_t i_" << nm << " = fg_r;\n";
      else
        os_ << ind_ << "const int64_t i_" << nm << " = fg_r % " << loop_bound(dims[i])
            << "; fg_r /= " << loop_bound(dims[i]) << ";\n";
    }
  }
  void close_elements(size_t dims) {
    if (!gpu()) return close_loops(dims);
    close_loops(1);
    if (!per_thread() || lanes()) os_ << ind_ << "__syncthreads();\n";
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
  // CPU: whether a reduction into `v` runs with its last local dim innermost (vectorized,
  // unit stride in the destination) and the reduce loops outside it. Each element still
  // combines its terms in the same order as the scalar form, so results are bit-identical.
  bool interchange(const PlanValue& v) const {
    return !gpu() && !v.local_dims.empty() && v.local_dims.back() != k_.row_dim &&
           layout(v.node).back() == v.local_dims.back();
  }
  // Emits `dst = combine(dst, x)` over the reduce dims of `n`, for every local element, with
  // `first` run per element before the terms (init or rescale).
  // `hoist`, when not empty, is a factor of `first` (= dst * hoist) that depends only on the
  // outer local dims.
  void reduce_into(const PlanValue& v, const Node& n, Op op, const std::string& first,
                   const ElementContext& c, const std::string& hoist = "") {
    std::string ty = em_.ctype(n.type);
    std::string x = "((" + ty + ")" + em_.value(n.args[0], c) + ")";
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
    if (gpu() && (!per_thread() || lanes()) && v.local_dims.empty() && !n.reduce.empty()) {
      // One element reduced over whole dims (a norm over heads and value columns; a lanes
      // kernel's mean over rows): the threads of its point (the block, or the point's lanes)
      // take its terms in turn, then combine their partials in a tree in the block's reduction
      // slots (ElementLaunch: after the arrays; a lanes kernel's partial of lane l, slot q at
      // l * fg_P + q). The order of a float sum changes, as any tiled kernel's does; max, min
      // and integer sums are exact.
      const bool ln = lanes();
      const std::string lane = ln ? "fg_l" : "threadIdx.x", L = ln ? "fg_L" : "blockDim.x";
      auto slot = [ln](const std::string& i) { return ln ? "(" + i + ") * fg_P + fg_q" : i; };
      std::string count = "(int64_t)1";
      for (int d : n.reduce) count += " * " + loop_bound(d);
      const std::string red = "((" + ty + "*)(fg_ws + P.off[" +
                              std::to_string(e_->arrays.size()) + "]))";
      os_ << ind_ << ty << " fg_p = " << init_of(op, n.type) << ";\n";
      os_ << ind_ << "for (int64_t fg_i = " << lane << "; fg_i < " << count << "; fg_i += " << L
          << ") {\n";
      ind_ += "  ";
      decode("fg_i", n.reduce);
      os_ << ind_ << "fg_p = " << combine(op, "fg_p", x) << ";\n";
      close_loops(1);
      const std::string mine = red + "[" + slot(lane) + "]";
      os_ << ind_ << mine << " = fg_p;\n" << ind_ << "__syncthreads();\n";
      os_ << ind_ << "for (int fg_s = (int)" << L << " / 2; fg_s > 0; fg_s /= 2) {\n"
          << ind_ << "  if ((int)" << lane << " < fg_s) " << mine << " = "
          << combine(op, mine, red + "[" + slot(lane + " + fg_s") + "]") << ";\n"
          << ind_ << "  __syncthreads();\n" << ind_ << "}\n";
      os_ << ind_ << "if (" << lane << " == 0) " << dst << " = "
          << combine(op, first, red + "[" + slot("0") + "]") << ";\n"
          << ind_ << "__syncthreads();\n";
      return;
    }
    open_elements(v.local_dims, false);
    os_ << ind_ << ty << " acc = " << first << ";\n";
    open_loops(n.reduce);
    os_ << ind_ << "acc = " << combine(op, "acc", x) << ";\n";
    close_loops(n.reduce.size());
    os_ << ind_ << dst << " = acc;\n";
    close_elements(v.local_dims.size());
  }
  // Computes a non-inlined value into its local array.
  bool stored_direct(int node) const {
    return gpu() && std::find(e_->stored_direct.begin(), e_->stored_direct.end(), node) !=
                        e_->stored_direct.end();
  }
  void compute_value(const PlanValue& v, int assume_true) {
    if (stored_direct(v.node)) return;  // (its store computes it: store())
    const Node& n = p_.nodes[v.node];
    ElementContext c = context(assume_true);
    os_ << ind_ << "{\n";
    ind_ += "  ";
    if (is_reduction(n.op)) {
      reduce_into(v, n, n.op, init_of(n.op, n.type), c);
    } else {
      // Element-wise: independent elements (the CPU's innermost loop is a simd loop).
      open_elements(v.local_dims, true);
      os_ << ind_ << arr(v.node) << " = " << em_.compute(v.node, c) << ";\n";
      close_elements(v.local_dims.size());
    }
    close_loops(1);
  }
  void init_acc(const Accumulator& a) {
    const PlanValue& v = *k_.value(a.node);
    const Node& n = p_.nodes[a.node];
    open_elements(v.local_dims, false);
    os_ << ind_ << arr(a.node) << " = " << init_of(a.op, n.type) << ";\n";
    close_elements(v.local_dims.size());
  }
  void update_acc(const Accumulator& a, int assume_true) {
    const PlanValue& v = *k_.value(a.node);
    const Node& n = p_.nodes[a.node];
    ElementContext c = context(assume_true);
    std::string first = arr(a.node), hoist;
    bool invariant = !v.local_dims.empty();
    for (int m : a.rescale_by) {
      std::string r = "fg_rescale(" + element("O" + std::to_string(m), layout(m)) + ", " +
                      arr(m) + ")";
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
      open_elements(v.local_dims, false);
      os_ << ind_ << element("O" + std::to_string(m), layout(m)) << " = " << arr(m) << ";\n";
      close_elements(v.local_dims.size());
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
  // The C type outputs and intermediates are held in: on CUDA, the device storage lowering
  // chose (outputs in their dtype); on the CPU, wide_storage (run_cpu rounds the outputs).
  std::string held_ctype(int b) const {
    return gpu() ? storage_ctype((*storage_)[b]) : wide_storage(plan_.buffers[b].type);
  }
  void store(int b) {
    const PlanBuffer& B = plan_.buffers[b];
    const PlanValue& v = *k_.value(B.node);
    ElementContext c = context(-1);
    open_elements(v.local_dims, false);
    const std::string e =
        stored_direct(B.node) ? em_.compute(B.node, c) : em_.value(B.node, c);
    const bool declared = gpu() && B.kind == PlanBuffer::Output;
    os_ << ind_ << (lanes() ? "if (fg_live) " : "") << "B" << b << "[" << buffer_offset(b) << "] = "
        << (declared ? store_element(B.type, e) : "(" + held_ctype(b) + ")(" + e + ")")
        << ";\n";
    close_elements(v.local_dims.size());
  }
  // The profile build (FG_COUNT_TILES): count this key tile by its class (0 skipped, 1 masked,
  // 2 full; full counts as unmasked only when the kernel runs full tiles without mask code).
  void emit_tile_count(const std::string& cls, bool unmasked_full) {
    os_ << "#ifdef FG_COUNT_TILES\n"
        << ind_ << "fg_count_tile(err, " << cls << ", " << (unmasked_full ? 1 : 0) << ", "
        << (per_thread() ? 1 : 0) << ");\n"
        << "#endif\n";
  }
  // Interval arithmetic of the mask over the tile (codegen/interval_code.h): cls 0 = false
  // everywhere (skip), 2 = true everywhere (no mask evaluation), 1 = partial.
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
        case Op::Gather: case Op::Param:
          if (ranged.count(id)) return std::make_pair("r" + std::to_string(id) + "lo",
                                                      "r" + std::to_string(id) + "hi");
          return std::nullopt;
        default: return std::nullopt;
      }
    };
    // Data in the mask (doc[m] == doc[n]; which gathers: TileClasses::data_ranges) is bounded by
    // the min and max of the values the tile reads, as on CUDA (emit_sm80.cpp, data_ranges); a
    // NaN makes it unknown (NaN bounds).
    for (const DataRange& dr : deciding_data_ranges(p_, k_.tiles)) {
      const int id = dr.node, over = dr.over;
      const Node& n = p_.nodes[id];
      const std::string r = "r" + std::to_string(id);
      // the read at the tile's index i over `over`, the grid's index elsewhere, as the element
      // code reads it (a gather's helper, or a parameter's element)
      std::vector<std::string> idx;
      for (int d : read_dims(p_, id)) idx.push_back(d == over ? std::string("i") : index_of(d));
      const ElementContext c = context(-1);
      const std::string v =
          n.op == Op::Gather ? c.gather(id, n.param, idx) : c.param(n.param, idx);
      ranged.insert(id);
      if (over < 0) {
        os_ << data_value_bounds(p_, id, v, ind_, node_text(p_, id) + ", one value over the tile");
        continue;
      }
      const bool row = over == k_.row_dim;
      os_ << ind_ << "double " << r << "lo = INFINITY, " << r << "hi = -INFINITY;  // "
          << node_text(p_, id) << " over the tile\n"
          << ind_ << "for (int64_t i = " << (row ? "r0" : "t0") << "; i < "
          << (row ? "r0 + rows" : "t0 + cols") << "; ++i) {\n"
          << ind_ << "  const double v = (double)" << v << ";\n"
          << ind_ << "  if (v != v) { " << r << "lo = NAN; " << r << "hi = NAN; break; }\n"
          << ind_ << "  " << r << "lo = v < " << r << "lo ? v : " << r << "lo; " << r << "hi = v > "
          << r << "hi ? v : " << r << "hi;\n"
          << ind_ << "}\n";
    }
    os_ << emit_interval_bounds(p_, k_.tiles.mask, t);
    int m = k_.tiles.mask;
    os_ << ind_ << "const int cls = " << interval_hi(m) << " == 0.0 ? 0 : (" << interval_lo(m)
        << " == 1.0 ? 2 : 1);\n";
  }
};

}  // namespace

std::string emit_loop_kernel(const Plan& plan, const PlanKernel& k, LoopSkeleton s,
                             const ElementLaunch* element, const std::vector<DType>* storage) {
  return KernelWriter(plan, k, s, element, storage).write();
}

std::string loop_gather_helpers(const Plan& plan, LoopSkeleton s) {
  const Program& p = plan.program;
  const std::string fn = target_table(s == LoopSkeleton::cpu ? Target::cpu : Target::cuda_sm80)
                             .fn_qualifier;
  std::set<int> gathered;
  for (const Node& n : p.nodes)
    if (n.op == Op::Gather) gathered.insert(n.param);
  std::ostringstream os;
  for (int q : gathered) {
    const Parameter& P = p.params[q];
    const PlanBuffer& B = plan.buffers[q];
    std::string ty = storage_ctype(P.type);
    // A helper per gathered parameter; bounds come from the kernel (ext/strides). An index out
    // of range is reported once (fg_report: {1, param, dim position, index}) and reads 0.
    os << "#undef G" << q << "\n#define G" << q << "(err";
    for (size_t i = 0; i < P.dims.size(); ++i) os << ", a" << i;
    os << ") fg_gather_" << p.name << q << "(err, B" << q;
    for (size_t i = 0; i < P.dims.size(); ++i)
      os << ", n_" << p.dims[P.dims[i]] << ", s" << q << "_" << i << ", (a" << i << ")";
    os << ")\n";
    os << fn << " auto fg_gather_" << p.name << q << "(int64_t* err, const " << ty << "* base";
    for (size_t i = 0; i < P.dims.size(); ++i)
      os << ", int64_t n" << i << ", int64_t s" << i << ", int64_t a" << i;
    os << ") {\n  int64_t off = 0;\n";
    // One unsigned comparison per checked position (extents are never negative).
    const std::vector<bool> checked = gather_checked_positions(p, q);
    for (size_t i = 0; i < P.dims.size(); ++i) {
      if (checked[i])
        os << "  if ((uint64_t)a" << i << " >= (uint64_t)n" << i << ") {\n"
           << "    fg_report(err, 1, " << q << ", " << i << ", a" << i << ");\n"
           << "    return " << load_element(B.type, "(" + ty + ")0") << ";\n  }\n";
      os << "  off += a" << i << " * s" << i << ";\n";
    }
    os << "  return " << load_element(B.type, "base[off]") << ";\n}\n";
  }
  return os.str();
}

ElementParamLayout element_param_layout(const Plan& plan, const ElementLaunch& e) {
  ElementParamLayout l;
  size_t strides = 0;
  for (const PlanBuffer& B : plan.buffers) strides += B.dims.size();
  l.bufs = std::max<size_t>(1, plan.buffers.size());
  l.strides = std::max<size_t>(1, strides);
  l.dims = std::max<size_t>(1, plan.program.dims.size());
  // (then the reduction slots' offset, and a lanes kernel's lanes a point)
  l.arrays = std::max<size_t>(1, e.arrays.size() + (e.thread_per_point ? 0 : 1) +
                                     (e.lane_dims.empty() ? 0 : 2));
  return l;
}

std::string cuda_element_params(const Plan& plan, const PlanKernel& k, const ElementLaunch& e) {
  const ElementParamLayout l = element_param_layout(plan, e);
  std::ostringstream os;
  os << "struct " << k.name << "_params {\n"
     << "  const void* buf[" << l.bufs << "];\n  int64_t st[" << l.strides << "];\n"
     << "  int64_t ext[" << l.dims << "];\n"
     << "  int64_t* err;\n  char* scratch;\n  int64_t ws;\n  int64_t use_smem;\n"
     << "  int64_t off[" << l.arrays << "];\n};\n";
  return os.str();
}

}  // namespace flashgen
