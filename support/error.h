// Defines ktune::Error, the one exception type of the library, and the ErrorKind it carries.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace ktune {

// What went wrong, coarse enough to act on (retry, skip a config, report to the user).
// The measurement kinds (kInstantiation .. kWorkerLost) are also what a tuning record keeps.
enum class ErrorKind {
  kInvalidArgument,  // bad user input: unknown template, bad shape, malformed JSON
  kInvalidSchedule,  // a te schedule primitive used wrongly
  kInstantiation,    // a config that a template cannot turn into a schedule
  kBuild,            // codegen failed
  kBuildTimeout,
  kRun,  // the kernel crashed or returned an error code
  kRunTimeout,
  kWrongAnswer,  // the kernel's output differs from the reference
  kWorkerLost,
  kDatabase,  // SQLite failure, corrupt or foreign file, newer schema
  kIo,        // files, processes, sockets
  kNotFound,
  kUnsupported,  // a valid request that this build cannot serve (unknown target, ...)
  kInternal,     // a bug in ktune
  kUnknown,
};

// Stable lower-case name of a kind ("wrong_answer"); the tuning log stores this string.
std::string_view to_string(ErrorKind kind);
// Inverse of to_string; throws Error(kInvalidArgument) for an unknown name.
ErrorKind error_kind_from_string(std::string_view name);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace ktune
