// Tests of the local runner on real kernels: timings, the correctness check, timeouts, protocol.
#include <set>

#include <gtest/gtest.h>

#include "codegen/target.h"
#include "rpc_runner/runner/local_runner.h"
#include "rpc_runner/runner/runner_protocol.h"
#include "schedule_space/task.h"
#include "tests/rpc_runner/runner/fault_template.h"

namespace ktune::rpc_runner {
namespace {

schedule_space::Task host_task(const std::string& name,
                               const std::map<std::string, std::string>& args) {
  codegen::Target t = codegen::Target::host();
  return schedule_space::Task::create(
      name, args,
      schedule_space::make_target_traits(t.str(), t.triple(), t.vector_bits(), t.cores()));
}

LocalRunnerOptions test_options() {
  LocalRunnerOptions o;
  o.runner_path = KTUNE_RUNNER_PATH;
  o.build_threads = 2;
  o.measure.run_timeout_s = 5;
  return o;
}

TEST(RunnerProtocol, RequestsAndRepliesRoundTrip) {
  Request r;
  r.type = RequestType::kReference;
  r.reference_key = "matmul(M=1)|llvm";
  r.artifact = {1, 2, 3, 255};
  r.measure.data_seed = 77;
  r.measure.number = 9;
  r.measure.min_repeat_ms = 2.5;
  r.measure.flush_cache = true;
  Request back = decode_request(encode(r));
  EXPECT_EQ(back.type, RequestType::kReference);
  EXPECT_EQ(back.reference_key, r.reference_key);
  EXPECT_EQ(back.artifact, r.artifact);
  EXPECT_EQ(back.measure.data_seed, 77u);
  EXPECT_EQ(back.measure.number, 9);
  EXPECT_EQ(back.measure.min_repeat_ms, 2.5);
  EXPECT_TRUE(back.measure.flush_cache);

  Reply reply;
  reply.error = ErrorKind::kWrongAnswer;
  reply.message = "element 3";
  Reply rb = decode_reply(encode(reply));
  EXPECT_EQ(rb.error, ErrorKind::kWrongAnswer);
  EXPECT_EQ(rb.message, "element 3");
  Reply ok;
  ok.costs = {1e-3, 2e-3};
  EXPECT_EQ(decode_reply(encode(ok)).costs, ok.costs);
  EXPECT_FALSE(decode_reply(encode(ok)).error.has_value());

  auto bytes = encode(r);
  bytes.pop_back();
  EXPECT_THROW(decode_request(bytes), Error);
}

TEST(LocalRunner, MeasuresMatmulConfigsAndChecksThem) {
  auto task = host_task("matmul", {{"M", "64"}, {"N", "64"}, {"K", "64"}});
  LocalRunner runner(test_options());
  std::mt19937_64 rng(3);
  std::vector<tuner::MeasureInput> inputs;
  for (uint64_t index : task.space().sample(12, rng))
    inputs.push_back({&task, task.space().get(index)});
  auto results = runner.measure(inputs);
  ASSERT_EQ(results.size(), inputs.size());
  size_t ok = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    if (r.ok()) {
      ++ok;
      ASSERT_EQ(r.costs.size(), 3u);
      for (double c : r.costs) {
        EXPECT_GT(c, 0);
        EXPECT_LT(c, 1.0);
      }
      EXPECT_GT(r.build_s, 0);
      EXPECT_GT(r.run_s, 0);
    } else {
      // The built-in template's valid configs may be unschedulable, never wrong or crashing.
      EXPECT_NE(r.error, ErrorKind::kWrongAnswer)
          << inputs[i].config.to_json_string() << r.error_message;
      EXPECT_NE(r.error, ErrorKind::kRun) << inputs[i].config.to_json_string() << r.error_message;
    }
  }
  EXPECT_GE(ok, 6u);
  EXPECT_EQ(runner.runners_started(), 1u);  // one child served every candidate
}

// A config measured again (a re-timing's round) runs the build kept from its first measurement:
// timed again and checked again, not compiled again. Another workload's config of the same index
// is built.
TEST(LocalRunner, AConfigMeasuredAgainRunsItsKeptBuild) {
  auto task = host_task("matmul", {{"M", "32"}, {"N", "32"}, {"K", "32"}});
  auto other = host_task("matmul", {{"M", "32"}, {"N", "32"}, {"K", "16"}});
  LocalRunner runner(test_options());
  const std::vector<tuner::MeasureInput> inputs = {{&task, task.fallback_config()},
                                                   {&task, task.space().get(1)}};
  const auto first = runner.measure(inputs);
  ASSERT_TRUE(first[0].ok() && first[1].ok()) << first[0].error_message << first[1].error_message;
  EXPECT_EQ(runner.reused_builds(), 0u);
  const auto again = runner.measure(inputs);
  EXPECT_EQ(runner.reused_builds(), 2u);
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_TRUE(again[i].ok()) << again[i].error_message;
    EXPECT_EQ(again[i].costs.size(), 3u);
    EXPECT_EQ(again[i].build_s, first[i].build_s);  // the build's own time, kept with it
    EXPECT_GT(again[i].run_s, 0);
  }
  ASSERT_TRUE(runner.measure({{&other, other.space().get(1)}})[0].ok());
  EXPECT_EQ(runner.reused_builds(), 2u);
}

