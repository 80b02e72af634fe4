// End-to-end test of `ktune build`: the object, header and runtime it writes are linked into a C
// program by the system compiler, whose outputs are checked against a naive loop; the header must
// name the logged config; a cross build must be an AArch64 ELF that defines the kernel; every bad
// input fails with one stderr line and leaves no file behind.
#include <elf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/target.h"
#include "schedule_space/task.h"
#include "te/host_buffer.h"
#include "te/interpreter.h"
#include "te/lower.h"
#include "tests/cli_util.h"
#include "tests/deploy/build_test_util.h"
#include "tuning_db/database.h"

#ifndef KTUNE_SOURCE_DIR_PATH
#error "build_cli_test needs KTUNE_SOURCE_DIR_PATH (the project root)"
#endif

namespace ktune::tools {
namespace {

using namespace build_test;  // NOLINT: the helpers of every build test

// The start of a C test program: includes, the sizes, and `buffer(count)`, which returns a
// 64-byte aligned array of values in [-0.5, 0.5) from a generator seeded with `seed`.
std::string c_prelude(const std::string& header, int seed, int m, int n, int k) {
  std::ostringstream c;
  c << "#include <math.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include \"" << header << "\"\n"
    << "enum { M = " << m << ", N = " << n << ", K = " << k << " };\n"
    << "static unsigned long long state = " << seed << ";\n"
    << R"(static float next_value(void) {
  state = state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(state >> 40) / 16777216.0) - 0.5f;
}
static float* buffer(size_t count) {
  float* p = aligned_alloc(64, (count * sizeof(float) + 63) / 64 * 64);
  for (size_t i = 0; i < count; ++i) p[i] = next_value();
  return p;
}
)";
  return c.str();
}

// C source of a program that fills A and B from a seeded generator and calls the matmul wrapper
// three times, C filled with NaN before each: on 1 thread, on 2 threads, and through a plugged
// serial parallel-for (ktune_set_parallel_for). After each it compares every element of C with a
// double-precision triple loop and prints "<mode>: checked <count> bad <count> max_rel_err <x>"
// (bad: off by more than 1e-4 relative to the sum of |products|); last, "plug_calls <n>".
// Returns 1 when an element is off.
std::string matmul_program(const std::string& header, const std::string& wrapper, int m, int n,
                           int k) {
  std::ostringstream c;
  c << c_prelude(header, 12345, m, n, k) << "#include <string.h>\n"
    << R"(static long plug_calls;
static int32_t serial_for(int64_t extent, ktune_parallel_body body, void* closure) {
  ++plug_calls;
  int32_t rc = 0;
  for (int64_t i = 0; i < extent && rc == 0; ++i) rc = body(i, i + 1, closure);
  return rc;
}
static long check(const char* mode, const float* A, const float* B, float* C) {
  memset(C, 0xff, sizeof(float) * M * N); /* NaN: the kernel must overwrite every element */
  int rc = )"
    << wrapper << R"((A, B, C);
  if (rc != 0) { printf("%s: kernel returned %d\n", mode, rc); return M * N; }
  long bad = 0;
  double worst = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double ref = 0, scale = 0;
      for (int q = 0; q < K; ++q) {
        double p = (double)A[i * K + q] * B[q * N + j];
        ref += p;
        scale += fabs(p);
      }
      double err = fabs(C[i * N + j] - ref) / (scale > 0 ? scale : 1);
      if (err > worst || err != err) worst = err;
      if (!(err <= 1e-4)) ++bad;
    }
  printf("%s: checked %d bad %ld max_rel_err %g\n", mode, M * N, bad, worst);
  return bad;
}
int main(void) {
  float* A = buffer(M * K);
  float* B = buffer(K * N);
  float* C = buffer(M * N);
  long bad = 0;
  if (ktune_set_num_threads(1) != 0 || ktune_get_num_threads() != 1) return 3;
  bad += check("threads 1", A, B, C);
  if (ktune_set_num_threads(2) != 0 || ktune_get_num_threads() != 2) return 3;
  bad += check("threads 2", A, B, C);
  ktune_set_parallel_for(serial_for);
  bad += check("plugged", A, B, C);
  printf("plug_calls %ld\n", plug_calls);
  return bad ? 1 : 0;
}
)";
  return c.str();
}

