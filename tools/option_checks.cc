// Numeric option validators.
#include "tools/option_checks.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace ktune::tools {

CLI::Validator finite_in(double lo, double hi) {
  const std::string bounds = fmt::format("a number from {:g} to {:g}", lo, hi);
  return CLI::Validator(
      [lo, hi, bounds](std::string& text) -> std::string {
        const std::string shown = text.size() > 80 ? text.substr(0, 80) + "..." : text;
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE ||
            !std::isfinite(v) || v < lo || v > hi)
          return "'" + shown + "' is not " + bounds;
        return "";
      },
      bounds);
}

}  // namespace ktune::tools
