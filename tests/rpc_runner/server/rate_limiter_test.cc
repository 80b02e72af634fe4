// Tests of RateLimiter: a burst of the limit, then refusals with the wait, a refill at the
// limit's rate, buckets apart per client, and no limit at 0.
#include "rpc_runner/server/rate_limiter.h"

#include <gtest/gtest.h>

namespace ktune::rpc_runner {
namespace {

using std::chrono::seconds;

TEST(RateLimiter, ABurstOfTheLimitThenRefusalsUntilTheBucketRefills) {
  RateLimiter limiter(6);  // one request every 10 s, a burst of 6
  const auto t0 = RateLimiter::Clock::time_point{} + seconds(1000);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(limiter.take("alice", t0), 0) << i;
  EXPECT_DOUBLE_EQ(limiter.take("alice", t0), 10);
  EXPECT_DOUBLE_EQ(limiter.take("alice", t0 + seconds(4)), 6);  // a refused request costs nothing
  EXPECT_EQ(limiter.take("alice", t0 + seconds(10)), 0);
  EXPECT_DOUBLE_EQ(limiter.take("alice", t0 + seconds(10)), 10);
  // Another client has its own bucket.
  EXPECT_EQ(limiter.take("bob", t0 + seconds(10)), 0);
  // A long pause refills to the burst, not beyond.
  const auto later = t0 + seconds(3600);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(limiter.take("alice", later), 0) << i;
  EXPECT_GT(limiter.take("alice", later), 0);
}

TEST(RateLimiter, ZeroMeansNoLimit) {
  RateLimiter limiter(0);
  const auto t0 = RateLimiter::Clock::time_point{};
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(limiter.take("alice", t0), 0) << i;
}

}  // namespace
}  // namespace ktune::rpc_runner
