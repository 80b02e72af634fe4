// Unit test of deploy/kernel_header: C identifiers, wrapper parameter names, and headers for
// signatures no template produces today (integer dtypes, awkward tensor names, hostile config
// text), each compiled by the system C and C++ compilers.
#include "deploy/kernel_header.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "support/error.h"

namespace ktune::deploy {
namespace {

namespace fs = std::filesystem;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

KernelProvenance provenance() {
  KernelProvenance p;
  p.workload_key = "test(N=4)";
  p.target = "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=x86-64";
  p.llvm_version = "19.1.7";
  p.config_json = R"({"entity":[["odd","ot","*/ #error broken"]],"index":3})";
  p.source = "fallback, untuned (*/ int broken;)";
  p.ktune_version = "0.1.0";
  return p;
}

codegen::Artifact artifact(std::vector<codegen::ArgSpec> signature) {
  codegen::Artifact a;
  a.entry = "k";
  a.signature = std::move(signature);
  return a;
}

// Compiles `source` (a file that includes `header`) with `compiler`; returns the exit status.
int compile(const std::string& compiler, const std::string& header, const std::string& source,
            const std::string& ext) {
  const fs::path dir =
      fs::temp_directory_path() / ("ktune-header-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "k.h") << header;
  std::ofstream(dir / ("main." + ext)) << source;
  const std::string cmd = compiler + " -Wall -Wextra -Werror -fsyntax-only -I" + dir.string() +
                          " " + (dir / ("main." + ext)).string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  fs::remove_all(dir);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(KernelHeader, CIdentifiers) {
  for (const char* good : {"a", "_x", "ktune_matmul", "A1", "run_2", "Int"})
    EXPECT_TRUE(is_c_identifier(good)) << good;
  for (const char* bad :
       {"", "1a", "a-b", "a b", "a.b", "int", "float", "class", "restrict", "int32_t", "uint8_t",
        "ktune_parallel_for", "ktune_set_thread_cap", "ktune_workspace_alloc", "caf\xc3\xa9"})
    EXPECT_FALSE(is_c_identifier(bad)) << bad;
}

TEST(KernelHeader, WrapperParameterNamesAreDistinctIdentifiers) {
  EXPECT_EQ(wrapper_parameter_names("k", {"A", "B", "C"}),
            (std::vector<std::string>{"A", "B", "C"}));
  const std::vector<std::string> tensors = {"k", "k_run", "ktune_args", "int", "9x",         "a.b",
                                            "A", "A",     "A_6",        "",    "K_ALIGNMENT"};
  const auto names = wrapper_parameter_names("k", tensors);
  ASSERT_EQ(names.size(), tensors.size());
  const std::set<std::string> unique(names.begin(), names.end());
  EXPECT_EQ(unique.size(), names.size());
  for (const auto& n : names) {
    EXPECT_TRUE(is_c_identifier(n)) << n;
    EXPECT_TRUE(n != "k" && n != "k_run" && n != "ktune_args" && n != "K_ALIGNMENT") << n;
  }
  EXPECT_EQ(names[6], "A") << "the first of two equal names keeps it";
}

TEST(KernelHeader, IntegerAndDoubleArgumentsCompileAsCAndCxx) {
  const auto a =
      artifact({{{4}, "int32", false}, {{2, 3}, "float64", false}, {{5}, "uint8", true}});
  const std::string h = kernel_header("k", a, {"idx", "data", "mask"}, provenance());
  EXPECT_TRUE(contains(
      h, "static inline int32_t k_run(const int32_t* idx, const double* data, uint8_t* mask)"))
      << h;
  EXPECT_TRUE(contains(h, "1 data: float64[2][3], 48 bytes, input")) << h;
  EXPECT_TRUE(contains(h, "2 mask: uint8[5], 5 bytes, output")) << h;
  const std::string use =
      "#include \"k.h\"\nint call(const int32_t* i, const double* d, uint8_t* m) { return k_run(i, "
      "d, m); }\n";
  EXPECT_EQ(compile("cc -std=c11", h, use, "c"), 0) << h;
  EXPECT_EQ(compile("c++ -std=c++17", h, use, "cc"), 0) << h;
}

TEST(KernelHeader, OneHeaderForSeveralKernelsListsThemAndCompilesAsCAndCxx) {
  const auto mm = artifact({{{4, 4}, "float32", false}, {{4, 4}, "float32", true}});
  const auto ix = artifact({{{8}, "int32", false}, {{8}, "int64", true}});
  KernelProvenance tuned = provenance();
  tuned.workload_key = "matmul(M=4)";
  tuned.source = "tuning log t.db, record 7: 1.00 GFLOP/s";
  const std::string h =
      kernels_header("all kernels.h", "libk.a",
                     {{"mm", &mm, {"A", "B"}, tuned}, {"ix", &ix, {"I", "O"}, provenance()}});
  EXPECT_TRUE(contains(h, " *   mm: matmul(M=4), tuning log t.db, record 7: 1.00 GFLOP/s\n")) << h;
  EXPECT_TRUE(contains(h, " *   ix: test(N=4), fallback, untuned (*\\/ int broken;)\n")) << h;
  EXPECT_TRUE(contains(h, "`cc main.c libk.a ktune_runtime.c -lpthread -lm`")) << h;
  EXPECT_TRUE(contains(h, "#ifndef KTUNE_KERNELS_ALL_KERNELS_H_H_\n")) << h;
  EXPECT_TRUE(contains(h, "int32_t mm(void* const* args);") &&
              contains(h, "int32_t ix(void* const* args);"))
      << h;
  const std::string use =
      "#include \"k.h\"\n#include \"k.h\"\n"
      "int call(const float* a, float* b, const int32_t* i, int64_t* o) { return mm_run(a, b) | "
      "ix_run(i, o); }\n";
  EXPECT_EQ(compile("cc -std=c11", h, use, "c"), 0) << h;
  EXPECT_EQ(compile("c++ -std=c++17", h, use, "cc"), 0) << h;
  EXPECT_THROW(kernels_header("k.h", "libk.a", {}), Error);
  EXPECT_THROW(kernels_header("k.h", "libk.a", {{"mm", nullptr, {"A", "B"}, tuned}}), Error);
}

TEST(KernelHeader, RejectsWhatItCannotDeclare) {
  const auto ok = artifact({{{4}, "float32", true}});
  const auto kind = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::kUnknown;
  };
  EXPECT_EQ(kind([&] { kernel_header("9k", ok, {"A"}, provenance()); }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind([&] {
              kernel_header("k", ok, {"A", "B"}, provenance());
            }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind([&] { kernel_header("k", artifact({}), {}, provenance()); }),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind([&] {
              kernel_header("k", artifact({{{4}, "float16", true}}), {"A"}, provenance());
            }),
            ErrorKind::kUnsupported);
}

}  // namespace
}  // namespace ktune::deploy
