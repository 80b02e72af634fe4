// The stderr logger of the ktune command.
#include "support/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace ktune {

void setup_logging(const LoggingOptions& options) {
  auto logger = spdlog::get("ktune");
  if (!logger) logger = spdlog::stderr_color_mt("ktune");
  logger->set_pattern("%^[%l]%$ %v");
  spdlog::level::level_enum level = spdlog::level::info;
  if (options.verbose) level = spdlog::level::debug;
  if (options.quiet) level = spdlog::level::warn;
  logger->set_level(level);
  spdlog::set_default_logger(logger);
}

}  // namespace ktune
