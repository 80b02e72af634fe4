// Defines WarningCapture: spdlog's default logger routed into a string while it lives, for tests
// that check what a library function warns (or says at another level).
#pragma once

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

namespace ktune::testing_log {

class WarningCapture {
 public:
  WarningCapture() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    sink->set_pattern("%l|%v");
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  }
  ~WarningCapture() { spdlog::set_default_logger(previous_); }
  WarningCapture(const WarningCapture&) = delete;
  WarningCapture& operator=(const WarningCapture&) = delete;
  // The warnings logged so far, one line each, without the level.
  std::vector<std::string> warnings() const { return lines("warning"); }
  // The lines logged so far at `level` ("info", "warning", ...), without the level.
  std::vector<std::string> lines(const std::string& level) const {
    std::vector<std::string> w;
    std::istringstream in(out_.str());
    const std::string prefix = level + "|";
    for (std::string line; std::getline(in, line);)
      if (line.rfind(prefix, 0) == 0) w.push_back(line.substr(prefix.size()));
    return w;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

}  // namespace ktune::testing_log
