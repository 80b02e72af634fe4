// spdlog smoke test: messages reach a sink the test reads back, filtered by level.
#include <memory>
#include <sstream>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "support/logging.h"

namespace {

TEST(SpdlogSmoke, SinkReceivesFormattedMessagesAboveLevel) {
  std::ostringstream out;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  spdlog::logger logger("smoke", sink);
  logger.set_pattern("%l|%v");
  logger.set_level(spdlog::level::info);

  logger.debug("hidden {}", 1);
  logger.info("trials {} best {:.1f}", 64, 93.25);
  logger.warn("kind={}", "wrong_answer");
  logger.flush();

  EXPECT_EQ(out.str(), "info|trials 64 best 93.2\nwarning|kind=wrong_answer\n");
}

TEST(SpdlogSmoke, SetupLoggingInstallsDefaultLoggerAtRequestedLevel) {
  ktune::setup_logging({.verbose = true});
  EXPECT_EQ(spdlog::default_logger()->name(), "ktune");
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::debug);
  ktune::setup_logging({.quiet = true});  // a second call reconfigures, never throws
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::warn);
}

}  // namespace