// Checks what matmul_program printed: every mode right, and the plug called exactly when the
// object calls ktune_parallel_for (`nm` is the binutils nm for the object's architecture).
void expect_matmul_right(const std::string& ran, const std::string& object,
                         const std::string& nm = "nm") {
  for (const char* mode : {"threads 1", "threads 2", "plugged"})
    EXPECT_TRUE(contains(ran, std::string(mode) + ": checked 3072 bad 0 ")) << mode << "\n" << ran;
  const Output undefined = shell(nm + " -u " + quote(object));
  ASSERT_EQ(undefined.status, 0) << undefined.err;
  const bool parallel = contains(undefined.out, "ktune_parallel_for");
  const size_t at = ran.find("plug_calls ");
  ASSERT_NE(at, std::string::npos) << ran;
  const long calls = std::stol(ran.substr(at + 11));
  if (parallel) {
    EXPECT_GE(calls, 1) << "the object has a parallel loop: the plug must run it";
  } else {
    EXPECT_EQ(calls, 0) << "the object has no parallel loop";
  }
}

// Like matmul_program for Y = relu(X * W^T + bias); also prints how many outputs relu zeroed.
std::string dense_program(const std::string& header, const std::string& wrapper, int m, int n,
                          int k) {
  std::ostringstream c;
  c << c_prelude(header, 777, m, n, k) << R"(int main(void) {
  float* X = buffer(M * K);
  float* W = buffer(N * K);
  float* bias = buffer(N);
  float* Y = buffer(M * N);
  int rc = )"
    << wrapper << R"((X, W, bias, Y);
  if (rc != 0) { printf("kernel returned %d\n", rc); return 2; }
  long bad = 0, zeros = 0;
  double worst = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double ref = bias[j], scale = fabs(bias[j]);
      for (int q = 0; q < K; ++q) {
        double p = (double)X[i * K + q] * W[j * K + q];
        ref += p;
        scale += fabs(p);
      }
      if (ref < 0) { ref = 0; ++zeros; }
      double err = fabs(Y[i * N + j] - ref) / (scale > 0 ? scale : 1);
      if (err > worst) worst = err;
      if (!(err <= 1e-4)) ++bad;
    }
  printf("checked %d bad %ld max_rel_err %g zeros %ld\n", M * N, bad, worst, zeros);
  return bad ? 1 : 0;
}
)";
  return c.str();
}

std::string fixed(double v, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}

