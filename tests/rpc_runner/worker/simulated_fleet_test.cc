// End-to-end test of simulated devices: a tuning server over 127.0.0.1 with 50 simulated devices
// (one process, a connection each) runs a random job to completion while five of them fall
// silent mid-job; every trial is in the log once, with the landscape's numbers.
#include "rpc_runner/worker/simulated_fleet.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "rpc_runner/client/service_client.h"
#include "rpc_runner/protocol/metrics_text.h"
#include "rpc_runner/server/tuning_server.h"
#include "tests/rpc_runner/server/service_test_util.h"

namespace ktune::rpc_runner {
namespace {

using testing::TempDir;
using testing::wait_until;

TEST(SimulatedFleet, FiftyDevicesRunARandomJobEveryTrialRecordedOnce) {
  TempDir dir;
  TuningServerOptions so;
  so.port = 0;
  so.db_path = dir.file("server.db");
  so.heartbeat_s = 0.3;
  so.worker_timeout_s = 1.5;
  so.calibration_proof_s = 0;  // simulated devices run nothing to prove
  TuningServer server(so);
  const std::string address = "127.0.0.1:" + std::to_string(server.port());

  auto answers = std::make_shared<LandscapeAnswers>(tuner::read_landscape(KTUNE_LANDSCAPE_PATH));
  SimulatedFleetOptions fo;
  fo.worker.server = address;
  fo.worker.key = "sim";
  fo.worker.reconnect_initial_s = 0.1;
  fo.worker.reconnect_max_s = 0.5;
  fo.devices = 50;
  fo.delay_s = 0.2;  // long enough that a device holds a candidate most of the time
  SimulatedFleet fleet(fo, answers);
  ASSERT_TRUE(wait_until([&] { return fleet.attached() == 50; }, 20)) << fleet.attached();
  ASSERT_EQ(server.devices().size(), 50u);

  ServiceClientOptions co;
  co.server = address;
  ServiceClient client(co);
  JobSpec spec;
  spec.template_name = "matmul";
  spec.args = {{"M", "512"}, {"N", "512"}, {"K", "512"}};
  spec.session.device_key = "sim";
  spec.session.trials = 600;
  spec.session.tuner = "random";
  spec.session.seed = 3;
  spec.session.batch_size = 50;
  spec.session.transfer = false;
  const uint64_t id = client.submit(spec).id;

  // Five devices hang mid-job: the server takes them for lost after its worker timeout and
  // hands what they held to the others.
  ASSERT_TRUE(wait_until([&] { return client.job(id).done >= 150; }, 30));
  ASSERT_EQ(fleet.silence(5), 5);
  const JobEvent last = client.watch(id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  EXPECT_EQ(last.job.done, 600u);
  EXPECT_TRUE(wait_until([&] { return server.devices().size() == 45; }, 5));
  EXPECT_GE(
      metric_sum(client.status().metrics, "ktune_candidates_requeued_total", {{"key", "sim"}}), 1);

  // The 600 trials and the fallback config, each once, as the landscape answers them.
  const auto records = testing::log_records(so.db_path);
  ASSERT_EQ(records.size(), 601u);
  std::set<int64_t> configs;
  for (const tuning_db::Record& r : records) {
    configs.insert(r.config_index);
    const tuner::LandscapePoint& p = answers->point(static_cast<uint64_t>(r.config_index));
    if (p.error) {
      ASSERT_TRUE(r.error.has_value()) << r.config_index;
      EXPECT_EQ(*r.error, *p.error) << r.config_index;
      continue;
    }
    ASSERT_FALSE(r.error.has_value()) << r.config_index << ": " << r.error_message;
    ASSERT_FALSE(r.costs.empty());
    const double expected = r.flop / (p.gflops * 1e9);
    for (double c : r.costs) EXPECT_NEAR(c, expected, expected * 1e-9) << r.config_index;
  }
  // The random tuner never proposes a config twice; only the fallback may repeat one of its.
  EXPECT_GE(configs.size(), 600u);
  // Every record came from a device's answer; the silent devices' candidates were answered again.
  EXPECT_GE(fleet.results_sent(), 601u);
  EXPECT_GT(fleet.candidates_received(), fleet.results_sent());
}

TEST(SimulatedFleet, AnswersACandidateOfAnotherWorkloadUnsupported) {
  LandscapeAnswers answers(tuner::read_landscape(KTUNE_LANDSCAPE_PATH));
  rpc::Candidate c;
  c.set_id(9);
  c.mutable_task()->set_template_name("matmul");
  c.mutable_task()->set_args_json(R"({"M":64,"N":64,"K":64})");
  c.mutable_task()->set_target(answers.landscape().header.at("target").get<std::string>());
  c.mutable_task()->set_vector_bits(512);
  c.mutable_task()->set_cores(2);
  c.mutable_task()->set_arch("x86_64");
  const rpc::CandidateResult r = answers.answer(c);
  EXPECT_EQ(r.id(), 9u);
  EXPECT_EQ(r.error_kind(), to_string(ErrorKind::kUnsupported));
  EXPECT_EQ(r.costs_size(), 0);
}

}  // namespace
}  // namespace ktune::rpc_runner
