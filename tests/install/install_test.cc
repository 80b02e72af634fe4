// End-to-end test of the CMake package: `cmake --install` of this build into a temporary prefix,
// then examples/consumer (an MLP of three kernels pulled in with ktune_add_kernel) configured,
// built and run as an outside project would: against the prefix, with a log tuned by the
// installed ktune. The program checks every layer against plain C loops; this test checks its
// numbers, that the three kernels are built by one `ktune build --manifest` run and are the log's,
// that a changed log rebuilds them, the package version rule, a REQUIRE_TUNED failure, an AArch64
// cross build run under qemu, and kernels asked of a real `ktune server` (SERVER host:port). The
// C++ libraries: every installed header compiles in a consumer, and examples/jit_consumer
// (apply_history_best) built against the prefix serves the tuned, nearest or fallback kernel of a
// log with the right numbers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/cli_util.h"
#include "tests/process_util.h"

namespace {

namespace fs = std::filesystem;
using ktune::testing_cli::Output;
using ktune::testing_cli::quote;
using ktune::testing_cli::shell;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

const std::string kCMake = quote(KTUNE_CMAKE);
const std::string kConsumer = std::string(KTUNE_SOURCE_DIR_PATH) + "/examples/consumer";
const std::string kJitConsumer = std::string(KTUNE_SOURCE_DIR_PATH) + "/examples/jit_consumer";
const std::string kModelConsumer = std::string(KTUNE_SOURCE_DIR_PATH) + "/examples/model_consumer";

// The three workloads of examples/consumer/CMakeLists.txt.
const std::vector<std::string> kWorkloads = {"dense_bias_relu M=32 N=256 K=128",
                                             "dense_bias_relu M=32 N=128 K=256",
                                             "matmul M=32 N=16 K=128"};

// One install and one tuned log for every test: the prefix is what a user's machine would have.
class Installed : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new fs::path(fs::temp_directory_path() /
                         ("ktune-install-test-" + std::to_string(::getpid())));
    fs::remove_all(*root_);
    fs::create_directories(*root_);
    const Output installed = shell(kCMake + " --install " + quote(KTUNE_BUILD_DIR) + " --prefix " +
                                   quote(prefix().string()));
    ASSERT_EQ(installed.status, 0) << installed.out << installed.err;
    for (const auto& w : kWorkloads) {
      const Output tuned = shell(quote((prefix() / "bin/ktune").string()) + " tune " + w +
                                 " --trials 8 --tuner random --json --db " + quote(db().string()));
      ASSERT_EQ(tuned.status, 0) << w << "\n" << tuned.out << tuned.err;
    }
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*root_, ec);
    delete root_;
  }
  void SetUp() override {
    if (std::system("command -v ninja >/dev/null 2>&1") != 0) GTEST_SKIP() << "no ninja";
  }
  static fs::path prefix() { return *root_ / "prefix"; }
  static fs::path db() { return *root_ / "tuned.db"; }
  static fs::path dir(const std::string& name) { return *root_ / name; }

  // Configures examples/consumer into `build` against the prefix (nothing else on the path).
  static Output configure(const fs::path& build, const std::string& extra) {
    return shell(kCMake + " -S " + quote(kConsumer) + " -B " + quote(build.string()) +
                 " -G Ninja -DCMAKE_PREFIX_PATH=" + quote(prefix().string()) + " " + extra);
  }
  static Output build(const fs::path& build) {
    return shell(kCMake + " --build " + quote(build.string()));
  }
  // Configures and builds the consumer into b with the extra cmake flags (its kernels in one
  // manifest step), runs it and checks its numbers.
  static void build_and_run(const fs::path& b, const std::string& extra);

  static fs::path* root_;
};
fs::path* Installed::root_ = nullptr;

// The one `ktune build --manifest` step of the consumer's build (the custom command's comment).
const std::string kManifestStep = "ktune build --manifest ktune_kernels.json: layer1 layer2 head";

// The overview line of kernel `name` in the consumer's combined header.
std::string overview_line(const fs::path& build, const std::string& name) {
  for (const auto& line : lines_of(read_file(build / "ktune_kernels/mlp/ktune_kernels.h")))
    if (line.rfind(" *   " + name + ": ", 0) == 0) return line;
  return "";
}

