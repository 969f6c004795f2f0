// The CPU kernel skeleton (see cpu.h): per kernel,
//   #pragma omp parallel: per-thread local arrays
//   #pragma omp for over grid points (row dim in tiles)
//     prologue arrays; accumulator init
//     for each tile of the reduction dim: classify (skip empty / unmasked full), body arrays,
//       running max/min update, online values, sums (rescaled by fg_rescale)
//     epilogue arrays; stores.
// Element code comes from ElementEmitter with the CPU TargetTable.
// Test: tests/cpu/cpu_examples_test.cpp, tests/property/random_programs_test.cpp.
#include "codegen/cpu.h"

#include <set>
#include <sstream>

#include "codegen/element_code.h"
#include "codegen/target.h"
#include "flashgen/error.h"

namespace flashgen {

namespace {

std::string storage_type(DType t) {
  switch (t) {
    case DType::f32: return "float";
    case DType::f64: return "double";
    case DType::bf16: case DType::f16: return "uint16_t";
    case DType::f8e4m3: case DType::f8e5m2: case DType::boolean: return "uint8_t";
    case DType::i32: return "int32_t";
    case DType::i64: return "int64_t";
  }
  return "float";
}

std::string load_conv(DType t, const std::string& e) {
  switch (t) {
    case DType::bf16: return "fg_bf16(" + e + ")";
    case DType::f16: return "fg_f16(" + e + ")";
    case DType::f8e4m3: return "fg_f8e4m3(" + e + ")";
    case DType::f8e5m2: return "fg_f8e5m2(" + e + ")";
    case DType::boolean: return "((bool)" + e + ")";
    case DType::i32: return "((int64_t)" + e + ")";
    default: return e;
  }
}

class KernelWriter {
 public:
  KernelWriter(const Plan& plan, const PlanKernel& k)
      : plan_(plan), p_(plan.program), k_(k), T_(target_table(Target::cpu)), em_(plan, k, T_) {}

