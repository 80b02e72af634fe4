// Tests JobSpec::from_json on numbers a peer may send: out of range, fractional, negative.
#include <gtest/gtest.h>

#include <string>

#include "rpc_runner/protocol/job_types.h"
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

// A model job: its task list and scheduler survive the log's JSON, and validate() refuses what
// the server could not run, each as kInvalidArgument.
TEST(JobSpec, AModelJobRoundTripsAndIsValidated) {
  JobSpec spec;
  spec.device_key = "k";
  spec.trials = 32;
  spec.strategy = "round_robin";
  spec.model = {{"model", "m"},
                {"tasks",
                 {{{"template", "matmul"}, {"args", {{"M", "8"}, {"N", "8"}, {"K", "8"}}}, {"count", 2}, {"flop", 1024.0}},
                  {{"template", "no_such_template"}, {"args", nlohmann::json::object()}, {"count", 1}, {"flop", 1.0}}}}};
  spec.validate();
  EXPECT_EQ(spec.label(), "model m (2 tasks)");
  const JobSpec back = JobSpec::from_json(spec.to_json());
  EXPECT_TRUE(back.is_model());
  EXPECT_EQ(back.model, spec.model);
  EXPECT_EQ(back.strategy, "round_robin");
  EXPECT_FALSE(JobSpec::from_json(nlohmann::json::parse(R"({"template": "matmul", "device_key": "k"})")).is_model());

  auto refused = [](JobSpec s) {
    try {
      s.validate();
    } catch (const Error& e) {
      return e.kind();
    }
    return ErrorKind::kUnknown;
  };
  JobSpec with_template = spec;
  with_template.template_name = "matmul";
  EXPECT_EQ(refused(with_template), ErrorKind::kInvalidArgument);
  JobSpec bad_strategy = spec;
  bad_strategy.strategy = "fastest";
  EXPECT_EQ(refused(bad_strategy), ErrorKind::kInvalidArgument);
  JobSpec nothing_tunable = spec;
  nothing_tunable.model["tasks"].erase(0);
  EXPECT_EQ(refused(nothing_tunable), ErrorKind::kInvalidArgument);
  JobSpec malformed = spec;
  malformed.model["tasks"][0].erase("template");
  EXPECT_EQ(refused(malformed), ErrorKind::kInvalidArgument);
}

}  // namespace
}  // namespace ktune::rpc_runner