// The program's report: six layer checks with nothing off, then "mlp ok".
void expect_mlp_ok(const std::string& out) {
  const auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 8u) << out;
  const char* layers[] = {"layer1", "layer2", "head"};
  const int sizes[] = {32 * 256, 32 * 128, 32 * 16};
  for (int t = 0; t < 2; ++t)
    for (int l = 0; l < 3; ++l) {
      const std::string want = std::string(layers[l]) + " threads " + std::to_string(t + 1) +
                               ": checked " + std::to_string(sizes[l]) + " bad 0 max_rel_err ";
      EXPECT_EQ(lines[3 * t + l].rfind(want, 0), 0u) << lines[3 * t + l];
      EXPECT_LT(std::stod(lines[3 * t + l].substr(want.size())), 1e-4);
    }
  EXPECT_EQ(lines[7], "mlp ok");
}

void Installed::build_and_run(const fs::path& b, const std::string& extra) {
  const Output configured = configure(b, extra);
  ASSERT_EQ(configured.status, 0) << configured.out << configured.err;
  const Output built = build(b);
  ASSERT_EQ(built.status, 0) << built.out << built.err;
  EXPECT_TRUE(contains(built.out, kManifestStep)) << built.out;
  const Output ran = shell(quote((b / "mlp").string()));
  EXPECT_EQ(ran.status, 0) << ran.out << ran.err;
  expect_mlp_ok(ran.out);
}

TEST_F(Installed, PrefixHoldsTheCommandsAndThePackage) {
  for (const char* f :
       {"bin/ktune", "bin/ktune-runner", "lib/cmake/ktune/ktuneConfig.cmake",
        "lib/cmake/ktune/ktuneConfigVersion.cmake", "lib/cmake/ktune/ktuneKernels.cmake",
        "lib/cmake/ktune/ktuneLibrary.cmake", "lib/cmake/ktune/ktuneTargets.cmake",
        "lib/libktune_codegen.a", "lib/libktune_deploy.a", "include/ktune/codegen/kernel.h",
        "include/ktune/deploy/history_best.h", "include/ktune/support/error.h"})
    EXPECT_TRUE(fs::is_regular_file(prefix() / f)) << f;
  // LLVM and the generated gRPC code stay private: their headers are not installed.
  for (const char* f :
       {"include/ktune/codegen/llvm_module.h", "include/ktune/rpc_runner/server/device_pool.h",
        "include/ktune/rpc_runner/protocol/ktune.pb.h"})
    EXPECT_FALSE(fs::exists(prefix() / f)) << f;
  // Stripped programs and libraries: the prefix stays small (it was 513 MB with the debug
  // information of a RelWithDebInfo build).
  uintmax_t bytes = 0;
  for (const auto& entry : fs::recursive_directory_iterator(prefix()))
    if (entry.is_regular_file()) bytes += entry.file_size();
  EXPECT_LE(bytes, 150u * 1024 * 1024) << "prefix of " << bytes << " bytes";
  // The package names no path of this build or source tree (the prefix can move or be packaged).
  for (const auto& entry : fs::directory_iterator(prefix() / "lib/cmake/ktune")) {
    const std::string text = read_file(entry.path());
    EXPECT_FALSE(contains(text, KTUNE_BUILD_DIR)) << entry.path();
    EXPECT_FALSE(contains(text, KTUNE_SOURCE_DIR_PATH)) << entry.path();
  }
  const Output version = shell(quote((prefix() / "bin/ktune").string()) + " --version");
  EXPECT_EQ(version.status, 0);
  EXPECT_TRUE(contains(version.out, "0.2.")) << version.out;
  // find_package(ktune 0.2) finds it; 0.3 (a newer minor: another kernel ABI) and 1.0 do not.
  for (const auto& [wanted, ok] :
       std::vector<std::pair<std::string, bool>>{{"0.2", true}, {"0.3", false}, {"1.0", false}}) {
    const fs::path src = dir("version-" + wanted);
    fs::create_directories(src);
    std::ofstream(src / "CMakeLists.txt")
        << "cmake_minimum_required(VERSION 3.25)\nproject(v LANGUAGES NONE)\n"
        << "find_package(ktune " << wanted << " REQUIRED)\n"
        << "message(STATUS \"ktune at ${KTUNE_EXECUTABLE}\")\n";
    const Output out =
        shell(kCMake + " -S " + quote(src.string()) + " -B " + quote((src / "b").string()) +
              " -DCMAKE_PREFIX_PATH=" + quote(prefix().string()));
    EXPECT_EQ(out.status == 0, ok) << wanted << "\n" << out.out << out.err;
    if (ok) {
      EXPECT_TRUE(contains(out.out, "ktune at " + (prefix() / "bin/ktune").string())) << out.out;
    }
  }
}

