// The C header of `ktune build`: a comment block that says where the kernel came from and how to
// call it, the raw kernel-ABI entry and a typed wrapper.
#include "deploy/kernel_header.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <set>
#include <sstream>
#include <string_view>

#include "support/error.h"

namespace ktune::deploy {
namespace {

// C11..C23 and C++20 keywords, plus the names the header itself uses: a symbol or parameter
// named like one of these would not compile.
// clang-format off
constexpr std::string_view kReservedWords[] = {
    "_Alignas", "_Alignof", "_Atomic", "_BitInt", "_Bool", "_Complex", "_Decimal128", "_Decimal32",
    "_Decimal64", "_Generic", "_Imaginary", "_Noreturn", "_Static_assert", "_Thread_local",
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
    "case", "catch", "char", "char16_t", "char32_t", "char8_t", "class", "co_await", "co_return",
    "co_yield", "compl", "concept", "const", "const_cast", "consteval", "constexpr", "constinit",
    "continue", "decltype", "default", "delete", "do", "double", "dynamic_cast", "else", "enum",
    "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if", "inline",
    "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr",
    "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast",
    "requires", "restrict", "return", "short", "signed", "sizeof", "static", "static_assert",
    "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true", "try",
    "typedef", "typeid", "typename", "typeof", "typeof_unqual", "union", "unsigned", "using",
    "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
    // <stdint.h> types the header uses and the runtime API it declares.
    "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "ktune_parallel_for",
    "ktune_parallel_body", "ktune_parallel_for_fn", "ktune_set_num_threads", "ktune_get_num_threads",
    "ktune_set_parallel_for", "ktune_set_thread_cap", "ktune_set_thread_binding", "ktune_workspace_alloc",
    "ktune_workspace_free",
    "KTUNE_RUNTIME_API_",
};
// clang-format on

// The wrapper is <symbol>_run; it passes its pointers in a local array of this name.
constexpr const char* kWrapperSuffix = "_run";
constexpr const char* kArgsVariable = "ktune_args";

// The runtime API a program may call (codegen/parallel_runtime.c defines it all); guarded, as
// every kernel header declares it.
constexpr const char* kRuntimeApi =
    R"(/* ktune's parallel runtime: ktune_runtime.c from `ktune build --runtime` (see its opening
 * comment). Threads default to the CPUs the process may use; the count applies to the next
 * parallel loop. ktune_set_parallel_for(fn) makes every loop call fn (OpenMP, TBB, the
 * program's own pool) instead; fn must run body over chunks that cover [0, extent) exactly once
 * and return 0 when every chunk returned 0, else a non-zero code; NULL restores the built-in pool.
 * The pool's workers are bound to CPUs of their own (ktune_set_thread_binding(0), or
 * KTUNE_BIND_THREADS=0 in the environment, lets them run anywhere); it returns the previous. */
#ifndef KTUNE_RUNTIME_API_
#define KTUNE_RUNTIME_API_
typedef int32_t (*ktune_parallel_body)(int64_t begin, int64_t end, void* closure);
typedef int32_t (*ktune_parallel_for_fn)(int64_t extent, ktune_parallel_body body, void* closure);
int32_t ktune_parallel_for(int64_t extent, ktune_parallel_body body, void* closure);
int ktune_set_num_threads(int n); /* 0, or -1 when n < 1 */
int ktune_get_num_threads(void);
void ktune_set_parallel_for(ktune_parallel_for_fn fn);
int ktune_set_thread_binding(int on);
#endif

)";

// What the header says when an argument is bfloat16.
constexpr const char* kBfloat16Note =
    " * bfloat16 arguments are uint16_t arrays of bfloat16 bits: the high 16 bits of a float32,\n"
    " * rounded to nearest even (bits = (f32_bits + 0x7FFF + ((f32_bits >> 16) & 1)) >> 16 for\n"
    " * a number; a NaN keeps a NaN), and back as (uint32_t)bits << 16.\n";

bool is_reserved(std::string_view name) {
  return std::find(std::begin(kReservedWords), std::end(kReservedWords), name) !=
         std::end(kReservedWords);
}

