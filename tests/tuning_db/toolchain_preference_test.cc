// Tests of top_k_preferring_toolchain: the records of the asked LLVM version first (even when an
// older one's are faster), every toolchain's when it has none, and the query still applied.
#include <gtest/gtest.h>

#include <vector>

#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"
#include "tuning_db/toolchain_preference.h"

namespace ktune::tuning_db {
namespace {

using testing::kHost;
using testing::make_record;
using testing::matmul_key;
using testing::TempDir;

const TargetKey kOld{kHost.target, "18.1.8"};

std::vector<int64_t> indices_of(const std::vector<Record>& records) {
  std::vector<int64_t> out;
  for (const auto& r : records) out.push_back(r.config_index);
  return out;
}

TEST(ToolchainPreference, ServesTheAskedToolchainFirstElseAny) {
  TempDir dir;
  auto db = Database::open(dir.file("log.db"));
  // matmul 64: the older toolchain's records are the fastest; matmul 32: only the older one's.
  db.add({make_record(64, 1, {1e-3}, kOld), make_record(64, 2, {3e-3}, kHost),
          make_record(64, 3, {2e-3}, kHost), make_record(64, 4, {2e-3}, kHost, "other"),
          make_record(32, 5, {1e-3}, kOld), make_record(32, 6, {2e-3}, kOld)});
  const RecordQuery any;
  EXPECT_EQ(indices_of(top_k_preferring_toolchain(db, matmul_key(64), kHost.target,
                                                  kHost.llvm_version, 5, any)),
            (std::vector<int64_t>{3, 4, 2}));
  EXPECT_EQ(indices_of(top_k_preferring_toolchain(db, matmul_key(32), kHost.target,
                                                  kHost.llvm_version, 5, any)),
            (std::vector<int64_t>{5, 6}));
  // The query (here: one device key) applies to both steps.
  RecordQuery x86;
  x86.device_key = "x86";
  EXPECT_EQ(indices_of(top_k_preferring_toolchain(db, matmul_key(64), kHost.target,
                                                  kHost.llvm_version, 1, x86)),
            (std::vector<int64_t>{3}));
  RecordQuery other;
  other.device_key = "nobody";
  EXPECT_TRUE(
      top_k_preferring_toolchain(db, matmul_key(64), kHost.target, kHost.llvm_version, 1, other)
          .empty());
  // Another target: nothing, whatever the toolchain.
  EXPECT_TRUE(
      top_k_preferring_toolchain(db, matmul_key(64), "llvm -mtriple=aarch64-linux-gnu", "", 1, any)
          .empty());
}

}  // namespace
}  // namespace ktune::tuning_db