TEST(BuildCli, BuildsTheBestLoggedConfigAndItComputesTheMatmul) {
  TempDir dir;
  const auto task = make_task("matmul", {"M=64", "N=48", "K=32"});
  const auto configs = pick_configs(task, 2, 2024);
  const int64_t best_id = write_log(dir.file("tune.db"), task, configs);
  const Output out = ktune_build(
      "matmul M=64 N=48 K=32 --db " + quote(dir.file("tune.db")) + " -o " + quote(dir.file("k.o")) +
      " --header " + quote(dir.file("k.h")) + " --runtime " + quote(dir.file("rt.c")) + " --json");
  ASSERT_EQ(out.status, 0) << out.err;
  EXPECT_EQ(out.err, "") << "a tuned build warns about nothing";
  const auto j = nlohmann::json::parse(out.out);
  EXPECT_EQ(j["config_source"], "tuned");
  EXPECT_EQ(j["record"]["id"], best_id);
  EXPECT_EQ(j["config"]["index"], configs[0].index());
  EXPECT_EQ(j["symbol"], "ktune_matmul");
  EXPECT_EQ(j["object"], dir.file("k.o"));
  EXPECT_EQ(j["object_bytes"], fs::file_size(dir.file("k.o")));

  // The header names the record's config, where it came from, and how to call the kernel.
  const std::string header = read_file(dir.file("k.h"));
  const nlohmann::json config = header_config(header);
  EXPECT_EQ(config["index"], configs[0].index());
  EXPECT_EQ(config["entity"], configs[0].to_json()["entity"]);
  const std::string source = header_field(header, " * source:   ");
  EXPECT_TRUE(contains(source, "record " + std::to_string(best_id))) << source;
  EXPECT_TRUE(contains(source, fixed(task.flop() / 2.1e-5 / 1e9, 2) + " GFLOP/s")) << source;
  EXPECT_TRUE(contains(source, "tuner random")) << source;
  EXPECT_EQ(header_field(header, " * workload: "), task.workload_key());
  EXPECT_EQ(header_field(header, " * target:   "), codegen::Target::parse("host").str());
  EXPECT_EQ(header_field(header, " * LLVM:     "), codegen::llvm_version());
  for (const char* part :
       {"#include <stdint.h>", "extern \"C\" {", "int32_t ktune_matmul(void* const* args);",
        "static inline int32_t ktune_matmul_run(const float* A, const float* B, float* C)",
        "0 A: float32[64][32], 8192 bytes, input", "1 B: float32[32][48], 6144 bytes, input",
        "2 C: float32[64][48], 12288 bytes, output", "64-byte aligned",
        "#define KTUNE_MATMUL_ALIGNMENT 64", "link ktune_parallel_for: write it with --runtime"})
    EXPECT_TRUE(contains(header, part)) << part << "\n" << header;
  EXPECT_EQ(read_file(dir.file("rt.c")),
            read_file(std::string(KTUNE_SOURCE_DIR_PATH) + "/codegen/parallel_runtime.c"));

  const std::string ran =
      compile_and_run(dir, matmul_program("k.h", "ktune_matmul_run", 64, 48, 32), dir.file("k.o"),
                      dir.file("rt.c"))
          .value_or("");
  expect_matmul_right(ran, dir.file("k.o"));
  // The header is valid C++ too (extern "C" guards).
  const Output cxx =
      shell("c++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -x c++ " + quote(dir.file("k.h")));
  EXPECT_EQ(cxx.status, 0) << cxx.err;
}

// A log that does not exist is a mistake (a typo, another folder), never a silent untuned build:
// one error line, nothing written. --untuned asks for the fallback, and gets it without a warning.
TEST(BuildCli, AMissingLogIsAnErrorAndUntunedBuildsTheFallback) {
  TempDir dir;
  const auto task = make_task("matmul", {"M=64", "N=48", "K=32"});
  const Output missing =
      ktune_build("matmul M=64 N=48 K=32 --db missing.db --runtime rt.c", dir.path());
  EXPECT_EQ(missing.status, 1);
  expect_one_error_line(missing, "no tuning log at missing.db");
  EXPECT_TRUE(contains(missing.err, "--untuned")) << missing.err;
  EXPECT_TRUE(fs::is_empty(dir.path())) << "nothing written, the log not created";

  // Default output names, in the current directory.
  const Output out = ktune_build("matmul M=64 N=48 K=32 --untuned --runtime rt.c", dir.path());
  ASSERT_EQ(out.status, 0) << out.err;
  EXPECT_EQ(out.err, "");
  EXPECT_TRUE(contains(out.out, "config:  fallback, untuned")) << out.out;
  EXPECT_EQ(listing(dir.path()),
            (std::set<std::string>{"ktune_matmul.h", "ktune_matmul.o", "rt.c"}));

  const std::string header = read_file(dir.file("ktune_matmul.h"));
  EXPECT_EQ(header_config(header)["index"], task.fallback_config().index());
  EXPECT_TRUE(contains(header_field(header, " * source:   "),
                       "fallback, untuned (built untuned, without a tuning log)"))
      << header;
  const std::string ran =
      compile_and_run(dir, matmul_program("ktune_matmul.h", "ktune_matmul_run", 64, 48, 32),
                      dir.file("ktune_matmul.o"), dir.file("rt.c"))
          .value_or("");
  expect_matmul_right(ran, dir.file("ktune_matmul.o"));
}

