// RateLimiter: token buckets refilled continuously.
#include "rpc_runner/server/rate_limiter.h"

#include <algorithm>

namespace ktune::rpc_runner {

RateLimiter::RateLimiter(int per_minute) : per_minute_(std::max(per_minute, 0)) {}

double RateLimiter::take(const std::string& key, Clock::time_point now) {
  if (per_minute_ == 0) return 0;
  const double capacity = per_minute_;
  const double per_second = capacity / 60;
  std::lock_guard lock(mu_);
  auto [it, fresh] = buckets_.try_emplace(key, Bucket{capacity, now});
  Bucket& b = it->second;
  if (!fresh && now > b.at) {
    b.tokens = std::min(capacity,
                        b.tokens + std::chrono::duration<double>(now - b.at).count() * per_second);
    b.at = now;
  }
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return 0;
  }
  return (1 - b.tokens) / per_second;
}

}  // namespace ktune::rpc_runner
