// Tests where a model library's create places the arena and the weights: on a page, and a buffer of
// 2 MiB or more on a 2 MiB boundary advised to huge pages (embedded weights copied there), with the
// weights' bytes as built, whether embedded or read from a file.
#include "codegen/model_driver.h"

#include <gtest/gtest.h>

#include <malloc.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/shared_object.h"
#include "tests/support/huge_pages.h"

namespace ktune::codegen {
namespace {

// Large buffers each get a mapping of their own (no dynamic threshold that would serve them from
// a heap region an earlier test advised), so "hg" on a buffer's mapping is that buffer's advice.
// glibc's malloc takes the setting; a sanitizer's allocator refuses it and maps large chunks apart.
[[maybe_unused]] const int kOwnMappings = mallopt(M_MMAP_THRESHOLD, 1 << 20);

// The driver's context as its IR lays it out: the arena, the weights in use, the weights it owns.
struct Context {
  void* arena;
  void* weights;
  void* owned;
};

std::vector<uint8_t> pattern(int64_t bytes) {
  std::vector<uint8_t> v(static_cast<size_t>(bytes));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>((i * 131 + 7) % 251);
  return v;
}

using testing::advised_huge;
using testing::kernel_has_huge_pages;

// A model library with no kernel calls: only its create, run and destroy.
struct Library {
  DriverSpec spec;
  SharedLibrary lib;
  explicit Library(DriverSpec s)
      : spec(std::move(s)),
        lib(SharedLibrary::load(
            link_shared_objects({build_model_driver(spec, Target::parse("host"))}))) {}
  void destroy(void* ctx) const {
    reinterpret_cast<void (*)(void*)>(lib.symbol(spec.name + "_destroy"))(ctx);
  }
};

DriverSpec spec(const std::string& name, int64_t arena, int64_t weights, bool embed) {
  DriverSpec s;
  s.name = name;
  s.arena_bytes = arena;
  s.weights = pattern(weights);
  s.embed_weights = embed;
  return s;
}

TEST(ModelDriver, BufferPlacement) {
  EXPECT_EQ(model_buffer_placement(0).size, kModelPageAlign);
  EXPECT_EQ(model_buffer_placement(4097).size, 2 * kModelPageAlign);
  EXPECT_FALSE(model_buffer_placement(kModelHugePage - 1).huge);
  const ModelBufferPlacement big = model_buffer_placement(kModelHugePage + 1);
  EXPECT_TRUE(big.huge);
  EXPECT_EQ(big.align, kModelHugePage);
  EXPECT_EQ(big.size, 2 * kModelHugePage);
}

TEST(ModelDriver, LargeEmbeddedWeightsAreCopiedToHugePages) {
  const Library l(spec("big", 3 << 20, (3 << 20) + 192, true));
  auto* ctx = static_cast<Context*>(reinterpret_cast<void* (*)()>(l.lib.symbol("big_create"))());
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ctx->arena) % kModelHugePage, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ctx->weights) % kModelHugePage, 0u);
  EXPECT_EQ(ctx->weights, ctx->owned);  // a copy, freed by destroy
  EXPECT_EQ(std::memcmp(ctx->weights, l.spec.weights.data(), l.spec.weights.size()), 0);
  if (kernel_has_huge_pages()) {
    EXPECT_TRUE(advised_huge(ctx->arena));
    EXPECT_TRUE(advised_huge(ctx->weights));
  }
  l.destroy(ctx);
}

TEST(ModelDriver, SmallEmbeddedWeightsStayInPlaceOnAPage) {
  const Library l(spec("small", 5000, 9000, true));
  auto* ctx = static_cast<Context*>(reinterpret_cast<void* (*)()>(l.lib.symbol("small_create"))());
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ctx->arena) % kModelPageAlign, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ctx->weights) % kModelPageAlign, 0u);
  EXPECT_EQ(ctx->owned, nullptr);  // the library's own bytes
  EXPECT_EQ(std::memcmp(ctx->weights, l.spec.weights.data(), l.spec.weights.size()), 0);
  EXPECT_FALSE(advised_huge(ctx->arena));
  l.destroy(ctx);
}

TEST(ModelDriver, LargeWeightsFileIsReadIntoHugePages) {
  const Library l(spec("file", 1000, (2 << 20) + 64, false));
  const std::string path =
      (std::filesystem::temp_directory_path() / ("ktune_driver_" + std::to_string(getpid())))
          .string();
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(l.spec.weights.data()),
             static_cast<std::streamsize>(l.spec.weights.size()));
  auto* ctx = static_cast<Context*>(
      reinterpret_cast<void* (*)(const char*)>(l.lib.symbol("file_create"))(path.c_str()));
  std::filesystem::remove(path);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ctx->weights) % kModelHugePage, 0u);
  EXPECT_EQ(std::memcmp(ctx->weights, l.spec.weights.data(), l.spec.weights.size()), 0);
  if (kernel_has_huge_pages()) {
    EXPECT_TRUE(advised_huge(ctx->weights));
  }
  EXPECT_FALSE(advised_huge(ctx->arena));  // 1000 bytes: a page
  l.destroy(ctx);
}

TEST(ModelDriver, AllocatedModelBuffersArePlacedAsTheDriversAre) {
  void* big = allocate_model_buffer(kModelHugePage);
  void* small = allocate_model_buffer(100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big) % kModelHugePage, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % kModelPageAlign, 0u);
  if (kernel_has_huge_pages()) {
    EXPECT_TRUE(advised_huge(big));
  }
  std::free(big);
  std::free(small);
}

}  // namespace
}  // namespace ktune::codegen
