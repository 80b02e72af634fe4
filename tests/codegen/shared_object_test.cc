// Tests shared-object kernels: linked with ld.lld, loaded with dlopen, run against the
// reference; and the typed errors for code of another architecture and for non-shared objects.
#include "codegen/shared_object.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "codegen/codegen_llvm.h"
#include "codegen/runtime.h"
#include "support/error.h"
#include "te/lower.h"
#include "te/schedule.h"
#include "te/tensor.h"

namespace ktune::codegen {
namespace {

constexpr int64_t kRows = 37, kCols = 29;

// C = 2A + B with a parallel outer loop: the shared object calls ktune_parallel_for, which
// this test program exports (ENABLE_EXPORTS), as ktune-runner and ktune-device do.
Artifact axpb(const Target& target) {
  te::Tensor A = te::placeholder({kRows, kCols}, te::Float(32), "A");
  te::Tensor B = te::placeholder({kRows, kCols}, te::Float(32), "B");
  te::Tensor C = te::compute(
      {kRows, kCols},
      [&](const std::vector<te::Var>& i) { return A(i[0], i[1]) * 2.0f + B(i[0], i[1]); }, "C");
  te::Schedule s = te::create_schedule({C});
  s[C].parallel(s[C].axis(0));
  return build(te::lower(s, {A, B, C}, "axpb"), target);
}

int32_t run(const SharedKernel& k, std::vector<float>& a, std::vector<float>& b,
            std::vector<float>& c) {
  void* args[] = {a.data(), b.data(), c.data()};
  return k.run(args);
}

TEST(SharedObjectTest, ALinkedKernelLoadsAndComputesTheReference) {
  const Artifact object = axpb(Target::host());
  EXPECT_FALSE(is_shared_object(object.object));
  const Artifact linked = link_shared(object);
  ASSERT_TRUE(is_shared_object(linked.object));
  EXPECT_EQ(elf_architecture(linked.object), native_architecture());
  EXPECT_EQ(linked.entry, object.entry);
  EXPECT_EQ(linked.signature, object.signature);

  const SharedKernel kernel = SharedKernel::load(linked);
  std::vector<float> a(kRows * kCols), b(kRows * kCols),
      c(kRows * kCols, std::numeric_limits<float>::quiet_NaN());
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = 0.25f * static_cast<float>(i % 17), b[i] = -1.0f + static_cast<float>(i % 5);
  set_num_threads(2);
  ASSERT_EQ(run(kernel, a, b, c), 0);
  for (size_t i = 0; i < c.size(); ++i) ASSERT_EQ(c[i], 2 * a[i] + b[i]) << "element " << i;
}

TEST(SharedObjectTest, CodeOfAnotherArchitectureIsUnsupportedAndNotLoaded) {
  const Artifact arm =
      link_shared(axpb(Target::parse("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72")));
  EXPECT_EQ(elf_architecture(arm.object), "aarch64");
  try {
    SharedKernel::load(arm);
    FAIL() << "loaded aarch64 code on " << native_architecture();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("aarch64 code"), std::string::npos) << e.what();
  }
}

TEST(SharedObjectTest, ARelocatableObjectOrGarbageIsABuildError) {
  Artifact object = axpb(Target::host());
  for (const std::vector<uint8_t>& bytes :
       {object.object, std::vector<uint8_t>(100, 7), std::vector<uint8_t>{}}) {
    object.object = bytes;
    try {
      SharedKernel::load(object);
      FAIL() << "loaded " << bytes.size() << " bytes that are no shared object";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kBuild) << e.what();
    }
  }
  Artifact linked = link_shared(axpb(Target::host()));
  linked.entry = "no_such_kernel";
  try {
    SharedKernel::load(linked);
    FAIL() << "resolved a missing entry";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBuild);
    EXPECT_NE(std::string(e.what()).find("no_such_kernel"), std::string::npos) << e.what();
  }
}

TEST(SharedObjectTest, AMissingLinkerIsOneClearBuildError) {
  try {
    link_shared(axpb(Target::host()), "ld.no-such-linker");
    FAIL() << "linked without a linker";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kBuild);
    EXPECT_NE(std::string(e.what()).find("ld.no-such-linker"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ktune::codegen