  std::string write() {
    const std::string RT = std::to_string(k_.row_tile), NT = std::to_string(k_.red_tile);
    os_ << T_.kernel_qualifier << " void " << k_.name
        << "(void* const* bufs, const int64_t* strides, const int64_t* ext, int64_t* err) {\n";
    for (size_t d = 0; d < p_.dims.size(); ++d)
      os_ << "  const int64_t n_" << p_.dims[d] << " = ext[" << d << "]; (void)n_" << p_.dims[d]
          << ";\n";
    int off = 0;
    for (size_t b = 0; b < plan_.buffers.size(); ++b) {
      const PlanBuffer& B = plan_.buffers[b];
      bool in = B.kind == PlanBuffer::Input;
      std::string ty = in ? storage_type(B.type) : "double";
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
        emit_body(-1);
      }
      ind_ = saved;
      os_ << ind_ << "}\n";
    }
    for (const PlanValue& v : k_.values)
      if (v.phase == Phase::Epilogue && !v.inlined && !is_acc(v.node)) compute_value(v, -1);
    for (int b : k_.writes) store(b);
    os_ << "    }\n  }\n}\n\n";
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
      return "A" + std::to_string(node) + "[" + offset(k_.value(node)->local_dims) + "]";
    };
    c.param = [this](int param, const std::vector<std::string>& idx) {
      const PlanBuffer& B = plan_.buffers[param];  // inputs come first, in parameter order
      std::string off = "0";
      for (size_t i = 0; i < idx.size(); ++i)
        off += " + " + idx[i] + " * s" + std::to_string(param) + "_" + std::to_string(i);
      return load_conv(B.type, "B" + std::to_string(param) + "[" + off + "]");
    };
    c.gather = [this](int param, const std::vector<std::string>& idx) {
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
  // Computes a non-inlined value into its local array.
  void compute_value(const PlanValue& v, int assume_true) {
    const Node& n = p_.nodes[v.node];
    ElementContext c = context(assume_true);
    std::string ty = em_.ctype(n.type);
    os_ << ind_ << "{\n";
    ind_ += "  ";
    open_loops(v.local_dims);
    std::string dst = "A" + std::to_string(v.node) + "[" + offset(v.local_dims) + "]";
    if (is_reduction(n.op)) {
      os_ << ind_ << ty << " acc = " << init_of(n.op, n.type) << ";\n";
      open_loops(n.reduce);
      os_ << ind_ << "acc = " << combine(n.op, "acc", "((" + ty + ")" + em_.value(n.args[0], c) + ")")
          << ";\n";
      close_loops(n.reduce.size());
      os_ << ind_ << dst << " = acc;\n";
    } else {
      os_ << ind_ << dst << " = " << em_.compute(v.node, c) << ";\n";
    }
    close_loops(v.local_dims.size() + 1);
  }
  void init_acc(const Accumulator& a) {
    const PlanValue& v = *k_.value(a.node);
    const Node& n = p_.nodes[a.node];
    open_loops(v.local_dims);
    os_ << ind_ << "A" << a.node << "[" << offset(v.local_dims) << "] = " << init_of(a.op, n.type)
        << ";\n";
    close_loops(v.local_dims.size());
  }
  void update_acc(const Accumulator& a, int assume_true) {
    const PlanValue& v = *k_.value(a.node);
    const Node& n = p_.nodes[a.node];
    ElementContext c = context(assume_true);
    std::string ty = em_.ctype(n.type);
    os_ << ind_ << "{\n";
    ind_ += "  ";
    open_loops(v.local_dims);
    std::string dst = "A" + std::to_string(a.node) + "[" + offset(v.local_dims) + "]";
    os_ << ind_ << ty << " acc = " << dst << ";\n";
    for (int m : a.rescale_by) {
      std::string off = offset(k_.value(m)->local_dims);
      os_ << ind_ << "acc *= fg_rescale(O" << m << "[" << off << "], A" << m << "[" << off
          << "]);\n";
    }
    open_loops(n.reduce);
    os_ << ind_ << "acc = " << combine(a.op, "acc", "((" + ty + ")" + em_.value(n.args[0], c) + ")")
        << ";\n";
    close_loops(n.reduce.size());
    os_ << ind_ << dst << " = acc;\n";
    close_loops(v.local_dims.size() + 1);
  }
  void emit_body(int assume_true) {
    for (const PlanValue& v : k_.values)
      if (v.phase == Phase::Body && !v.inlined && !v.online && !is_acc(v.node))
        compute_value(v, assume_true);
    for (int m : olds_) {
      const PlanValue& v = *k_.value(m);
      open_loops(v.local_dims);
      os_ << ind_ << "O" << m << "[" << offset(v.local_dims) << "] = A" << m << "["
          << offset(v.local_dims) << "];\n";
      close_loops(v.local_dims.size());
    }
    for (const Accumulator& a : k_.accs)
      if (a.op != Op::Sum) update_acc(a, assume_true);
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
    os_ << ind_ << "B" << b << "[" << off << "] = (double)(" << em_.value(B.node, c) << ");\n";
    close_loops(v.local_dims.size());
  }
  // Interval arithmetic of the mask over the tile: cls 0 = false everywhere (skip), 2 = true
  // everywhere (no mask evaluation), 1 = partial.
  void emit_tile_class() {
    std::set<int> nodes;
    std::vector<int> stack = {k_.tiles.mask};
    while (!stack.empty()) {
      int id = stack.back();
      stack.pop_back();
      if (!nodes.insert(id).second) continue;
      for (int a : p_.nodes[id].args) stack.push_back(a);
    }
    auto lo = [](int id) { return "l" + std::to_string(id); };
    auto hi = [](int id) { return "h" + std::to_string(id); };
    for (int id : nodes) {
      const Node& n = p_.nodes[id];
      std::string L, H;
      auto a = [&](int i) { return n.args[i]; };
      bool boolean = n.type == DType::boolean;
      std::string unknownL = boolean ? "0.0" : "-INFINITY", unknownH = boolean ? "1.0" : "INFINITY";
      const PlanValue* pv = k_.value(id);
      if (pv && pv->load_buffer >= 0) {
        L = unknownL;
        H = unknownH;
      } else switch (n.op) {
        case Op::Const: L = H = em_.literal(n.value, DType::f64 == n.type ? DType::f32 : n.type);
          if (boolean) L = H = n.value != 0 ? "1.0" : "0.0";
          break;
        case Op::Size: L = H = "(double)n_" + p_.dims[n.dim]; break;
        case Op::Index: {
          int d = n.dim;
          if (d == k_.row_dim) { L = "(double)r0"; H = "(double)(r0 + rows - 1)"; }
          else if (d == k_.red_dim) { L = "(double)t0"; H = "(double)(t0 + cols - 1)"; }
          else if (dimset_contains(k_.elim, d)) { L = "0.0"; H = "(double)(n_" + p_.dims[d] + " - 1)"; }
          else { L = H = "(double)" + index_of(d); }
          break;
        }
        case Op::Add: L = lo(a(0)) + " + " + lo(a(1)); H = hi(a(0)) + " + " + hi(a(1)); break;
        case Op::Sub: L = lo(a(0)) + " - " + hi(a(1)); H = hi(a(0)) + " - " + lo(a(1)); break;
        case Op::Neg: L = "-" + hi(a(0)); H = "-" + lo(a(0)); break;
        case Op::Cast: if (!is_integer(n.type) && !boolean) { L = lo(a(0)); H = hi(a(0)); }
                       else { L = unknownL; H = unknownH; } break;
        case Op::Maximum: L = "std::max(" + lo(a(0)) + ", " + lo(a(1)) + ")";
                          H = "std::max(" + hi(a(0)) + ", " + hi(a(1)) + ")"; break;
        case Op::Minimum: L = "std::min(" + lo(a(0)) + ", " + lo(a(1)) + ")";
                          H = "std::min(" + hi(a(0)) + ", " + hi(a(1)) + ")"; break;
        case Op::Clamp: L = "std::min(std::max(" + lo(a(0)) + ", " + lo(a(1)) + "), " + lo(a(2)) + ")";
                        H = "std::min(std::max(" + hi(a(0)) + ", " + hi(a(1)) + "), " + hi(a(2)) + ")";
                        break;
        case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: {
          // x < y: true if hi(x) < lo(y), false if lo(x) >= hi(y).
          int x = a(0), y = a(1);
          bool strict = n.op == Op::Lt || n.op == Op::Gt;
          if (n.op == Op::Gt || n.op == Op::Ge) std::swap(x, y);
          std::string t = strict ? hi(x) + " < " + lo(y) : hi(x) + " <= " + lo(y);
          std::string f = strict ? lo(x) + " >= " + hi(y) : lo(x) + " > " + hi(y);
          L = "((" + t + ") ? 1.0 : 0.0)";
          H = "((" + f + ") ? 0.0 : 1.0)";
          break;
        }
        case Op::Eq: case Op::Ne: {
          std::string t = "(" + lo(a(0)) + " == " + hi(a(0)) + " && " + lo(a(1)) + " == " +
                          hi(a(1)) + " && " + lo(a(0)) + " == " + lo(a(1)) + ")";
          std::string f = "(" + hi(a(0)) + " < " + lo(a(1)) + " || " + hi(a(1)) + " < " +
                          lo(a(0)) + ")";
          if (n.op == Op::Eq) { L = "(" + t + " ? 1.0 : 0.0)"; H = "(" + f + " ? 0.0 : 1.0)"; }
          else { L = "(" + f + " ? 1.0 : 0.0)"; H = "(" + t + " ? 0.0 : 1.0)"; }
          break;
        }
        case Op::And: L = "std::min(" + lo(a(0)) + ", " + lo(a(1)) + ")";
                      H = "std::min(" + hi(a(0)) + ", " + hi(a(1)) + ")"; break;
        case Op::Or: L = "std::max(" + lo(a(0)) + ", " + lo(a(1)) + ")";
                     H = "std::max(" + hi(a(0)) + ", " + hi(a(1)) + ")"; break;
        case Op::Not: L = "1.0 - " + hi(a(0)); H = "1.0 - " + lo(a(0)); break;
        default: L = unknownL; H = unknownH;
      }
      os_ << ind_ << "const double " << lo(id) << " = " << L << ", " << hi(id) << " = " << H
          << "; (void)" << lo(id) << "; (void)" << hi(id) << ";\n";
    }
    int m = k_.tiles.mask;
    os_ << ind_ << "const int cls = " << hi(m) << " == 0.0 ? 0 : (" << lo(m)
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
    std::string ty = storage_type(P.type);
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
         << "    return " << load_conv(B.type, "(" + ty + ")0") << ";\n  }\n"
         << "  off += a" << i << " * s" << i << ";\n";
    }
    os << "  return " << load_conv(B.type, "base[off]") << ";\n}\n";
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

std::string emit_cpu_prelude() { return target_table(Target::cpu).prelude; }

std::string emit_cpu_source(const Plan& plan) {
  return "// Generated by flashgen for program " + plan.program.name + " (target cpu).\n" +
         emit_cpu_prelude() + "\n" + emit_cpu_kernels(plan);
}

}  // namespace flashgen