TEST_F(Installed, ConsumerBuildsWithTunedKernelsAndRebuildsWhenTheLogChanges) {
  const fs::path b = dir("consumer");
  build_and_run(b, "-DKTUNE_DB=" + quote(db().string()) + " -DKTUNE_REQUIRE_TUNED=ON");
  if (HasFatalFailure()) return;
  // The one header names the log's records (REQUIRE_TUNED would have failed otherwise).
  for (const char* name : {"layer1", "layer2", "head"})
    EXPECT_TRUE(contains(overview_line(b, name), ", tuning log " + db().string() + ", record "))
        << name;

  // Nothing to do until the log changes; then every kernel is built again.
  const Output again = build(b);
  ASSERT_EQ(again.status, 0);
  EXPECT_TRUE(contains(again.out, "no work to do")) << again.out;
  // Newer than the kernels just built (the log's own time + 2 s was not, when the configure and
  // build took longer than that since the suite tuned it: Ninja then had nothing to do).
  fs::last_write_time(db(), fs::file_time_type::clock::now() + std::chrono::seconds(2));
  const Output changed = build(b);
  ASSERT_EQ(changed.status, 0) << changed.out << changed.err;
  EXPECT_TRUE(contains(changed.out, kManifestStep)) << changed.out;
}

// examples/model_consumer: small_cnn tuned by the installed ktune, built by ktune_add_model into
// the program, its output against ONNX Runtime's on the same input (1e-4 of the output's
// magnitude).
TEST_F(Installed, ModelConsumerRunsTheTunedModelLikeOnnxRuntime) {
  const fs::path models = dir("models");
  ASSERT_EQ(shell("/usr/bin/python3 " +
                  quote(std::string(KTUNE_SOURCE_DIR_PATH) + "/scripts/make-test-models") + " " +
                  quote(models.string()))
                .status,
            0);
  const std::string onnx = (models / "small_cnn.onnx").string();
  const fs::path log = dir("model.db");
  const Output tuned =
      shell(quote((prefix() / "bin/ktune").string()) + " tune-model " + quote(onnx) +
            " --trials 12 --no-libraries --json --db " + quote(log.string()));
  ASSERT_EQ(tuned.status, 0) << tuned.out << tuned.err;
  const fs::path b = dir("model_consumer");
  const Output configured =
      shell(kCMake + " -S " + quote(kModelConsumer) + " -B " + quote(b.string()) +
            " -G Ninja -DCMAKE_PREFIX_PATH=" + quote(prefix().string()) +
            " -DKTUNE_MODEL=" + quote(onnx) + " -DKTUNE_DB=" + quote(log.string()));
  ASSERT_EQ(configured.status, 0) << configured.out << configured.err;
  const Output built = build(b);
  ASSERT_EQ(built.status, 0) << built.out << built.err;
  EXPECT_TRUE(contains(built.out, "ktune build --model")) << built.out;
  EXPECT_TRUE(contains(read_file(b / "ktune_models/classify/net.h"), "[tuned"));

  std::vector<float> input(16 * 16 * 16);
  for (size_t i = 0; i < input.size(); ++i)
    input[i] = static_cast<float>((i * 37 % 101) / 50.0 - 1.0);
  const fs::path in = dir("model_in.bin"), out = dir("model_out.bin"), ref = dir("model_ref.bin");
  std::ofstream(in, std::ios::binary)
      .write(reinterpret_cast<const char*>(input.data()),
             static_cast<std::streamsize>(input.size() * 4));
  const Output ran = shell(quote((b / "classify").string()) + " " + quote(in.string()) + " " +
                           quote(out.string()));
  ASSERT_EQ(ran.status, 0) << ran.out << ran.err;
  EXPECT_TRUE(contains(ran.out, "class ")) << ran.out;
  const Output ort =
      shell("NODE_PATH=" + quote(std::string(KTUNE_ORT_DIR) + "/node_modules") + " node " +
            quote(std::string(KTUNE_SOURCE_DIR_PATH) + "/scripts/ort-run.js") + " " + quote(onnx) +
            " " + quote(in.string()) + " " + quote(ref.string()));
  ASSERT_EQ(ort.status, 0) << ort.err;
  const std::string a = read_file(out), r = read_file(ref);
  ASSERT_EQ(a.size(), r.size());
  ASSERT_EQ(a.size(), 16u * 4);
  double max_ref = 0, max_diff = 0;
  for (size_t i = 0; i < a.size() / 4; ++i) {
    const float x = reinterpret_cast<const float*>(a.data())[i],
                y = reinterpret_cast<const float*>(r.data())[i];
    max_ref = std::max(max_ref, std::abs(static_cast<double>(y)));
    max_diff = std::max(max_diff, std::abs(static_cast<double>(x) - y));
  }
  EXPECT_LE(max_diff / max_ref, 1e-4);
}

