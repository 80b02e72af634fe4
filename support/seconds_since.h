// Defines seconds_since, the seconds a steady clock has run since a point: the one elapsed-time
// figure deadlines, budgets and progress lines compare.
#pragma once

#include <chrono>

namespace ktune {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace ktune
