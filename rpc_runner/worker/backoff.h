// Defines Backoff: the waits of a worker between attempts to reach its server (exponential,
// with jitter).
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>

namespace ktune::rpc_runner {

// Exponential backoff with jitter. Each wait is drawn uniformly from [ceiling/2, ceiling]; the
// ceiling starts at initial_s and doubles per failed attempt up to max_s. The jitter matters when
// a server restarts: a thousand workers that lost it at the same instant would otherwise all
// dial again at the same instants, and its accept queue would take them in waves.
// Not thread-safe: one per worker.
class Backoff {
 public:
  Backoff(double initial_s, double max_s, uint64_t seed)
      : initial_s_(initial_s),
        max_s_(std::max(max_s, initial_s)),
        ceiling_s_(initial_s),
        random_(seed) {}

  // The wait before the next attempt, in seconds; the one after it is longer, up to max_s.
  double next() {
    const double wait = std::uniform_real_distribution<double>(ceiling_s_ / 2, ceiling_s_)(random_);
    ceiling_s_ = std::min(ceiling_s_ * 2, max_s_);
    return wait;
  }
  // After a successful attach: the next outage starts again from initial_s.
  void reset() { ceiling_s_ = initial_s_; }

 private:
  double initial_s_;
  double max_s_;
  double ceiling_s_;
  std::mt19937_64 random_;
};

}  // namespace ktune::rpc_runner
