// Defines ms_text, how ktune prints a latency: milliseconds to 4 decimals, and below a
// microsecond to 3 significant digits (a layer of 20 ns would read 0.0000).
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace ktune {

inline std::string ms_text(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  const double ms = seconds * 1e3;
  char buf[32];
  if (ms > 0 && ms < 1e-3)
    std::snprintf(buf, sizeof buf, "%.*f", 3 - static_cast<int>(std::floor(std::log10(ms))) - 1,
                  ms);
  else
    std::snprintf(buf, sizeof buf, "%.4f", ms);
  return buf;
}

}  // namespace ktune