TEST_F(Installed, RequireTunedWithoutARecordStopsTheBuildNamingTheKernel) {
  const fs::path b = dir("untuned");
  const fs::path empty = dir("other.db");
  // A log with a record of another workload only.
  const Output tuned =
      shell(quote((prefix() / "bin/ktune").string()) + " tune matmul M=16 N=16 K=16 --trials 2 " +
            "--tuner random --json --db " + quote(empty.string()));
  ASSERT_EQ(tuned.status, 0) << tuned.err;
  ASSERT_EQ(
      configure(b, "-DKTUNE_DB=" + quote(empty.string()) + " -DKTUNE_REQUIRE_TUNED=ON").status, 0);
  const Output built = shell(kCMake + " --build " + quote(b.string()) + " -- -k 0");
  EXPECT_NE(built.status, 0);
  EXPECT_TRUE(contains(built.out, kManifestStep)) << built.out;
  EXPECT_TRUE(contains(
      built.out + built.err,
      "kernel 'layer1' (entry 0): no successful record of dense_bias_relu(M=32,N=256,K=128"))
      << built.out << built.err;
  for (const char* f : {"libktune_kernels.a", "ktune_kernels.h", "ktune_runtime.c"})
    EXPECT_FALSE(fs::exists(b / "ktune_kernels/mlp" / f))
        << f << ": a failed kernel build leaves nothing";
  EXPECT_FALSE(fs::exists(b / "mlp"));
}

bool have_aarch64_tools() {
  return std::system(
             "command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 && "
             "command -v qemu-aarch64-static >/dev/null 2>&1") == 0;
}

// A CMake toolchain file for Debian's AArch64 cross compiler, written into `path`.
fs::path aarch64_toolchain(const fs::path& path) {
  std::ofstream(path) << "set(CMAKE_SYSTEM_NAME Linux)\nset(CMAKE_SYSTEM_PROCESSOR aarch64)\n"
                      << "set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)\n"
                      << "set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)\n"
                      << "set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)\n"
                      << "set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)\n"
                      << "set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)\n"
                      // the host's ktune package is found through CMAKE_PREFIX_PATH as is
                      << "set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)\n";
  return path;
}

// The ELF machine of an executable (e_machine, little-endian, at byte 18): 183 is AArch64.
int elf_machine(const std::string& exe) {
  if (exe.size() < 20 || exe.substr(0, 4) !=
                             "\x7f"
                             "ELF")
    return -1;
  return static_cast<unsigned char>(exe[18]) | static_cast<unsigned char>(exe[19]) << 8;
}

TEST_F(Installed, AArch64CrossBuildRunsUnderQemu) {
  if (!have_aarch64_tools()) GTEST_SKIP() << "no aarch64-linux-gnu-gcc or qemu-aarch64-static";
  const fs::path toolchain = aarch64_toolchain(dir("aarch64.cmake"));
  const fs::path b = dir("cross");
  // The log has host records only: the AArch64 kernels are the templates' fallbacks.
  const Output configured =
      configure(b, "-DCMAKE_TOOLCHAIN_FILE=" + quote(toolchain.string()) +
                       " -DKTUNE_DB=" + quote(db().string()) +
                       " '-DKTUNE_TARGET=llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72'");
  ASSERT_EQ(configured.status, 0) << configured.out << configured.err;
  const Output built = build(b);
  ASSERT_EQ(built.status, 0) << built.out << built.err;
  EXPECT_EQ(elf_machine(read_file(b / "mlp")), 183);
  const Output ran =
      shell("qemu-aarch64-static -L /usr/aarch64-linux-gnu " + quote((b / "mlp").string()));
  EXPECT_EQ(ran.status, 0) << ran.out << ran.err;
  expect_mlp_ok(ran.out);
}

