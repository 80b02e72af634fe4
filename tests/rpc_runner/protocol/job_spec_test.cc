// Tests JobSpec: from_json on numbers a peer may send (out of range, fractional, negative), and its
// session and measurement settings through the log's JSON and the service's protobuf.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "rpc_runner/protocol/job_types.h"
#include "rpc_runner/protocol/service_convert.h"
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
  const JobSpec ok = JobSpec::from_json(
      nlohmann::json::parse(head + R"("trials": 40, "measure": {"number": 7}})"));
  EXPECT_EQ(ok.session.trials, 40u);
  EXPECT_EQ(ok.measure.number, 7);
}

// A model job: its task list and scheduler survive the log's JSON, and validate() refuses what
// the server could not run, each as kInvalidArgument.
TEST(JobSpec, AModelJobRoundTripsAndIsValidated) {
  JobSpec spec;
  spec.session.device_key = "k";
  spec.session.trials = 32;
  spec.strategy = "round_robin";
  spec.model = {{"model", "m"},
                {"tasks",
                 {{{"template", "matmul"},
                   {"args", {{"M", "8"}, {"N", "8"}, {"K", "8"}}},
                   {"count", 2},
                   {"flop", 1024.0},
                   {"tuned_as", "matmul(M=8,N=8,K=8)"}},
                  {{"template", "no_such_template"},
                   {"args", nlohmann::json::object()},
                   {"count", 1},
                   {"flop", 1.0}}}}};
  spec.validate();
  EXPECT_EQ(spec.label(), "model m (2 tasks, 1 tuned workload)");
  const JobSpec back = JobSpec::from_json(spec.to_json());
  EXPECT_TRUE(back.is_model());
  EXPECT_EQ(back.model, spec.model);
  EXPECT_EQ(back.strategy, "round_robin");
  EXPECT_FALSE(
      JobSpec::from_json(nlohmann::json::parse(R"({"template": "matmul", "device_key": "k"})"))
          .is_model());

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

JobSpec every_setting_changed() {
  JobSpec spec;
  spec.template_name = "matmul";
  spec.args = {{"M", "8"}, {"N", "16"}, {"K", "4"}};
  spec.target = "llvm -mcpu=znver3";
  spec.session.device_key = "k";
  spec.session.trials = 40;
  spec.session.tuner = "ga";
  spec.session.seed = 9;
  spec.session.batch_size = 5;
  spec.session.early_stopping = 30;
  spec.session.xgb_features = "loop";
  spec.session.transfer = false;
  tuner::MeasureOptions& m = spec.measure;
  m.number = 6;
  m.repeat = 2;
  m.min_repeat_ms = 1.5;
  m.build_timeout_s = 3;
  m.run_timeout_s = 4;
  m.cooldown_s = 0.25;
  m.flush_cache = true;
  m.check_correctness = false;
  m.rtol = 2e-3;
  m.atol = 3e-6;
  m.run_threads = 3;
  m.data_seed = 77;
  spec.priority = 4;
  spec.owner = "alice";
  return spec;
}

void expect_same_settings(const JobSpec& a, const JobSpec& b) {
  EXPECT_EQ(a.template_name, b.template_name);
  EXPECT_EQ(a.args, b.args);
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.session.device_key, b.session.device_key);
  EXPECT_EQ(a.session.trials, b.session.trials);
  EXPECT_EQ(a.session.tuner, b.session.tuner);
  EXPECT_EQ(a.session.seed, b.session.seed);
  EXPECT_EQ(a.session.batch_size, b.session.batch_size);
  EXPECT_EQ(a.session.early_stopping, b.session.early_stopping);
  EXPECT_EQ(a.session.xgb_features, b.session.xgb_features);
  EXPECT_EQ(a.session.transfer, b.session.transfer);
  const tuner::MeasureOptions &m = a.measure, &n = b.measure;
  EXPECT_EQ(m.number, n.number);
  EXPECT_EQ(m.repeat, n.repeat);
  EXPECT_DOUBLE_EQ(m.min_repeat_ms, n.min_repeat_ms);
  EXPECT_DOUBLE_EQ(m.build_timeout_s, n.build_timeout_s);
  EXPECT_DOUBLE_EQ(m.run_timeout_s, n.run_timeout_s);
  EXPECT_DOUBLE_EQ(m.cooldown_s, n.cooldown_s);
  EXPECT_EQ(m.flush_cache, n.flush_cache);
  EXPECT_EQ(m.check_correctness, n.check_correctness);
  EXPECT_DOUBLE_EQ(m.rtol, n.rtol);
  EXPECT_DOUBLE_EQ(m.atol, n.atol);
  EXPECT_EQ(m.run_threads, n.run_threads);
  EXPECT_EQ(m.data_seed, n.data_seed);
  EXPECT_EQ(a.priority, b.priority);
  EXPECT_EQ(a.owner, b.owner);
}

TEST(JobSpec, EverySettingSurvivesTheLogsJsonAndTheProtobuf) {
  const JobSpec spec = every_setting_changed();
  spec.validate();
  expect_same_settings(JobSpec::from_json(spec.to_json()), spec);
  rpc::JobSpec wire;
  to_proto(spec, &wire);
  EXPECT_EQ(wire.measure().threads(), 3);
  EXPECT_EQ(wire.measure().data_seed(), 77u);
  expect_same_settings(from_proto(wire), spec);
}

// Expects `spec` refused by validate(): kInvalidArgument, one short line starting with `says`,
// no escape code.
void expect_refused(const JobSpec& spec, const std::string& says) {
  try {
    spec.validate();
    ADD_FAILURE() << "accepted: " << says;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()).rfind(says, 0), 0u) << e.what();
    EXPECT_LT(std::string(e.what()).size(), 200u);
    EXPECT_EQ(std::string(e.what()).find('\033'), std::string::npos);
  }
}