// Text made safe to sit inside a /* */ comment on one line.
std::string comment_safe(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  for (size_t at = text.find("*/"); at != std::string::npos; at = text.find("*/", at))
    text.replace(at, 2, "*\\/");
  return text;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The macros the header defines (a parameter of the same name would be expanded).
std::string include_guard(const std::string& symbol) {
  return "KTUNE_KERNEL_" + upper(symbol) + "_H_";
}
std::string alignment_macro(const std::string& symbol) { return upper(symbol) + "_ALIGNMENT"; }

std::string shape_text(const codegen::ArgSpec& arg) {
  std::string s = arg.dtype;
  for (int64_t d : arg.shape) s += "[" + std::to_string(d) + "]";
  return s;
}

}  // namespace

std::string c_type(const std::string& dtype) {
  if (dtype == "float32") return "float";
  if (dtype == "float64") return "double";
  for (const char* bits : {"8", "16", "32", "64"}) {
    if (dtype == std::string("int") + bits) return std::string("int") + bits + "_t";
    if (dtype == std::string("uint") + bits) return std::string("uint") + bits + "_t";
  }
  if (dtype == "bool") return "uint8_t";
  // C has no standard bfloat16 type (__bf16 is a compiler extension): the arrays hold its bits,
  // the high half of a float32 (kBfloat16Note).
  if (dtype == "bfloat16") return "uint16_t";
  throw Error(ErrorKind::kUnsupported, "dtype " + dtype + " has no C type for the kernel header");
}

bool is_c_identifier(const std::string& name) {
  if (name.empty()) return false;
  const auto ident_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  if (std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  if (!std::all_of(name.begin(), name.end(), ident_char)) return false;
  return !is_reserved(name);
}

std::vector<std::string> wrapper_parameter_names(const std::string& symbol,
                                                 const std::vector<std::string>& tensor_names) {
  std::set<std::string> taken{symbol, symbol + kWrapperSuffix, kArgsVariable,
                              alignment_macro(symbol), include_guard(symbol)};
  std::vector<std::string> names;
  for (size_t i = 0; i < tensor_names.size(); ++i) {
    std::string n = tensor_names[i];
    for (char& c : n)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
    if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0])))
      n = "arg" + std::to_string(i) + "_" + n;
    if (is_reserved(n)) n += "_";
    // A clash gets the argument's position, which is unique among the arguments.
    if (taken.count(n)) n += "_" + std::to_string(i);
    while (taken.count(n)) n += "_";
    taken.insert(n);
    names.push_back(n);
  }
  return names;
}

