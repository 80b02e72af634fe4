// Tests Artifact serialization: round trip, and typed errors (never crashes) on damaged blobs.
#include "codegen/artifact.h"

#include <gtest/gtest.h>

#include "support/error.h"

namespace ktune::codegen {
namespace {

Artifact sample() {
  Artifact a;
  for (int i = 0; i < 300; ++i) a.object.push_back(static_cast<uint8_t>(i * 7));
  a.entry = "matmul";
  a.target = "llvm -mtriple=aarch64-unknown-linux-gnu -mcpu=cortex-a72";
  a.llvm_version = "19.1.7";
  a.signature = {
      {{64, 32}, "float32", false}, {{32, 16}, "float32", false}, {{64, 16}, "float64", true}};
  return a;
}

TEST(ArtifactTest, RoundTrips) {
  const Artifact a = sample();
  const std::vector<uint8_t> blob = a.serialize();
  const Artifact b = Artifact::deserialize(blob);
  EXPECT_EQ(a, b);
  EXPECT_EQ(b.signature[2].shape, (std::vector<int64_t>{64, 16}));
  EXPECT_TRUE(b.signature[2].is_output);
  EXPECT_EQ(b.signature[2].num_elements() * b.signature[2].element_bytes(), 64 * 16 * 8);
}

TEST(ArtifactTest, EveryTruncationIsATypedError) {
  const std::vector<uint8_t> blob = sample().serialize();
  for (size_t n = 0; n < blob.size(); ++n) {
    std::vector<uint8_t> cut(blob.begin(), blob.begin() + static_cast<std::ptrdiff_t>(n));
    try {
      Artifact::deserialize(cut);
      FAIL() << "accepted a blob truncated to " << n << " bytes";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    }
  }
}

TEST(ArtifactTest, EveryBitFlipIsATypedError) {
  const std::vector<uint8_t> blob = sample().serialize();
  for (size_t i = 0; i < blob.size(); ++i) {
    std::vector<uint8_t> bad = blob;
    bad[i] ^= 0x10;
    try {
      Artifact::deserialize(bad);
      FAIL() << "accepted a blob with byte " << i << " flipped";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    }
  }
}

TEST(ArtifactTest, HugeLengthIsRejectedWithoutAllocating) {
  std::vector<uint8_t> blob = sample().serialize();
  // The object length field follows the magic (8 + 8 bytes) and the version (8 bytes).
  for (int i = 0; i < 8; ++i) blob[24 + i] = 0xff;
  EXPECT_THROW(Artifact::deserialize(blob), Error);
}

// Found by fuzz/runner_protocol_fuzz: a signature whose extents multiply past 2^63 (signed
// overflow in num_elements, then a bogus allocation in the runner) was accepted.
TEST(ArtifactTest, ArgumentSizesThatOverflowOrAreUnknownAreRefused) {
  auto refused = [](std::vector<int64_t> shape, std::string dtype) {
    Artifact a = sample();
    a.signature[1] = {std::move(shape), std::move(dtype), false};
    try {
      Artifact::deserialize(a.serialize());
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refused({1970470928, 500186415104}, "float32").find("2^48 bytes"), std::string::npos);
  EXPECT_NE(refused({int64_t{1} << 46, 8}, "float32").find("2^48 bytes"),
            std::string::npos);  // 2^51 bytes
  EXPECT_NE(refused({4, 4}, "float128").find("unknown dtype 'float128'"), std::string::npos);
  EXPECT_EQ(refused({int64_t{1} << 23, 1 << 23}, "float32"), "accepted");  // 2^48 bytes exactly
  EXPECT_EQ(refused({0, int64_t{1} << 62}, "float32"), "accepted");        // empty
}

}  // namespace
}  // namespace ktune::codegen
