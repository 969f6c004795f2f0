// Shared pieces of the `flashgen` tool (see cli.h).
#include "cli.h"

#include "flashgen/npy.h"

#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace flashgen::cli {

namespace fs = std::filesystem;

Loaded load(const std::string& path) { return Loaded{path, parse_file(path)}; }

const Program& pick(const Loaded& file, const std::string& name) {
  return select_program(file.programs, name);
}

namespace {

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

std::string read_source(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  if (f) s << f.rdbuf();
  return s.str();
}

}  // namespace

Extents parse_sizes(const std::string& text) {
  Extents sizes;
  auto fail = [&](const std::string& why) {
    throw CallError("invalid SIZES '" + text + "': " + why +
                    " (expected NAME=N items separated by commas, e.g. b=2,h=4,m=n=512,d=e=64)");
  };
  if (trim(text).empty()) fail("it is empty");
  if (trim(text).back() == ',') fail("it ends with a comma");
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    std::vector<std::string> parts;
    std::stringstream ps(item);
    std::string part;
    while (std::getline(ps, part, '=')) parts.push_back(trim(part));
    if (!item.empty() && item.back() == '=') parts.push_back("");
    if (parts.size() < 2) fail("item '" + trim(item) + "' has no '='");
    const std::string& num = parts.back();
    if (num.empty() || num.size() > 15 ||
        num.find_first_not_of("0123456789") != std::string::npos)
      fail("'" + num + "' in item '" + trim(item) + "' is not a non-negative integer");
    int64_t value = std::stoll(num);
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const std::string& name = parts[i];
      if (!is_identifier(name)) fail("'" + name + "' is not a dimension name");
      auto it = sizes.find(name);
      if (it != sizes.end() && it->second != value)
        fail("dimension '" + name + "' is given twice (" + std::to_string(it->second) + " and " +
             num + ")");
      sizes[name] = value;
    }
  }
  return sizes;
}

uint64_t parse_seed(const std::string& text) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto r = std::from_chars(text.data(), end, v);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) || r.ptr != end ||
      r.ec != std::errc())
    throw CallError("--seed: '" + text + "' is not an integer from 0 to 18446744073709551615 " +
                    "(2^64 - 1)");
  return v;
}

void check_sizes_known(const Program& p, const Extents& sizes) {
  for (const auto& [name, value] : sizes) {
    if (p.find_dim(name) >= 0) continue;
    std::string dims;
    for (const auto& d : p.dims) dims += (dims.empty() ? "" : ", ") + d;
    throw CallError("SIZES names dimension '" + name + "', which program '" + p.name +
                    "' does not have (its dimensions: " + dims + ")");
  }
}

namespace {

std::string describe(const Program& p, const Parameter& par) {
  return par.name + ": " + dtype_name(par.type) + p.dim_list(par.dims);
}

}  // namespace

TensorMap load_inputs(const Program& p, const std::string& dir) {
  if (!fs::is_directory(dir))
    throw CallError("--inputs: '" + dir + "' is not a folder");
  TensorMap inputs;
  for (const auto& par : p.params) {
    const std::string path = dir + "/" + par.name + ".npy";
    if (!fs::exists(path))
      throw CallError("missing input for parameter '" + par.name + "': expected " + path +
                      " holding " + describe(p, par));
    NpyArray a = read_npy(path);
    // Checked here, where the file's numpy dtype is known: the tensor has already been widened
    // (every integer width becomes i32 or i64), so a later message could not name it.
    const char want = is_float(par.type) ? 'f' : par.type == DType::boolean ? 'b' : 'i';
    const char have = a.descr.size() >= 2 ? (a.descr[1] == 'u' ? 'i' : a.descr[1]) : '?';
    if (want != have)
      throw CallError("parameter '" + par.name + "' is " + describe(p, par) + " but " + path +
                      " holds " + npy_dtype_name(a.descr) + " ('" + a.descr + "'); " +
                      (want == 'f'   ? "float parameters need a float array (float16/32/64)"
                       : want == 'b' ? "bool parameters need a bool array"
                                     : "integer parameters need an integer array"));
    inputs[par.name] = std::move(a.tensor);
  }
  for (const auto& entry : fs::directory_iterator(dir)) {
    const fs::path& f = entry.path();
    if (f.extension() == ".npy" && p.find_param(f.stem().string()) < 0)
      std::cerr << "warning: " << escape_bytes(f.string()) << " matches no parameter of program '"
                << p.name << "' and is ignored\n";
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

TensorMap read_given_inputs(const std::vector<std::string>& items) {
  TensorMap given;
  for (const std::string& kv : items) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw CallError("--input wants NAME=FILE.npy, got '" + kv + "'");
    given[kv.substr(0, eq)] = read_npy(kv.substr(eq + 1)).tensor;
  }
  return given;
}

int guarded(const std::string& file, const std::function<int()>& body) {
  try {
    return body();
  } catch (const SourceError& e) {
    // The source line is already made printable by format_diagnostic; the file name is not.
    std::string text = escape_bytes(e.what(), true);
    std::cerr << text;
    if (text.empty() || text.back() != '\n') std::cerr << '\n';
    return kProgramError;
  } catch (const ProgramError& e) {
    if (e.loc.line > 0)
      std::cerr << escape_bytes(format_diagnostic(file, read_source(file), e.loc, e.what()), true)
                << '\n';
    else
      std::cerr << escape_bytes(file) << ": error: " << escape_bytes(e.what(), true) << '\n';
    return kProgramError;
  } catch (const CallError& e) {
    std::cerr << "error: " << escape_bytes(e.what(), true) << '\n';
    return kCallError;
  } catch (const BackendError& e) {
    std::cerr << "error: " << escape_bytes(e.what(), true) << '\n';
    return kBackendError;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << escape_bytes(e.what(), true) << '\n';
    return kInternalError;
  }
}

}  // namespace flashgen::cli