TEST(BuildCli, DenseBiasReluWithALogThatHasNoRecordOfIt) {
  TempDir dir;
  const auto matmul = make_task("matmul", {"M=64", "N=48", "K=32"});
  write_log(dir.file("tune.db"), matmul, pick_configs(matmul, 2, 7));
  const auto task = make_task("dense_bias_relu", {"M=16", "N=48", "K=32"});
  const Output out =
      ktune_build("dense_bias_relu M=16 N=48 K=32 --name my_dense --db " +
                  quote(dir.file("tune.db")) + " -o " + quote(dir.file("d.o")) + " --header " +
                  quote(dir.file("d.h")) + " --runtime " + quote(dir.file("rt.c")));
  ASSERT_EQ(out.status, 0) << out.err;
  const auto err = lines_of(out.err);
  ASSERT_EQ(err.size(), 1u) << out.err;
  EXPECT_TRUE(contains(err[0], "no successful record of " + task.workload_key())) << err[0];
  EXPECT_TRUE(contains(out.out, "symbol:  my_dense (wrapper my_dense_run)")) << out.out;

  const std::string header = read_file(dir.file("d.h"));
  EXPECT_EQ(header_config(header)["index"], task.fallback_config().index());
  EXPECT_TRUE(contains(header, "int32_t my_dense(void* const* args);")) << header;
  EXPECT_TRUE(contains(header,
                       "static inline int32_t my_dense_run(const float* X, const float* W, "
                       "const float* bias, float* Y)"))
      << header;
  EXPECT_TRUE(contains(header, "2 bias: float32[48], 192 bytes, input")) << header;
  const std::string ran = compile_and_run(dir, dense_program("d.h", "my_dense_run", 16, 48, 32),
                                          dir.file("d.o"), dir.file("rt.c"))
                              .value_or("");
  EXPECT_TRUE(contains(ran, "checked 768 bad 0 ")) << ran;
  // relu must have had something to do: some outputs are clamped, not all.
  const auto at = ran.find("zeros ");
  ASSERT_NE(at, std::string::npos) << ran;
  const long zeros = std::stol(ran.substr(at + 6));
  EXPECT_GT(zeros, 0);
  EXPECT_LT(zeros, 768);
}

// The symbol table of a 64-bit little-endian ELF relocatable object: does it define `name` as a
// global function? Every offset is checked against the file size.
bool elf_defines_global_function(const std::string& bytes, const std::string& name) {
  if (bytes.size() < sizeof(Elf64_Ehdr)) return false;
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  const auto in_file = [&](uint64_t off, uint64_t len) {
    return off <= bytes.size() && len <= bytes.size() - off;
  };
  if (eh.e_shentsize != sizeof(Elf64_Shdr) ||
      !in_file(eh.e_shoff, uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr)))
    return false;
  const auto section = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, bytes.data() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof sh);
    return sh;
  };
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr symtab = section(i);
    if (symtab.sh_type != SHT_SYMTAB || symtab.sh_link >= eh.e_shnum) continue;
    const Elf64_Shdr strtab = section(symtab.sh_link);
    if (!in_file(symtab.sh_offset, symtab.sh_size) || !in_file(strtab.sh_offset, strtab.sh_size))
      return false;
    for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= symtab.sh_size; off += sizeof(Elf64_Sym)) {
      Elf64_Sym sym;
      std::memcpy(&sym, bytes.data() + symtab.sh_offset + off, sizeof sym);
      if (sym.st_name >= strtab.sh_size) continue;
      const char* s = bytes.data() + strtab.sh_offset + sym.st_name;
      const std::string sym_name(s, strnlen(s, strtab.sh_size - sym.st_name));
      if (sym_name == name && sym.st_shndx != SHN_UNDEF &&
          ELF64_ST_BIND(sym.st_info) == STB_GLOBAL && ELF64_ST_TYPE(sym.st_info) == STT_FUNC)
        return true;
    }
  }
  return false;
}

