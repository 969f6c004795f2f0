// flashgen._core: the C++ library (the one the CLI uses) as a Python extension (nanobind).
//
// Python's flashgen package (python/flashgen/) is the user-facing layer; this module holds
// only what crosses into C++:
//   parse(source, filename, program) -> Program     the frontend, with its diagnostics
//   Program.run(inputs, outputs, backend)           host memory, in place (DLPack, no copies)
//   Program.launch_cuda(inputs, outputs, err, stream, careful)
//                                                   GPU memory, in place, no synchronization
//   Program.raise_error_word(shapes, err)           a GPU call's error word as its CallError
//   CUDA_ERROR_WORDS                                int64 words of launch_cuda's `err`
//   Program.output_shapes / explain / emit / kernel_count / params / outputs
// Errors arrive as flashgen.ProgramError / CallError / BackendError (subclasses of
// flashgen.Error), with what() intact: a ProgramError's `file:line:col`, source line and caret.
// Tests: python/tests/test_kernel.py, python/tests/test_torch_ops.py, python/tests/test_cuda.py.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "flashgen/compile.h"
#include "flashgen/flashgen.h"
#include "runtime/cuda_driver.h"

namespace nb = nanobind;
using namespace flashgen;

namespace {

// A parsed program and the text it came from.
struct PyProgram {
  Program program;
  std::string source, filename;
  std::shared_ptr<CudaLaunchCache> cuda = make_cuda_launch_cache();  // loaded GPU kernels
};

PyObject* g_error = nullptr;
PyObject* g_program_error = nullptr;
PyObject* g_call_error = nullptr;
PyObject* g_backend_error = nullptr;

// DLPack's (code, bits) of an array as a flashgen dtype; CallError naming the tensor otherwise.
DType dlpack_dtype(const std::string& what, nb::dlpack::dtype t) {
  const int code = t.code, bits = t.bits;
  if (t.lanes == 1) {
    if (code == static_cast<int>(nb::dlpack::dtype_code::Float) && bits == 32) return DType::f32;
    if (code == static_cast<int>(nb::dlpack::dtype_code::Float) && bits == 16) return DType::f16;
    if (code == static_cast<int>(nb::dlpack::dtype_code::Bfloat) && bits == 16) return DType::bf16;
    if (code == static_cast<int>(nb::dlpack::dtype_code::Int) && bits == 32) return DType::i32;
    if (code == static_cast<int>(nb::dlpack::dtype_code::Int) && bits == 64) return DType::i64;
    if (code == static_cast<int>(nb::dlpack::dtype_code::Bool) && bits == 8) return DType::boolean;
    // DLPack 1.1's float8 codes: e4m3fn (finite, saturating: flashgen's f8e4m3) and e5m2.
    if (code == 10 && bits == 8) return DType::f8e4m3;
    if (code == 12 && bits == 8) return DType::f8e5m2;
  }
  throw CallError(what + " has a DLPack dtype (code " + std::to_string(code) + ", " +
                  std::to_string(bits) + " bits, " + std::to_string(t.lanes) +
                  " lanes) that flashgen has no type for (f32, f16, bf16, f8e4m3, f8e5m2, i32, "
                  "i64, bool)");
}

// A host array as a Tensor over its own memory (no copy); the view keeps the array alive.
Tensor host_view(const std::string& what, const nb::ndarray<>& a) {
  if (a.device_type() != nb::device::cpu::value)
    throw CallError(what + " is not in host memory (DLPack device type " +
                    std::to_string(a.device_type()) + "); use launch_cuda for GPU memory");
  const DType t = dlpack_dtype(what, a.dtype());
  std::vector<int64_t> shape, strides;
  int64_t last = 0;
  bool empty = false;
  for (size_t i = 0; i < a.ndim(); ++i) {
    shape.push_back(static_cast<int64_t>(a.shape(i)));
    strides.push_back(static_cast<int64_t>(a.stride(i)));
    if (strides.back() < 0)
      throw CallError(what + " has a negative stride along axis " + std::to_string(i) +
                      " (make it contiguous first)");
    if (shape.back() == 0) empty = true;
    else last += (shape.back() - 1) * strides.back();
  }
  const size_t nbytes = empty ? 0 : static_cast<size_t>(last + 1) * dtype_bytes(t);
  auto keep = std::make_shared<nb::ndarray<>>(a);
  return Tensor::borrow(t, shape, strides, a.data(), nbytes,
                        std::shared_ptr<void>(keep, keep.get()));
}

TensorMap host_views(const std::map<std::string, nb::ndarray<>>& m, const char* kind) {
  TensorMap out;
  for (const auto& [name, a] : m) out[name] = host_view(std::string(kind) + " '" + name + "'", a);
  return out;
}

// (dtype, shape, strides, pointer) of a GPU tensor, as Python reads it off torch or CuPy.
using DeviceArg = std::tuple<std::string, std::vector<int64_t>, std::vector<int64_t>, uint64_t>;

DeviceTensorMap device_views(const std::map<std::string, DeviceArg>& m, const char* kind) {
  DeviceTensorMap out;
  for (const auto& [name, a] : m) {
    const auto& [dt, shape, strides, ptr] = a;
    std::optional<DType> t = parse_dtype(dt);
    if (!t) throw CallError(std::string(kind) + " '" + name + "' has dtype '" + dt + "'");
    if (shape.size() != strides.size())
      throw CallError(std::string(kind) + " '" + name + "': shape and strides differ in rank");
    out[name] = DeviceTensor{*t, shape, strides, ptr};
  }
  return out;
}

Extents extents_of(const std::map<std::string, int64_t>& sizes) {
  Extents e;
  for (const auto& [k, v] : sizes) e[k] = v;
  return e;
}

// [(name, dtype, dim names)] of a program's parameters or outputs.
template <class Decl>
std::vector<std::tuple<std::string, std::string, std::vector<std::string>>> signature(
    const Program& p, const std::vector<Decl>& decls) {
  std::vector<std::tuple<std::string, std::string, std::vector<std::string>>> out;
  for (const Decl& x : decls) {
    std::vector<std::string> dims;
    for (int d : x.dims) dims.push_back(p.dims[d]);
    out.emplace_back(x.name, dtype_name(x.type), dims);
  }
  return out;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "flashgen's C++ library (the Python package flashgen wraps it)";
  // Kernels live in flashgen._kernel's registry until the interpreter exits (the custom op
  // finds them by key), so nanobind's exit-time leak report would list every one.
  nb::set_leak_warnings(false);
  g_error = PyErr_NewExceptionWithDoc("flashgen.Error", "Every error flashgen raises.",
                                      PyExc_Exception, nullptr);
  g_program_error = PyErr_NewExceptionWithDoc(
      "flashgen.ProgramError", "The program is invalid (file:line:col, the line and a caret).",
      g_error, nullptr);
  g_call_error = PyErr_NewExceptionWithDoc(
      "flashgen.CallError",
      "The program is valid but the call is not (names the input and the dimension).", g_error,
      nullptr);
  g_backend_error = PyErr_NewExceptionWithDoc(
      "flashgen.BackendError", "A backend could not compile or run (compiler, GPU, memory).",
      g_error, nullptr);
  m.attr("Error") = nb::handle(g_error);
  m.attr("ProgramError") = nb::handle(g_program_error);
  m.attr("CallError") = nb::handle(g_call_error);
  // int64 words of a GPU call's error words (launch_cuda's `err`: zeroed, one per call in flight)
  m.attr("CUDA_ERROR_WORDS") = kCudaErrorWords;
  m.attr("BackendError") = nb::handle(g_backend_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const SourceError& e) {
      PyErr_SetString(g_program_error, e.what());
    } catch (const ProgramError& e) {
      PyErr_SetString(g_program_error, e.what());
    } catch (const CallError& e) {
      PyErr_SetString(g_call_error, e.what());
    } catch (const BackendError& e) {
      PyErr_SetString(g_backend_error, e.what());
    }
  });

  m.def("version", &version);
  m.def("cuda_available", [] { return cuda_available(); },
        "Whether a CUDA GPU and its driver are usable by this process.");

  nb::class_<PyProgram>(m, "Program")
      .def_prop_ro("name", [](const PyProgram& p) { return p.program.name; })
      .def_prop_ro("source", [](const PyProgram& p) { return p.source; })
      .def_prop_ro("filename", [](const PyProgram& p) { return p.filename; })
      .def_prop_ro("dims", [](const PyProgram& p) { return p.program.dims; })
      .def("params", [](const PyProgram& pp) { return signature(pp.program, pp.program.params); },
           "[(name, dtype, dims)] of the parameters, in order")
      .def("outputs", [](const PyProgram& pp) { return signature(pp.program, pp.program.outputs); },
           "[(name, dtype, dims)] of the outputs, in order")
      .def("output_shapes",
           [](const PyProgram& pp, const std::map<std::string, DeviceArg>& shapes,
              const std::map<std::string, int64_t>& extra) {
             return output_shapes(pp.program, device_shape_views(device_views(shapes, "input")),
                                  extents_of(extra));
           },
           nb::arg("inputs"), nb::arg("extra") = std::map<std::string, int64_t>{},
           "The shape of every output for inputs given as {name: (dtype, shape, strides, ptr)}")
      .def("run",
           [](const PyProgram& pp, const std::map<std::string, nb::ndarray<>>& inputs,
              const std::map<std::string, nb::ndarray<>>& outputs, const std::string& backend,
              const std::map<std::string, int64_t>& extra) {
             std::optional<Backend> b = parse_backend(backend);
             if (!b) throw CallError("unknown backend '" + backend + "' (ref, cpu, cuda)");
             TensorMap in = host_views(inputs, "input");
             TensorMap out = host_views(outputs, "output");
             RunOptions opt;
             opt.backend = *b;
             opt.extra_extents = extents_of(extra);
             nb::gil_scoped_release release;
             run_into(pp.program, in, out, opt);
           },
           nb::arg("inputs"), nb::arg("outputs"), nb::arg("backend"),
           nb::arg("extra") = std::map<std::string, int64_t>{},
           "Runs into caller-allocated outputs; every array is host memory crossed by DLPack")
      .def("launch_cuda",
           [](const PyProgram& pp, const std::map<std::string, DeviceArg>& inputs,
              const std::map<std::string, DeviceArg>& outputs, uint64_t err, uint64_t stream,
              bool careful) {
             DeviceTensorMap in = device_views(inputs, "input");
             DeviceTensorMap out = device_views(outputs, "output");
             nb::gil_scoped_release release;
             cuda_launch_device(pp.program, in, out, err, stream, careful, pp.cuda.get());
           },
           nb::arg("inputs"), nb::arg("outputs"), nb::arg("err"), nb::arg("stream"),
           nb::arg("careful") = false,
           "Launches on GPU memory on `stream` without synchronizing (see compile.h)")
      .def("raise_error_word",
           [](const PyProgram& pp, const std::map<std::string, DeviceArg>& shapes,
              const std::vector<int64_t>& err) {
             if (err.size() < 4)
               throw CallError("error words: " + std::to_string(kCudaErrorWords) + " int64");
             cuda_raise_error_word(pp.program, device_shape_views(device_views(shapes, "input")),
                                   err.data());
           },
           "Raises the CallError of a GPU call's error word (nothing when err[0] is 0)")
      .def("explain",
           [](const PyProgram& pp, const std::map<std::string, int64_t>& sizes, bool json,
              const std::string& target) {
             CompileOptions opt;
             opt.sizes = extents_of(sizes);
             std::optional<Target> t = parse_target(target);
             if (!t) throw CallError("unknown target '" + target + "' (cpu, cuda-sm80, cuda-sm90)");
             opt.target = *t;
             return json ? explain_json(pp.program, opt) : explain(pp.program, opt);
           },
           nb::arg("sizes") = std::map<std::string, int64_t>{}, nb::arg("json") = false,
           nb::arg("target") = "cpu")
      .def("emit",
           [](const PyProgram& pp, const std::string& target,
              const std::map<std::string, int64_t>& sizes) {
             std::optional<Target> t = parse_target(target);
             if (!t) throw CallError("unknown target '" + target + "' (cpu, cuda-sm80, cuda-sm90)");
             if (*t == Target::cpu) {
               CompileOptions opt;
               opt.sizes = extents_of(sizes);
               return emit_source(pp.program, opt);
             }
             return emit_cuda(pp.program, *t, extents_of(sizes));
           },
           nb::arg("target") = "cpu", nb::arg("sizes") = std::map<std::string, int64_t>{})
      .def("cuda_paths",
           [](const PyProgram& pp, const std::string& target,
              const std::map<std::string, int64_t>& sizes) {
             std::optional<Target> t = parse_target(target);
             if (!t || *t == Target::cpu)
               throw CallError("unknown CUDA target '" + target + "' (cuda-sm80, cuda-sm90)");
             std::vector<std::tuple<std::string, std::string, std::string>> out;
             for (const CudaKernelPath& k : cuda_paths(pp.program, *t, extents_of(sizes)))
               out.emplace_back(k.kernel, k.path, k.why);
             return out;
           },
           nb::arg("target") = "cuda-sm80", nb::arg("sizes") = std::map<std::string, int64_t>{})
      .def("kernel_count",
           [](const PyProgram& pp, const std::map<std::string, int64_t>& sizes) {
             CompileOptions opt;
             opt.sizes = extents_of(sizes);
             return kernel_count(pp.program, opt);
           },
           nb::arg("sizes") = std::map<std::string, int64_t>{})
      .def("__str__", [](const PyProgram& pp) { return pp.program.str(); });

  m.def("parse",
        [](const std::string& source, const std::string& filename, const std::string& name) {
          std::vector<Program> ps = parse_source(source, filename);
          PyProgram pp;
          pp.program = select_program(ps, name);
          pp.source = source;
          pp.filename = filename;
          return pp;
        },
        nb::arg("source"), nb::arg("filename"), nb::arg("program") = "",
        "Parses and checks `source` and picks the program named `program` (or the only one)");
}