// A C++ project that names no component gets ktune::library; each installed header compiles on its
// own include path (what a header includes is installed too).
TEST_F(Installed, EveryInstalledHeaderCompilesInAConsumer) {
  const fs::path src = dir("headers");
  fs::create_directories(src);
  std::ofstream(src / "CMakeLists.txt")
      << "cmake_minimum_required(VERSION 3.25)\nproject(h LANGUAGES CXX)\n"
      << "find_package(ktune 0.2 REQUIRED)\n"  // C++20 comes with the target
      << "add_library(headers OBJECT headers.cc)\n"
      << "target_link_libraries(headers PRIVATE ktune::library)\n";
  std::ofstream cc(src / "headers.cc");
  int count = 0;
  for (const auto& entry : fs::recursive_directory_iterator(prefix() / "include/ktune"))
    if (entry.path().extension() == ".h") {
      cc << "#include <ktune/" << fs::relative(entry.path(), prefix() / "include/ktune").string()
         << ">\n";
      ++count;
    }
  cc.close();
  EXPECT_GT(count, 50);
  const Output configured =
      shell(kCMake + " -S " + quote(src.string()) + " -B " + quote((src / "b").string()) +
            " -G Ninja -DCMAKE_PREFIX_PATH=" + quote(prefix().string()));
  ASSERT_EQ(configured.status, 0) << configured.out << configured.err;
  const Output built = build(src / "b");
  EXPECT_EQ(built.status, 0) << built.out << built.err;
}

// Without one of the libraries' dependencies (SQLite3 hidden from find_package here), a C++
// project still gets the commands and ktune_add_kernel, told why there is no ktune::library;
// one that asks for the component stops, naming what is missing.
TEST_F(Installed, AMissingLibraryDependencyIsNamed) {
  for (const bool required : {false, true}) {
    const fs::path src = dir(required ? "no-sqlite-required" : "no-sqlite");
    fs::create_directories(src);
    std::ofstream(src / "CMakeLists.txt")
        << "cmake_minimum_required(VERSION 3.25)\nproject(n LANGUAGES CXX)\n"
        << "find_package(ktune 0.2 REQUIRED" << (required ? " COMPONENTS library" : "")
        << ")\nif(TARGET ktune::library OR NOT COMMAND ktune_add_kernel)\n"
        << "  message(FATAL_ERROR \"unexpected targets\")\nendif()\n";
    const Output out = shell(
        kCMake + " -S " + quote(src.string()) + " -B " + quote((src / "b").string()) +
        " -DCMAKE_DISABLE_FIND_PACKAGE_SQLite3=ON -DCMAKE_PREFIX_PATH=" + quote(prefix().string()));
    EXPECT_EQ(out.status == 0, !required) << out.out << out.err;
    EXPECT_TRUE(contains(out.out + out.err, "no ktune::library")) << out.out << out.err;
    EXPECT_TRUE(contains(out.out + out.err, "missing SQLite3 (libsqlite3-dev)"))
        << out.out << out.err;
  }
}

// What examples/jit_consumer prints: the source, a note, the check, the checksum, "jit ok".
struct JitRun {
  std::string source;
  std::string note;
  double checksum = 0;
};
JitRun expect_jit_ok(const Output& ran) {
  JitRun run;
  EXPECT_EQ(ran.status, 0) << ran.out << ran.err;
  const auto lines = lines_of(ran.out);
  EXPECT_EQ(lines.size(), 5u) << ran.out;
  if (lines.size() != 5u) return run;
  EXPECT_EQ(lines[0].rfind("source ", 0), 0u) << lines[0];
  run.source = lines[0].substr(7);
  EXPECT_EQ(lines[1].rfind("note ", 0), 0u) << lines[1];
  run.note = lines[1].substr(5);
  EXPECT_EQ(lines[2].rfind("checked 4096 bad 0 max_rel_err ", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3].rfind("checksum ", 0), 0u) << lines[3];
  run.checksum = std::stod(lines[3].substr(9));
  EXPECT_EQ(lines[4], "jit ok");
  return run;
}