TEST(BuildCli, CrossBuildIsAnAArch64ObjectDefiningTheKernel) {
  TempDir dir;
  // The log's record is for the host: the AArch64 target has none, so this is the fallback.
  const auto host_task = make_task("matmul", {"M=64", "N=48", "K=32"});
  write_log(dir.file("tune.db"), host_task, pick_configs(host_task, 2, 11));
  const auto task = make_task("matmul", {"M=64", "N=48", "K=32"}, kCross);
  const Output out =
      ktune_build("matmul M=64 N=48 K=32 --target " + quote(kCross) + " --db " +
                  quote(dir.file("tune.db")) + " -o " + quote(dir.file("a.o")) + " --header " +
                  quote(dir.file("a.h")) + " --runtime " + quote(dir.file("rt.c")) + " --json");
  ASSERT_EQ(out.status, 0) << out.err;
  EXPECT_EQ(lines_of(out.err).size(), 1u) << out.err;
  const auto j = nlohmann::json::parse(out.out);
  EXPECT_EQ(j["config_source"], "fallback");
  EXPECT_EQ(j["config"]["index"], task.fallback_config().index());
  EXPECT_EQ(j["target"], codegen::Target::parse(kCross).str());

  const std::string object = read_file(dir.file("a.o"));
  ASSERT_GE(object.size(), sizeof(Elf64_Ehdr));
  Elf64_Ehdr eh;
  std::memcpy(&eh, object.data(), sizeof eh);
  EXPECT_EQ(std::memcmp(eh.e_ident, ELFMAG, SELFMAG), 0);
  EXPECT_EQ(eh.e_ident[EI_CLASS], ELFCLASS64);
  EXPECT_EQ(eh.e_ident[EI_DATA], ELFDATA2LSB);
  EXPECT_EQ(eh.e_type, ET_REL);
  EXPECT_EQ(eh.e_machine, 183) << "EM_AARCH64";
  EXPECT_TRUE(elf_defines_global_function(object, "ktune_matmul"));
  EXPECT_FALSE(elf_defines_global_function(object, "ktune_matmul_run"))
      << "the wrapper lives in the header";
  EXPECT_EQ(header_field(read_file(dir.file("a.h")), " * target:   "),
            codegen::Target::parse(kCross).str());

  // Where a cross toolchain and qemu exist, the same C program runs on (emulated) AArch64.
  if (std::system("command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && "
                  "command -v qemu-aarch64-static >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no aarch64-linux-gnu-gcc or qemu-aarch64-static: the object was not run";
  const std::string ran =
      compile_and_run(dir, matmul_program("a.h", "ktune_matmul_run", 64, 48, 32), dir.file("a.o"),
                      dir.file("rt.c"), "aarch64-linux-gnu-gcc -static", "qemu-aarch64-static")
          .value_or("");
  expect_matmul_right(ran, dir.file("a.o"), "aarch64-linux-gnu-nm");
}

// Every template (small instances): the built kernel, called through its typed wrapper from C,
// gives what te's interpreter computes from the plain reference schedule on the same inputs.
TEST(BuildCli, EveryTemplateLinksIntoCAndMatchesTheReference) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> workloads = {
      {"matmul", {"M=24", "N=32", "K=16", "dtype=float64"}},
      {"dense_bias_relu", {"M=8", "N=32", "K=16"}},
      {"batch_matmul", {"batch=2", "M=8", "N=32", "K=16", "layout=nt"}},
      {"conv2d", {"C=3", "H=10", "W=10", "K=8", "pad=1"}},
      {"conv2d_nchwc", {"C=16", "H=8", "W=8", "K=16"}},
      {"depthwise_conv2d", {"C=8", "H=10", "W=10", "stride=2", "pad=1"}},
      {"max_pool2d", {"C=4", "H=9", "W=9", "R=3", "S=3", "pad=1"}},
      {"avg_pool2d", {"C=4", "H=8", "W=12"}},
  };
  for (const auto& [name, words] : workloads) {
    SCOPED_TRACE(name);
    TempDir dir;
    std::string cli = name;
    for (const auto& w : words) cli += " " + w;
    const Output out =
        ktune_build(cli + " --untuned --json --runtime rt.c -o k.o --header k.h", dir.path());
    ASSERT_EQ(out.status, 0) << out.err;
    const auto j = nlohmann::json::parse(out.out);
    const nlohmann::json& arguments = j["arguments"];

    // The reference on seeded inputs, in the same argument order as the kernel ABI.
    const auto reference = reference_outputs(make_task(name, words), arguments, dir, "");
    ASSERT_EQ(reference.size(), arguments.size());
    if (!compile_and_run(dir, file_io_program("k.h", {{j["wrapper"], arguments, ""}}),
                         dir.file("k.o"), dir.file("rt.c"), "cc", "", quote(dir.path().string())))
      continue;
    expect_outputs_match(reference, arguments, dir, "");
  }
}

TEST(BuildCli, BadInputFailsWithOneLineAndWritesNothing) {
  const std::string outs = " -o DIR/k.o --header DIR/k.h --runtime DIR/rt.c";
  const std::string mm = "matmul M=16 N=16 K=16";
  const std::vector<BadCase> cases = {
      {"unknown template", "nosuch M=1" + outs, "unknown template 'nosuch'"},
      {"argument not an integer", "matmul M=abc N=16 K=16" + outs, "M=abc"},
      {"unknown argument", mm + " Q=3" + outs, "Q"},
      {"bad target", mm + " --target 'llvm -mtriple=nonsense-unknown-none'" + outs, "nonsense"},
      {"unknown cpu", mm + " --target 'llvm -mtriple=aarch64-linux-gnu -mcpu=pentium9'" + outs,
       "pentium9"},
      {"malformed log", mm + " --db DIR/garbage.db" + outs, "garbage.db"},
      {"log does not exist", mm + " --db DIR/missing.db" + outs, "no tuning log at DIR/missing.db"},
      {"--require-tuned, no log", mm + " --db DIR/missing.db --require-tuned" + outs,
       "no tuning log at DIR/missing.db"},
      {"--require-tuned with --untuned", mm + " --untuned --require-tuned" + outs,
       "--untuned excludes --require-tuned"},
      {"--untuned with --db", mm + " --untuned --db DIR/empty.db" + outs, "excludes"},
      {"--require-tuned, no record", mm + " --db DIR/empty.db --require-tuned" + outs,
       "no successful record"},
      {"output directory missing",
       mm + " --untuned -o DIR/nodir/k.o --header DIR/k.h --runtime DIR/rt.c", "nodir/k.o"},
      // The object is renamed into place first; the header's rename then fails: the object goes
      // too.
      {"header path is a directory",
       mm + " --untuned -o DIR/k.o --header DIR/sub --runtime DIR/rt.c", "DIR/sub"},
      {"same file twice", mm + " --untuned -o DIR/k.o --header DIR/k.o", "same file"},
      {"empty output path", mm + " --untuned -o '' --header DIR/k.h --runtime DIR/rt.c", "empty"},
      {"empty runtime path", mm + " --untuned -o DIR/k.o --header DIR/k.h --runtime ''", "empty"},
      {"output over the log", mm + " --db DIR/empty.db -o DIR/k.o --header DIR/./empty.db",
       "is the tuning log"},
      {"name starts with a digit", mm + " --untuned --name 9lives" + outs, "9lives"},
      {"name with a dash", mm + " --untuned --name my-kernel" + outs, "my-kernel"},
      {"name is a keyword", mm + " --untuned --name int" + outs, "'int'"},
      {"empty name", mm + " --untuned --name ''" + outs, "--name ''"},
      {"unknown option", mm + " --nope" + outs, "--nope"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir dir;
    write_file(dir.file("garbage.db"), "this is not a SQLite database, only text\n");
    tuning_db::Database::open(dir.file("empty.db"));
    fs::create_directory(dir.path() / "sub");
    write_file(dir.file("k.h"), "/* an older header that a failed build must not touch */\n");
    const auto before = snapshot(dir.path());
    const std::string d = dir.path().string();
    const Output out = ktune_build(replace_dir(c.args, d));
    expect_one_error_line(out, replace_dir(c.message, d));
    EXPECT_TRUE(snapshot(dir.path()) == before)
        << "no file is changed, and no output, temporary or log file is "
           "left behind";
    EXPECT_TRUE(fs::is_empty(dir.path() / "sub"));
  }
}

// The kernel cache's folder as ktune reads it from its environment (KTUNE_KERNEL_CACHE, else
// XDG_CACHE_HOME, else HOME): entries appear there and a second build adds none; "off" writes
// nothing; a folder others may write to is one warning line, the build goes on.
TEST(BuildCli, TheKernelCacheFolderComesFromTheEnvironment) {
  TempDir dir;
  const std::string d = dir.path().string();
  const auto build = [&](const std::string& env, const std::string& out) {
    return shell("cd " + quote(d) + " && env -u KTUNE_KERNEL_CACHE -u XDG_CACHE_HOME HOME=" +
                 quote(d + "/home") + " " + env + " " + quote(KTUNE_BINARY) +
                 " build matmul M=24 N=40 K=16 --untuned -o " + out + ".o --header " + out + ".h");
  };
  const auto entries = [](const fs::path& folder) {
    size_t n = 0;
    if (fs::is_directory(folder))
      for (const auto& e : fs::directory_iterator(folder))
        n += e.path().filename().string().rfind("llvmcache-", 0) == 0;
    return n;
  };

  const Output named = build("KTUNE_KERNEL_CACHE=" + quote(d + "/kc"), "a");
  ASSERT_EQ(named.status, 0) << named.err;
  EXPECT_EQ(named.err, "");
  const size_t stored = entries(dir.path() / "kc");
  EXPECT_GE(stored, 1u);
  const Output again = build("KTUNE_KERNEL_CACHE=" + quote(d + "/kc"), "b");
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(entries(dir.path() / "kc"), stored);
  EXPECT_EQ(read_file(dir.file("a.o")), read_file(dir.file("b.o")));

  ASSERT_EQ(build("XDG_CACHE_HOME=" + quote(d + "/xdg"), "c").status, 0);
  EXPECT_EQ(entries(dir.path() / "xdg/ktune/kernels"), stored);
  ASSERT_EQ(build("", "d").status, 0);
  EXPECT_EQ(entries(dir.path() / "home/.cache/ktune/kernels"), stored);

  const Output off = build("KTUNE_KERNEL_CACHE=off", "e");
  ASSERT_EQ(off.status, 0) << off.err;
  EXPECT_EQ(off.err, "");

  fs::create_directories(dir.path() / "open");
  fs::permissions(dir.path() / "open", fs::perms::all, fs::perm_options::replace);
  const Output open = build("KTUNE_KERNEL_CACHE=" + quote(d + "/open"), "f");
  ASSERT_EQ(open.status, 0) << open.err;
  EXPECT_EQ(testing_cli::count_lines(open.err), 1u) << open.err;
  EXPECT_TRUE(contains(open.err, "kernel cache off: " + d + "/open: group or others may write"))
      << open.err;
  EXPECT_EQ(entries(dir.path() / "open"), 0u);
  EXPECT_EQ(read_file(dir.file("f.o")), read_file(dir.file("a.o")));
}

}  // namespace
}  // namespace ktune::tools
