// Tests Target parsing, host detection, canonical strings and error messages.
#include "codegen/target.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "support/error.h"

namespace ktune::codegen {
namespace {

ErrorKind kind_of(const std::string& text, std::string* message = nullptr) {
  try {
    Target::parse(text);
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  return ErrorKind::kUnknown;
}

TEST(TargetTest, ParsesAArch64String) {
  Target t = Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72 -mattr=+neon");
  EXPECT_EQ(t.triple(), "aarch64-unknown-linux-gnu");
  EXPECT_EQ(t.cpu(), "cortex-a72");
  // cortex-a72 implies NEON, so the canonical form drops the redundant attribute.
  EXPECT_EQ(t.str(), "llvm -mtriple=aarch64-unknown-linux-gnu -mcpu=cortex-a72");
  EXPECT_EQ(t.vector_bits(), 128);
  EXPECT_EQ(t.cores(), 1);
  EXPECT_FALSE(t.is_host_compatible());
  EXPECT_EQ(Target::parse(t.str()).str(), t.str());
  // Option order and redundant attributes do not change the key.
  EXPECT_EQ(Target::parse("llvm -mcpu=cortex-a72 -mtriple=aarch64-linux-gnu").str(), t.str());
}

TEST(TargetTest, KeepsNonDefaultAttributesSorted) {
  Target t = Target::parse(
      "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake -mattr=+avx512f,+avx512bw -num-cores=4");
  EXPECT_EQ(t.str(),
            "llvm -mtriple=x86_64-unknown-linux-gnu -mcpu=skylake -mattr=+avx512bw,+avx512f "
            "-num-cores=4");
  EXPECT_EQ(t.cores(), 4);
  EXPECT_EQ(t.vector_bits(), 512);
  EXPECT_EQ(Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell").vector_bits(), 256);
  EXPECT_EQ(Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell -mattr=-avx").vector_bits(),
            128);
}

TEST(TargetTest, HostIsDetectedAndCompatible) {
  Target h = Target::host();
  EXPECT_TRUE(h.is_host_compatible());
  EXPECT_GE(h.cores(), 1);
  EXPECT_FALSE(h.cpu().empty());
  EXPECT_EQ(Target::parse("host").str(), h.str());
  EXPECT_EQ(Target::parse(h.str()).str(), h.str());
  EXPECT_TRUE(Target::parse(h.str()).is_host_compatible());
#if defined(__AVX512F__) || defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) {
    EXPECT_EQ(h.vector_bits(), 512);
  }
#endif
}

#if defined(__x86_64__)
// A virtual machine may hide system instructions its CPU model implies; kernels never use them, so
// a target that enables them still runs here, as does one with AMD's SSE4a on an Intel host (a
// Zen 4 pack on a Xeon). A compute feature the host lacks does not.
TEST(TargetTest, SystemInstructionsDoNotMakeATargetForeign) {
  const std::string host = Target::host().str();
  auto plus = [&](const std::string& features) {
    const auto at = host.find(" -mattr=");
    return at == std::string::npos ? host + " -mattr=" + features
                                   : host.substr(0, at + 8) + features + "," + host.substr(at + 8);
  };
  const Target system = Target::parse(plus("+rdseed,+rdpid,+xsaves,+shstk,+invpcid,+sse4a"));
  EXPECT_TRUE(system.is_host_compatible()) << system.str();
  EXPECT_EQ(system.cores(), Target::host().cores());
  // AMX tiles: no AMD CPU has them; skipped on an Intel host that does.
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string flags((std::istreambuf_iterator<char>(cpuinfo)), {});
  if (flags.find("amx_tile") == std::string::npos) {
    const Target amx = Target::parse(plus("+amx-tile"));
    EXPECT_FALSE(amx.is_host_compatible()) << amx.str();
    EXPECT_EQ(amx.cores(), 1);
  }
}
#endif

TEST(TargetTest, UnknownTripleListsBackends) {
  std::string msg;
  EXPECT_EQ(kind_of("llvm -mtriple=nosucharch-linux-gnu", &msg), ErrorKind::kUnsupported);
  EXPECT_NE(msg.find("aarch64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("x86-64"), std::string::npos) << msg;
}

TEST(TargetTest, UnknownCpuListsCpusOfTriple) {
  std::string msg;
  EXPECT_EQ(kind_of("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-z99", &msg),
            ErrorKind::kInvalidArgument);
  EXPECT_NE(msg.find("cortex-a72"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("znver4"), std::string::npos) << "x86 CPUs listed for an AArch64 triple";
}

TEST(TargetTest, UnknownAttributeAndOptionsAreInvalid) {
  std::string msg;
  EXPECT_EQ(kind_of("llvm -mtriple=aarch64-linux-gnu -mattr=+warpdrive", &msg),
            ErrorKind::kInvalidArgument);
  EXPECT_NE(msg.find("neon"), std::string::npos) << msg;
  EXPECT_EQ(kind_of("llvm -foo=bar"), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of("cuda"), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of(""), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of("llvm -num-cores=0"), ErrorKind::kInvalidArgument);
}

// Found by scripts/hostile: a repeated option silently overrode the first, -num-cores took any
// int, and errors repeated the whole (possibly huge) target text.
TEST(TargetTest, RepeatedOptionsHugeCoreCountsAndLongTextAreRefusedBriefly) {
  std::string msg;
  EXPECT_EQ(kind_of("llvm -mtriple=x86_64-linux-gnu -mcpu=znver4 -mcpu=haswell", &msg),
            ErrorKind::kInvalidArgument);
  EXPECT_NE(msg.find("-mcpu given twice"), std::string::npos) << msg;
  EXPECT_EQ(kind_of("llvm -mtriple=aarch64-linux-gnu -mtriple=x86_64-linux-gnu"),
            ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of("llvm -mtriple=aarch64-linux-gnu -num-cores=1025", &msg),
            ErrorKind::kInvalidArgument);
  EXPECT_NE(msg.find("from 1 to 1024"), std::string::npos) << msg;
  EXPECT_EQ(Target::parse("llvm -mtriple=aarch64-linux-gnu -num-cores=1024").cores(), 1024);
  const std::string long_text =
      "llvm -mtriple=aarch64-linux-gnu -bogus=" + std::string(100000, 'x');
  EXPECT_EQ(kind_of(long_text, &msg), ErrorKind::kInvalidArgument);
  EXPECT_LT(msg.size(), 400u) << msg.substr(0, 400);
  EXPECT_EQ(kind_of(std::string(100000, 'y'), &msg), ErrorKind::kInvalidArgument);
  EXPECT_LT(msg.size(), 400u) << msg.substr(0, 400);
}

TEST(TargetTest, LlvmVersionIs19) {
  EXPECT_EQ(llvm_version().rfind("19.", 0), 0u) << llvm_version();
}

}  // namespace
}  // namespace ktune::codegen
