// Tests codegen::build_all (several kernels in one LLVM session: the same objects as build() one
// by one) and codegen::static_library (an ar archive, one member per
// kernel, with a symbol index; bad input refused).
#include "codegen/archive.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "codegen/codegen_llvm.h"
#include "codegen/target.h"
#include "support/error.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::codegen {
namespace {

using namespace ktune::te;  // NOLINT

// C = A * B (m x n, inner k), split and vectorized so that the objects differ by more than a name.
LoweredFunc matmul(const std::string& name, int64_t m, int64_t n, int64_t k) {
  Tensor a = placeholder({m, k}, Float(32), "A"), b = placeholder({k, n}, Float(32), "B");
  IterVar kk = reduce_axis({0, k}, "k");
  Tensor c = compute(
      {m, n}, [&](Var i, Var j) { return sum(a(i, kk) * b(kk, j), kk); }, "C");
  Schedule s = create_schedule({c});
  auto [jo, ji] = s[c].split(s[c].axis(1), 8);
  s[c].reorder({s[c].axis(0), jo, s[c].reduce_axis(0), ji});
  s[c].vectorize(ji);
  return lower(s, {a, b, c}, name);
}

// The member names of a GNU ar archive, in order ("/" is the symbol index, "//" long names).
std::vector<std::string> member_names(const std::vector<uint8_t>& ar) {
  std::vector<std::string> names;
  const std::string bytes(ar.begin(), ar.end());
  if (bytes.rfind("!<arch>\n", 0) != 0) return names;
  size_t at = 8;
  while (at + 60 <= bytes.size()) {
    std::string name = bytes.substr(at, 16);
    name.erase(name.find_last_not_of(' ') + 1);
    const size_t size = std::stoul(bytes.substr(at + 48, 10));
    names.push_back(name);
    at += 60 + size + (size % 2);
  }
  return names;
}

TEST(BuildAll, GivesTheObjectsOfBuildOneByOne) {
  const Target host = Target::host();
  const std::vector<LoweredFunc> fs = {matmul("mm_a", 16, 32, 8), matmul("mm_b", 8, 64, 24),
                                       matmul("mm_c", 4, 8, 4)};
  const std::vector<Artifact> together = build_all(fs, host);
  ASSERT_EQ(together.size(), fs.size());
  for (size_t i = 0; i < fs.size(); ++i) {
    SCOPED_TRACE(fs[i].name);
    const Artifact alone = build(fs[i], host);
    EXPECT_EQ(together[i].entry, fs[i].name);
    EXPECT_EQ(together[i].signature, alone.signature);
    // Same LLVM, same options, a fresh module each: the very same object bytes.
    EXPECT_TRUE(together[i].object == alone.object);
  }
}

TEST(StaticLibrary, OneMemberPerKernelAfterTheSymbolIndex) {
  const std::vector<Artifact> artifacts =
      build_all({matmul("first", 8, 16, 8), matmul("second", 4, 8, 4)},
                Target::parse("llvm -mtriple=aarch64-linux-gnu"));
  const std::vector<uint8_t> ar = static_library(artifacts);
  EXPECT_EQ(member_names(ar), (std::vector<std::string>{"/", "first.o/", "second.o/"}));
  // The symbol index names both kernels.
  const std::string bytes(ar.begin(), ar.end());
  EXPECT_NE(bytes.find(std::string("first\0", 6)), std::string::npos);
  EXPECT_NE(bytes.find(std::string("second\0", 7)), std::string::npos);
}

TEST(StaticLibrary, RefusesNoKernelsAndTwoOfOneName) {
  const Artifact a = build(matmul("dup", 4, 8, 4), Target::host());
  for (const std::vector<Artifact>& bad : {std::vector<Artifact>{}, std::vector<Artifact>{a, a}}) {
    try {
      (void)static_library(bad);
      FAIL() << "no error for " << bad.size() << " artifacts";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
    }
  }
}

}  // namespace
}  // namespace ktune::codegen