TEST(LocalRunner, WrongKernelIsAWrongAnswerNotAFastRecord) {
  testing::register_fault_template();
  auto task = host_task("runner_fault_test", {{"N", "1000"}});
  LocalRunner runner(test_options());
  auto config_of = [&](uint64_t mode, uint64_t split) {
    return task.space().get(task.space().index_of({mode, split}));
  };
  auto results = runner.measure(
      {{&task, config_of(0, 1)}, {&task, config_of(3, 2)}, {&task, config_of(0, 3)}});
  EXPECT_TRUE(results[0].ok()) << results[0].error_message;
  EXPECT_EQ(results[1].error, ErrorKind::kWrongAnswer);
  EXPECT_TRUE(results[1].costs.empty());
  EXPECT_TRUE(results[2].ok()) << results[2].error_message;
  // Measured again on its kept build, the wrong kernel is checked again.
  EXPECT_EQ(runner.measure({{&task, config_of(3, 2)}}).front().error, ErrorKind::kWrongAnswer);
  EXPECT_EQ(runner.reused_builds(), 1u);

  // Without the check the same kernel is timed (the check is what catches it).
  LocalRunnerOptions o = test_options();
  o.measure.check_correctness = false;
  LocalRunner unchecked(o);
  EXPECT_TRUE(unchecked.measure({{&task, config_of(3, 2)}}).front().ok());
}

TEST(LocalRunner, BuildTimeoutCountsOnlyTheCandidatesOwnTime) {
  auto task = host_task("matmul", {{"M", "32"}, {"N", "32"}, {"K", "32"}});
  LocalRunnerOptions o = test_options();
  o.measure.build_timeout_s = 1e-6;  // no real build is that fast
  LocalRunner runner(o);
  std::mt19937_64 rng(5);
  std::vector<tuner::MeasureInput> inputs;
  for (uint64_t index : task.space().sample(3, rng))
    inputs.push_back({&task, task.space().get(index)});
  for (const auto& r : runner.measure(inputs)) {
    if (r.error == ErrorKind::kInstantiation) continue;
    EXPECT_EQ(r.error, ErrorKind::kBuildTimeout) << r.error_message;
  }
}

TEST(LocalRunner, MinRepeatMsGrowsTheRunsPerTiming) {
  testing::register_fault_template();
  auto task = host_task("runner_fault_test", {{"N", "64"}});
  LocalRunnerOptions o = test_options();
  o.measure.number = 1;
  o.measure.repeat = 2;
  o.measure.min_repeat_ms = 20;
  LocalRunner runner(o);
  auto start = std::chrono::steady_clock::now();
  auto r = runner.measure({{&task, task.space().get(task.space().index_of({0, 0}))}}).front();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(r.ok()) << r.error_message;
  EXPECT_EQ(r.costs.size(), 2u);
  EXPECT_LT(r.costs[0], 1e-3);  // a 64-element kernel: far below a millisecond per run
  EXPECT_GE(wall, 0.04);        // two timings of at least 20 ms each
}

// By default a timing lasts at least kDefaultMinRepeatMs: a kernel of nanoseconds is timed over
// enough runs that the clock's resolution and one interrupt do not decide its figure.
TEST(LocalRunner, TheDefaultsTimeATinyKernelForAMillisecondPerTiming) {
  testing::register_fault_template();
  auto task = host_task("runner_fault_test", {{"N", "64"}});
  const LocalRunnerOptions o = test_options();
  ASSERT_EQ(o.measure.min_repeat_ms, tuner::kDefaultMinRepeatMs);
  LocalRunner runner(o);
  auto start = std::chrono::steady_clock::now();
  auto r = runner.measure({{&task, task.space().get(task.space().index_of({0, 0}))}}).front();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(r.ok()) << r.error_message;
  ASSERT_EQ(r.costs.size(), 3u);
  EXPECT_LT(r.costs[0], 1e-4);  // a 64-element kernel: far below 0.1 ms per run
  EXPECT_GE(wall, 3 * tuner::kDefaultMinRepeatMs * 1e-3);  // three timings of a millisecond
}

TEST(LocalRunner, MissingRunnerExecutableIsAnIoError) {
  LocalRunnerOptions o;
  o.runner_path = "/nonexistent/ktune-runner";
  try {
    LocalRunner runner(o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
  }
}

}  // namespace
}  // namespace ktune::rpc_runner
