// Defines the logging set-up shared by the ktune command and the tests (spdlog underneath).
#pragma once

#include <memory>

#include <spdlog/spdlog.h>

namespace ktune {

struct LoggingOptions {
  bool verbose = false;  // debug level instead of info
  bool quiet = false;    // warnings and errors only
};

// Installs a stderr logger as spdlog's default. Library code logs through spdlog::info & co.
void setup_logging(const LoggingOptions& options);

}  // namespace ktune
