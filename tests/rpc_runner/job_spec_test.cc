// Tests JobSpec::from_json on numbers a peer may send: out of range, fractional, negative.
#include <gtest/gtest.h>

#include <string>

#include "rpc_runner/job_types.h"
#include "support/error.h"

namespace ktune::rpc_runner {
namespace {

ErrorKind kind_of(const std::string& text) {
  try {
    JobSpec::from_json(nlohmann::json::parse(text));
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::kUnknown;
}

TEST(JobSpec, IntegersOutOfTheirTypesRangeAreRefusedNotCast) {
  const std::string head = R"({"template": "matmul", "args": {"M": "8"}, "device_key": "k", )";
  // Found by service_wire_fuzz: 1.9e72 as an int was undefined behaviour (UBSan).
  EXPECT_EQ(kind_of(head + R"("measure": {"number": 1.8888e72}})"), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of(head + R"("measure": {"number": 4294967297}})"), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of(head + R"("measure": {"repeat": 2.5}})"), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of(head + R"("trials": -64})"), ErrorKind::kInvalidArgument);
  EXPECT_EQ(kind_of(head + R"("seed": 1e30})"), ErrorKind::kInvalidArgument);
  // In range, they are taken as given.
  const JobSpec ok = JobSpec::from_json(nlohmann::json::parse(head + R"("trials": 40, "measure": {"number": 7}})"));
  EXPECT_EQ(ok.trials, 40u);
  EXPECT_EQ(ok.measure.number, 7);
}

}  // namespace
}  // namespace ktune::rpc_runner
