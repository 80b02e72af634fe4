// Names of the error kinds.
#include "support/error.h"

#include <array>
#include <utility>

namespace ktune {
namespace {

constexpr std::array<std::pair<ErrorKind, std::string_view>, 15> kNames{{
    {ErrorKind::kInvalidArgument, "invalid_argument"},
    {ErrorKind::kInvalidSchedule, "invalid_schedule"},
    {ErrorKind::kInstantiation, "instantiation"},
    {ErrorKind::kBuild, "build"},
    {ErrorKind::kBuildTimeout, "build_timeout"},
    {ErrorKind::kRun, "run"},
    {ErrorKind::kRunTimeout, "run_timeout"},
    {ErrorKind::kWrongAnswer, "wrong_answer"},
    {ErrorKind::kWorkerLost, "worker_lost"},
    {ErrorKind::kDatabase, "database"},
    {ErrorKind::kIo, "io"},
    {ErrorKind::kNotFound, "not_found"},
    {ErrorKind::kUnsupported, "unsupported"},
    {ErrorKind::kInternal, "internal"},
    {ErrorKind::kUnknown, "unknown"},
}};

}  // namespace

std::string_view to_string(ErrorKind kind) {
  for (const auto& [k, name] : kNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

ErrorKind error_kind_from_string(std::string_view name) {
  for (const auto& [k, n] : kNames) {
    if (n == name) return k;
  }
  throw Error(ErrorKind::kInvalidArgument, "unknown error kind '" + std::string(name) + "'");
}

}  // namespace ktune