TEST_F(Installed, JitConsumerRunsTheTunedTheNearestOrTheFallbackKernel) {
  const fs::path b = dir("jit");
  const Output configured =
      shell(kCMake + " -S " + quote(kJitConsumer) + " -B " + quote(b.string()) +
            " -G Ninja -DCMAKE_PREFIX_PATH=" + quote(prefix().string()));
  ASSERT_EQ(configured.status, 0) << configured.out << configured.err;
  const Output built = build(b);
  ASSERT_EQ(built.status, 0) << built.out << built.err;
  const std::string exe = quote((b / "jit_consumer").string());
  const std::string ktune = quote((prefix() / "bin/ktune").string());

  // A log with the example's workload (matmul 64^3): its best record, checked against the loop.
  const fs::path tuned = dir("jit-tuned.db");
  ASSERT_EQ(shell(ktune + " tune matmul M=64 N=64 K=64 --trials 6 --tuner random --json --db " +
                  quote(tuned.string()))
                .status,
            0);
  const JitRun from_tuned = expect_jit_ok(shell(exe + " " + quote(tuned.string())));
  EXPECT_EQ(from_tuned.source, "tuned");
  EXPECT_EQ(from_tuned.note.rfind("record ", 0), 0u) << from_tuned.note;
  EXPECT_TRUE(contains(from_tuned.note, tuned.string())) << from_tuned.note;

  // The suite's log has matmul 32x16x128 but not 64^3: that workload's best config, valid here.
  const JitRun from_nearest = expect_jit_ok(shell(exe + " " + quote(db().string())));
  EXPECT_EQ(from_nearest.source, "nearest");
  EXPECT_TRUE(contains(from_nearest.note, "matmul(M=32,N=16,K=128")) << from_nearest.note;

  // A log of another template only: nothing near either, so the template's fallback.
  const fs::path other = dir("jit-other.db");
  ASSERT_EQ(
      shell(ktune + " tune dense_bias_relu M=16 N=16 K=16 --trials 2 --tuner random --json --db " +
            quote(other.string()))
          .status,
      0);
  const JitRun from_fallback = expect_jit_ok(shell(exe + " " + quote(other.string())));
  EXPECT_EQ(from_fallback.source, "fallback");
  // Same data, same product: the three kernels agree to float rounding.
  for (const JitRun& run : {from_nearest, from_fallback})
    EXPECT_NEAR(run.checksum, from_tuned.checksum, 1e-3 * (1 + std::abs(from_tuned.checksum)))
        << run.source;

  // A missing log: one line naming it, exit 1, no kernel run.
  const Output missing = shell(exe + " " + quote(dir("no-such.db").string()));
  EXPECT_EQ(missing.status, 1);
  EXPECT_EQ(lines_of(missing.err).size(), 1u) << missing.err;
  EXPECT_TRUE(contains(missing.err, "no-such.db")) << missing.err;
  EXPECT_TRUE(missing.out.empty()) << missing.out;
}

// ktune_add_kernel(... SERVER host:port): a real `ktune server` on loopback whose log has the
// consumer's records; the kernels are asked of it and are the log's best.
TEST_F(Installed, ConsumerBuildsWithKernelsFromATuningServer) {
  namespace tp = ktune::testing_process;
  const fs::path served = dir("served.db");
  fs::copy_file(db(), served, fs::copy_options::overwrite_existing);
  const fs::path logs = dir("server-logs");
  fs::create_directories(logs);
  // Port 0: the server picks a free port and prints it.
  tp::Child server(
      {(prefix() / "bin/ktune").string(), "server", "--port", "0", "--db", served.string()},
      logs / "server.out", logs / "server.err");
  const std::string address = tp::wait_for_address(logs / "server.out");
  ASSERT_FALSE(address.empty()) << tp::read_file(logs / "server.err");
  ASSERT_EQ(address.rfind("127.0.0.1:", 0), 0u) << address;

  const fs::path b = dir("served-consumer");
  build_and_run(b, "-DKTUNE_SERVER=" + address + " -DKTUNE_REQUIRE_TUNED=ON");
  if (HasFatalFailure()) return;
  // Each kernel has the config of the server log's best record: the one a build from the log
  // file itself serves.
  const std::string ktune = quote((prefix() / "bin/ktune").string());
  const std::string header = read_file(b / "ktune_kernels/mlp/ktune_kernels.h");
  const char* names[] = {"layer1", "layer2", "head"};
  for (size_t i = 0; i < kWorkloads.size(); ++i) {
    const std::string scratch = dir("scratch").string();
    const Output local = shell(ktune + " build " + kWorkloads[i] + " --json --require-tuned --db " +
                               quote(served.string()) + " -o " + quote(scratch + ".o") +
                               " --header " + quote(scratch + ".h"));
    ASSERT_EQ(local.status, 0) << local.err;
    const auto j = nlohmann::json::parse(local.out);
    EXPECT_TRUE(contains(header, " * config:   " + j["config"].dump() + "\n")) << names[i] << "\n"
                                                                               << header;
    EXPECT_TRUE(contains(overview_line(b, names[i]), ", tuning server " + address + ": "))
        << overview_line(b, names[i]);
  }
  // The server going away after the build changes nothing: the kernels are in the program.
  server.kill(SIGTERM);
  EXPECT_EQ(shell(quote((b / "mlp").string())).status, 0);
}

