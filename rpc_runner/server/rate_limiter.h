// Defines RateLimiter: a token bucket per caller, for the tuning server's job submissions.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>

namespace ktune::rpc_runner {

// Allows each key (a client) a burst of `per_minute` requests, refilled at per_minute a minute:
// a client that submits in bursts is served, one that floods the server is not. Thread-safe.
class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  // per_minute 0 = no limit.
  explicit RateLimiter(int per_minute);

  // Takes one request of `key`'s bucket at `now`. Returns 0 when it is allowed, otherwise the
  // seconds until the bucket allows the next one (the request is refused and costs nothing).
  double take(const std::string& key, Clock::time_point now = Clock::now());

  int per_minute() const { return per_minute_; }

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point at;
  };
  const int per_minute_;
  std::mutex mu_;
  std::map<std::string, Bucket> buckets_;  // guarded by mu_
};

}  // namespace ktune::rpc_runner