std::string kernel_header(const std::string& symbol, const codegen::Artifact& artifact,
                          const std::vector<std::string>& tensor_names,
                          const KernelProvenance& provenance) {
  if (!is_c_identifier(symbol))
    throw Error(ErrorKind::kInvalidArgument, "'" + symbol + "' is not a C identifier");
  if (tensor_names.size() != artifact.signature.size())
    throw Error(ErrorKind::kInvalidArgument,
                "kernel_header: " + std::to_string(tensor_names.size()) + " tensor names for " +
                    std::to_string(artifact.signature.size()) + " arguments");
  if (artifact.signature.empty())
    throw Error(ErrorKind::kInvalidArgument, "kernel_header: a kernel without arguments");
  const std::string wrapper = symbol + kWrapperSuffix;
  const std::string args_var = kArgsVariable;
  const std::vector<std::string> params = wrapper_parameter_names(symbol, tensor_names);
  const std::string guard = include_guard(symbol);
  const std::string align_macro = alignment_macro(symbol);
  const size_t n = artifact.signature.size();
  std::vector<std::string> c_types;  // first, so that an unsupported dtype fails before any text
  for (const auto& a : artifact.signature) c_types.push_back(c_type(a.dtype));

  std::ostringstream h;
  h << "/* " << symbol << ": a kernel compiled by ktune " << comment_safe(provenance.ktune_version)
    << " (`ktune build`). Generated file: do not edit.\n"
    << " *\n"
    << " * workload: " << comment_safe(provenance.workload_key) << "\n"
    << " * target:   " << comment_safe(provenance.target) << "\n"
    << " * LLVM:     " << comment_safe(provenance.llvm_version) << "\n"
    << " * config:   " << comment_safe(provenance.config_json) << "\n"
    << " * source:   " << comment_safe(provenance.source) << "\n"
    << " *\n"
    << " * Arguments, in call order (dense, row-major; every buffer " << kKernelBufferAlignment
    << "-byte aligned, e.g. aligned_alloc(" << kKernelBufferAlignment
    << ", bytes); ktune timed one\n"
    << " * of 2 MiB or more on a 2 MiB boundary advised to huge pages, madvise(p, size,\n"
    << " * MADV_HUGEPAGE) before its first touch):\n";
  for (size_t i = 0; i < n; ++i) {
    const auto& a = artifact.signature[i];
    h << " *   " << i << " " << comment_safe(params[i]) << ": " << shape_text(a) << ", "
      << a.num_elements() * a.element_bytes() << " bytes, " << (a.is_output ? "output" : "input")
      << "\n";
  }
  const bool bf16 = std::any_of(artifact.signature.begin(), artifact.signature.end(),
                                [](const codegen::ArgSpec& a) { return a.dtype == "bfloat16"; });
  h << " *\n"
    << (bf16 ? kBfloat16Note : "") << (bf16 ? " *\n" : "")
    << " * Returns 0 on success, 1 when a temporary buffer could not be allocated. Inputs are "
       "never\n"
    << " * written. Parallel loops call ktune_parallel_for (and large temporaries\n"
    << " * ktune_workspace_alloc), so a program built outside ktune must\n"
    << " * link ktune_parallel_for: write it with --runtime (`ktune build ... --runtime "
       "ktune_runtime.c`, then\n"
    << " * `cc main.c " << symbol << ".o ktune_runtime.c -lpthread -lm`).\n"
    << " */\n"
    << "#ifndef " << guard << "\n"
    << "#define " << guard << "\n\n"
    << "#include <stdint.h>\n\n"
    << "#define " << align_macro << " " << kKernelBufferAlignment << "\n\n"
    << "#ifdef __cplusplus\n"
    << "extern \"C\" {\n"
    << "#endif\n\n"
    << "/* The kernel ABI: args[i] points to argument i above. */\n"
    << "int32_t " << symbol << "(void* const* args);\n\n"
    << kRuntimeApi << "/* Fills the argument array and calls " << symbol << ". */\n"
    << "static inline int32_t " << wrapper << "(";
  for (size_t i = 0; i < n; ++i) {
    const auto& a = artifact.signature[i];
    h << (i ? ", " : "") << (a.is_output ? "" : "const ") << c_types[i] << "* " << params[i];
  }
  h << ") {\n"
    << "  void* const " << args_var << "[" << n << "] = {";
  for (size_t i = 0; i < n; ++i) h << (i ? ", " : "") << "(void*)" << params[i];
  h << "};\n"
    << "  return " << symbol << "(" << args_var << ");\n"
    << "}\n\n"
    << "#ifdef __cplusplus\n"
    << "}  /* extern \"C\" */\n"
    << "#endif\n\n"
    << "#endif  /* " << guard << " */\n";
  return h.str();
}

std::string kernels_header(const std::string& name, const std::string& library,
                           const std::vector<KernelHeaderPart>& kernels) {
  if (kernels.empty()) throw Error(ErrorKind::kInvalidArgument, "kernels_header: no kernels");
  std::string guard = "KTUNE_KERNELS_" + upper(name) + "_H_";
  for (char& c : guard)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  std::ostringstream h;
  h << "/* " << comment_safe(name) << ": " << kernels.size() << " kernels compiled by ktune "
    << comment_safe(kernels.front().provenance.ktune_version)
    << " (`ktune build --manifest`) into the static library " << comment_safe(library)
    << ". Generated file: do not edit.\n"
    << " *\n";
  for (const auto& k : kernels)
    h << " *   " << k.symbol << ": " << comment_safe(k.provenance.workload_key) << ", "
      << comment_safe(k.provenance.source) << "\n";
  h << " *\n"
    << " * Each kernel's own section below says how to call it. Link the library and the runtime\n"
    << " * (`ktune build --manifest ... --runtime ktune_runtime.c`): `cc main.c "
    << comment_safe(library) << " ktune_runtime.c -lpthread -lm`.\n"
    << " */\n"
    << "#ifndef " << guard << "\n"
    << "#define " << guard << "\n\n";
  for (const auto& k : kernels) {
    if (!k.artifact)
      throw Error(ErrorKind::kInvalidArgument, "kernels_header: " + k.symbol + " has no artifact");
    h << kernel_header(k.symbol, *k.artifact, k.tensor_names, k.provenance) << "\n";
  }
  h << "#endif  /* " << guard << " */\n";
  return h.str();
}

}  // namespace ktune::deploy