// ktune_add_kernel(... SERVER host:port DEVICE_KEY rk3399) with TARGET host: the kernels are
// built for the target of that key's devices, AArch64 boards no longer attached whose records the
// server's log holds, with the logged configs; the program runs under qemu.
TEST_F(Installed, ADeviceKeyBuildsForTheTargetOfItsDevices) {
  namespace tp = ktune::testing_process;
  if (!have_aarch64_tools()) GTEST_SKIP() << "no aarch64-linux-gnu-gcc or qemu-aarch64-static";
  const std::string ktune = quote((prefix() / "bin/ktune").string());
  const std::string a72 = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
  // The boards' log: per kernel, one record of its AArch64 fallback config, measured on rk3399.
  const Output exported = shell(ktune + " db export --db " + quote(db().string()));
  ASSERT_EQ(exported.status, 0) << exported.err;
  const fs::path lines = dir("boards.jsonl"), boards = dir("boards.db");
  std::vector<std::string> configs;
  {
    std::ofstream out(lines);
    for (const auto& w : kWorkloads) {
      const Output fallback = shell(ktune + " best " + w + " --target " + quote(a72) +
                                    " --json --db " + quote(db().string()));
      ASSERT_EQ(fallback.status, 0) << fallback.err;
      const auto f = nlohmann::json::parse(fallback.out);
      bool written = false;
      for (const auto& line : lines_of(exported.out)) {
        auto r = nlohmann::json::parse(line);
        if (r["input"][1] != f["workload"] || written) continue;
        r["input"][0] = f["target"];
        r["config"] = f["fallback"];
        r["meta"]["device"] = "rk3399";
        r["meta"]["tuner"] = "seeded";
        r["meta"].erase("retimed");
        r["result"][1] = "";
        r["result"][0] = {1e-4};
        out << r.dump() << "\n";
        configs.push_back(f["fallback"].dump());
        written = true;
      }
      ASSERT_TRUE(written) << w;
    }
  }
  const Output imported =
      shell(ktune + " db import --db " + quote(boards.string()) + " " + quote(lines.string()));
  ASSERT_EQ(imported.status, 0) << imported.out << imported.err;
  const fs::path logs = dir("boards-logs");
  fs::create_directories(logs);
  tp::Child server(
      {(prefix() / "bin/ktune").string(), "server", "--port", "0", "--db", boards.string()},
      logs / "server.out", logs / "server.err");
  const std::string address = tp::wait_for_address(logs / "server.out");
  ASSERT_FALSE(address.empty()) << tp::read_file(logs / "server.err");

  const fs::path b = dir("boards-consumer");
  const Output configured = configure(
      b,
      "-DCMAKE_TOOLCHAIN_FILE=" + quote(aarch64_toolchain(dir("aarch64-boards.cmake")).string()) +
          " -DKTUNE_SERVER=" + address + " -DKTUNE_DEVICE_KEY=rk3399 -DKTUNE_REQUIRE_TUNED=ON");
  ASSERT_EQ(configured.status, 0) << configured.out << configured.err;
  const Output built = build(b);
  ASSERT_EQ(built.status, 0) << built.out << built.err;
  EXPECT_EQ(elf_machine(read_file(b / "mlp")), 183);
  const std::string header = read_file(b / "ktune_kernels/mlp/ktune_kernels.h");
  for (const auto& config : configs)
    EXPECT_TRUE(contains(header, " * config:   " + config + "\n")) << config << "\n" << header;
  const Output ran =
      shell("qemu-aarch64-static -L /usr/aarch64-linux-gnu " + quote((b / "mlp").string()));
  EXPECT_EQ(ran.status, 0) << ran.out << ran.err;
  expect_mlp_ok(ran.out);
  server.kill(SIGTERM);
}

}  // namespace
