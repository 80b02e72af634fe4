// Tests where ktune places a buffer: 64-byte (or page) aligned, and one of 2 MiB or more on a
// 2 MiB boundary advised to huge pages, whether allocated directly or as a te::HostBuffer (the
// buffers kernels are checked and raced with).
#include "support/placed_buffer.h"

#include <gtest/gtest.h>

#include <malloc.h>

#include <cstdint>
#include <cstdlib>

#include "te/host_buffer.h"
#include "tests/support/huge_pages.h"

namespace ktune {
namespace {

// Large buffers each get a mapping of their own (no dynamic threshold that would serve them from
// a heap region an earlier test advised), so "hg" on a buffer's mapping is that buffer's advice.
[[maybe_unused]] const int kOwnMappings = mallopt(M_MMAP_THRESHOLD, 1 << 20);

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(PlacedBuffer, SmallBuffersTakeTheirAlignmentAndLargeOnesAHugePage) {
  EXPECT_EQ(buffer_placement(0, 64).size, 64);
  EXPECT_EQ(buffer_placement(65, 64).size, 128);
  EXPECT_EQ(buffer_placement(65, 4096).size, 4096);
  const BufferPlacement below = buffer_placement(kHugePageBytes - 1, 64);
  EXPECT_FALSE(below.huge);
  EXPECT_EQ(below.align, 64);
  EXPECT_EQ(below.size, kHugePageBytes);
  const BufferPlacement at = buffer_placement(kHugePageBytes, 64);
  EXPECT_TRUE(at.huge);
  EXPECT_EQ(at.align, kHugePageBytes);
  EXPECT_EQ(at.size, kHugePageBytes);
  EXPECT_EQ(buffer_placement(kHugePageBytes + 1, 4096).size, 2 * kHugePageBytes);
}

TEST(PlacedBuffer, LargeBuffersAreAdvisedToHugePages) {
  const PlacedBuffer big = make_placed(3 << 20);
  const PlacedBuffer small = make_placed(1000);
  EXPECT_EQ(address(big.get()) % kHugePageBytes, 0u);
  EXPECT_EQ(address(small.get()) % 64, 0u);
  if (testing::kernel_has_huge_pages()) {
    EXPECT_TRUE(testing::advised_huge(big.get()));
  }
  EXPECT_FALSE(testing::advised_huge(small.get()));
}

TEST(PlacedBuffer, HostBuffersArePlacedSoAndZeroed) {
  te::HostBuffer big({3, 1 << 18}, te::Float(32));  // 3 MiB
  EXPECT_EQ(address(big.data()) % kHugePageBytes, 0u);
  if (testing::kernel_has_huge_pages()) {
    EXPECT_TRUE(testing::advised_huge(big.data()));
  }
  for (int64_t i = 0; i < big.num_elements(); i += 4099) ASSERT_EQ(big.get(i), 0.0) << i;
  EXPECT_EQ(big.get(big.num_elements() - 1), 0.0);
  te::HostBuffer small({5}, te::Int(8));
  EXPECT_EQ(address(small.data()) % 64, 0u);
  EXPECT_FALSE(testing::advised_huge(small.data()));
  te::HostBuffer empty({0}, te::Float(32));
  EXPECT_NE(empty.data(), nullptr);
}

}  // namespace
}  // namespace ktune