// How a job is measured is held to MeasureOptions' bounds (tuner::validate, as the CLI's flags
// are): a peer's 2^31-1 runs or a 1e308 s or infinite timeout (a deadline that never comes) is
// refused, one line naming the field.
TEST(JobSpec, MeasurementsOutOfBoundsAreRefusedByField) {
  const JobSpec good = every_setting_changed();
  good.validate();
  const auto refused = [&](const std::function<void(tuner::MeasureOptions&)>& change,
                           const std::string& says) {
    JobSpec spec = good;
    change(spec.measure);
    expect_refused(spec, says);
  };
  refused([](auto& m) { m.number = 2147483647; },
          "number (runs per timing) must be between 1 and 1e+06");
  refused([](auto& m) { m.repeat = 2147483647; }, "repeat (timings per config) must be between 1");
  refused([](auto& m) { m.repeat = 0; }, "repeat");
  refused([](auto& m) { m.build_timeout_s = 1e308; }, "the build timeout (s) must be between");
  refused([](auto& m) { m.run_timeout_s = INFINITY; }, "the run timeout (s)");
  refused([](auto& m) { m.run_timeout_s = NAN; }, "the run timeout (s)");
  refused([](auto& m) { m.min_repeat_ms = -1; }, "min_repeat_ms");
  refused([](auto& m) { m.cooldown_s = 1e9; }, "the cooldown (s)");
  refused([](auto& m) { m.rtol = NAN; }, "rtol");
  refused([](auto& m) { m.run_threads = 100000; }, "run_threads");
  // The bounds themselves are accepted.
  JobSpec edge = good;
  edge.measure.number = tuner::kMaxNumber;
  edge.measure.repeat = tuner::kMaxRepeat;
  edge.measure.build_timeout_s = edge.measure.run_timeout_s = tuner::kMaxTimeoutS;
  edge.validate();
}

// Every string a client sends is bounded and printable, refused by field without repeating the
// value (6 MB of escape codes in an owner reached every tenant's `ktune jobs` and forged server
// log lines); a model job's task count and names are bounded too.
TEST(JobSpec, ClientTextIsBoundedAndPrintableByField) {
  const JobSpec good = every_setting_changed();
  good.validate();
  const auto refused = [&](const std::function<void(JobSpec&)>& change, const std::string& says) {
    JobSpec spec = good;
    change(spec);
    expect_refused(spec, says);
  };
  const std::string huge(6 << 20, 'x');
  refused([&](JobSpec& s) { s.owner = huge; }, "the owner is 6291456 bytes long; at most 256");
  refused([](JobSpec& s) { s.owner = "eve\n[info] forged line"; },
          "the owner has a control character (byte 10 at 3)");
  refused([](JobSpec& s) { s.session.device_key = "k\033[2J"; },
          "the device key has a control character (byte 27 at 1)");
  refused([&](JobSpec& s) { s.session.device_key = huge; }, "the device key is 6291456 bytes");
  refused([](JobSpec& s) { s.target = std::string(257, 't'); }, "the target is 257 bytes");
  refused([](JobSpec& s) { s.session.tuner = "xgb\x7f"; }, "the tuner has a control character");
  refused([](JobSpec& s) { s.args["M"] = std::string(300, '8'); }, "argument M is 300 bytes");
  // Printable text at the bound is taken, UTF-8 included.
  JobSpec edge = good;
  edge.owner = std::string(kMaxJobText - 4, 'o') + "\xc3\xa9\xc3\xa9";
  edge.validate();

  JobSpec model;
  model.session.device_key = "k";
  model.session.trials = 32;
  nlohmann::json task = {{"template", "matmul"},
                         {"args", {{"M", "8"}, {"N", "8"}, {"K", "8"}}},
                         {"count", 1},
                         {"flop", 1024.0},
                         {"layers", {"/blocks/blocks.0/attn/qkv/MatMul"}}};
  model.model = {{"model", "m"}, {"tasks", {task}}};
  model.validate();
  const auto model_refused = [&](const std::function<void(nlohmann::json&)>& change,
                                 const std::string& says) {
    JobSpec spec = model;
    change(spec.model);
    expect_refused(spec, says);
  };
  model_refused([&](nlohmann::json& m) { m["tasks"] = std::vector<nlohmann::json>(20000, task); },
                "a model job of 20000 tasks; at most 4096");
  model_refused([](nlohmann::json& m) { m["model"] = "m\r\n[info] forged"; },
                "the model's name has a control character");
  model_refused([](nlohmann::json& m) { m["tasks"][0]["layers"][0] = std::string(5000, 'n'); },
                "a string of the model's tasks is 5000 bytes long; at most 4096");
  model_refused(
      [](nlohmann::json& m) {
        m["tasks"][0]["layers"] = std::vector<std::string>(kMaxModelLayers + 1, "conv");
      },
      "the model's tasks hold more than 65536 names");
}

// A spec written by an earlier version has run_threads and data_seed beside "measure": a server
// still resumes it with them.
TEST(JobSpec, ThreadsAndDataSeedOfAnEarlierSpecAreRead) {
  const JobSpec old = JobSpec::from_json(nlohmann::json::parse(
      R"({"template": "matmul", "device_key": "k", "run_threads": 2, "data_seed": 5, "measure": {"number": 3}})"));
  EXPECT_EQ(old.measure.run_threads, 2);
  EXPECT_EQ(old.measure.data_seed, 5u);
  EXPECT_EQ(old.measure.number, 3);
  EXPECT_EQ(old.measure.repeat, tuner::MeasureOptions{}.repeat);
}

}  // namespace
}  // namespace ktune::rpc_runner
