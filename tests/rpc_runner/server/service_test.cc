// End-to-end tests of the tuning service in one process over 127.0.0.1: a TuningServer owning a
// log, DeviceWorkers (their kernels run in real ktune-runner children) and ServiceClients.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "codegen/target.h"
#include "rpc_runner/client/service_client.h"
#include "rpc_runner/protocol/ktune.grpc.pb.h"
#include "rpc_runner/protocol/peer_checks.h"
#include "rpc_runner/protocol/service_convert.h"
#include "rpc_runner/server/tuning_server.h"
#include "rpc_runner/worker/device_worker.h"
#include "schedule_space/task.h"
#include "schedule_space/workload.h"
#include "support/error.h"
#include "tests/rpc_runner/runner/fault_template.h"
#include "tests/rpc_runner/server/in_process_service.h"
#include "tests/rpc_runner/server/service_test_util.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/database.h"

namespace ktune::rpc_runner {
namespace {

using testing::fault_job;
using testing::kinds_of;
using testing::matmul_job;
using testing::TempDir;
using testing::wait_until;

using testing::client_options;
using testing::server_options;
using testing::worker_options;

TEST(Service, AJobOnThreeWorkersRecordsEveryConfigOnceAndTheLogAnswersQueries) {
  TempDir dir;
  TuningServer server(server_options(dir));
  DeviceWorker w1(worker_options(server, "cpu")), w2(worker_options(server, "cpu")),
      w3(worker_options(server, "cpu"));
  ServiceClient client(client_options(server));
  ASSERT_TRUE(wait_until([&] { return client.devices().size() == 3; }, 10));

  const JobStatus submitted = client.submit(matmul_job("cpu", 40));
  EXPECT_EQ(submitted.state, tuning_db::JobState::kQueued);
  EXPECT_EQ(submitted.trials, 40u);
  size_t progress_events = 0;
  uint64_t last_done = 0;
  const JobEvent last = client.watch(submitted.id, [&](const JobEvent& e) {
    if (!e.progress) return;
    ++progress_events;
    EXPECT_GE(e.progress->done, last_done);  // monotone
    last_done = e.progress->done;
    EXPECT_EQ(e.progress->total, 40u);
  });
  EXPECT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  EXPECT_EQ(last.job.done, 40u);
  EXPECT_EQ(progress_events, 5u);  // one per batch of 8
  ASSERT_FALSE(last.summary_json.empty());
  const auto summary = nlohmann::json::parse(last.summary_json);
  EXPECT_EQ(summary["measured"], 40);

  // The log holds each config of the job once (its 40 trials and the fallback), all measured,
  // spread over the three workers.
  const auto records = testing::log_records(server_options(dir).db_path, last.job.workload);
  ASSERT_EQ(records.size(), 40u + 1);
  std::set<int64_t> configs;
  for (const auto& r : records) {
    configs.insert(r.config_index);
    EXPECT_EQ(r.device_key, "cpu");
    EXPECT_TRUE(r.ok()) << r.error_message;
  }
  EXPECT_EQ(configs.size(), 40u + 1);
  for (const DeviceInfo& d : client.devices())
    EXPECT_GT(d.served, 0u) << d.worker_id << " measured nothing";

  // QueryBest answers with the log's fastest undisputed record by its figure (the job's
  // re-timing where it re-timed the record; on a loaded machine the three workers' rounds of one
  // config may disagree more than 2x, and the record is then disputed); export streams every
  // record.
  const auto best = client.best(last.job.workload, last.job.target, "", 3);
  ASSERT_EQ(best.size(), 3u);
  const auto fastest =
      std::min_element(records.begin(), records.end(), [](const auto& a, const auto& b) {
        return std::make_pair(a.disputed, a.cost()) < std::make_pair(b.disputed, b.cost());
      });
  ASSERT_FALSE(fastest->disputed);
  EXPECT_EQ(best[0].config_index, fastest->config_index);
  EXPECT_DOUBLE_EQ(best[0].cost(), fastest->cost());
  EXPECT_LE(best[0].cost(), best[1].cost());
  // The summary's best is the search's (its first timing was the lowest), so it is one of the
  // five records the job re-timed; the re-timing may then rank another first.
  const auto searched =
      std::find_if(records.begin(), records.end(), [&](const tuning_db::Record& r) {
        return r.config_index == summary["best"]["config"]["index"].get<int64_t>();
      });
  ASSERT_NE(searched, records.end());
  EXPECT_EQ(searched->retimed_costs.size(), 3u);
  EXPECT_TRUE(client.best(last.job.workload, "llvm -mtriple=aarch64-linux-gnu", "", 1).empty());
  std::stringstream exported;
  EXPECT_EQ(client.export_log(exported), 40 + 1);
  EXPECT_EQ(
      tuning_db::from_json_line(exported.str().substr(0, exported.str().find('\n'))).workload_key,
      last.job.workload);
}

TEST(Service, FaultyKernelsAreRecordedWithTheirKindAndTheWorkerGoesOn) {
  testing::register_fault_template();
  TempDir dir;
  TuningServer server(server_options(dir));
  DeviceWorker worker(worker_options(server, "cpu"));
  ServiceClient client(client_options(server));
  const JobEvent last = client.watch(client.submit(fault_job("cpu")).id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  auto kinds = kinds_of(testing::log_records(server_options(dir).db_path, last.job.workload));
  EXPECT_EQ(kinds, (std::map<std::string, int>{
                       {"ok", 4}, {"run", 4}, {"run_timeout", 4}, {"wrong_answer", 4}}));
  EXPECT_TRUE(worker.attached());
  EXPECT_GE(worker.runners_started(), 9u);  // the first child, then one after each crash or hang
}

// A device without a compiler: the server cross-builds every kernel and its reference; the
// worker only checks and times, crashes and hangs included.
TEST(Service, TheServerBuildsForADeviceThatCannot) {
  testing::register_fault_template();
  TempDir dir;
  TuningServer server(server_options(dir));
  DeviceWorkerOptions board = worker_options(server, "board");
  board.can_build = false;
  DeviceWorker worker(board);
  ServiceClient client(client_options(server));
  const JobEvent matmul = client.watch(client.submit(matmul_job("board", 16)).id);
  ASSERT_EQ(matmul.job.state, tuning_db::JobState::kDone) << matmul.job.message;
  for (const auto& r : testing::log_records(server_options(dir).db_path, matmul.job.workload))
    EXPECT_TRUE(r.ok()) << r.error_message;
  const JobEvent last = client.watch(client.submit(fault_job("board")).id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  auto kinds = kinds_of(testing::log_records(server_options(dir).db_path, last.job.workload));
  EXPECT_EQ(kinds, (std::map<std::string, int>{
                       {"ok", 4}, {"run", 4}, {"run_timeout", 4}, {"wrong_answer", 4}}));
  EXPECT_EQ(worker.built_here(), 0u);
  // The matmul job's 16 trials and its fallback; the fault job's whole space of 16, its fallback
  // among them (measured once: the search takes it as measured); then each job's re-timing of its
  // best successful records in 3 rounds: the matmul job's five and its fallback when not one of
  // them, in each pass (a second or third when one demoted all it timed), the fault job's four ok
  // ones (its fallback among them or failed).
  const auto retimed = [](const JobEvent& e) {
    return nlohmann::json::parse(e.summary_json)["retimed"]["measured"].get<size_t>();
  };
  EXPECT_EQ(retimed(last), 4u * 3);
  const size_t matmul_retimed = retimed(matmul);
  const auto passes = nlohmann::json::parse(matmul.summary_json)["retimed"]["passes"].get<size_t>();
  EXPECT_EQ(matmul_retimed % 3, 0u) << matmul_retimed;
  EXPECT_GE(matmul_retimed, passes * 5 * 3) << matmul_retimed;
  EXPECT_LE(matmul_retimed, passes * 6 * 3) << matmul_retimed;
  // And its calibration's two runs at attach and their two proofs, built here too.
  EXPECT_EQ(worker.prebuilt(), 4u + 16 + 1 + 16 + matmul_retimed + 4 * 3);
}

TEST(Service, TwoJobsShareTwoWorkersAndBothProgress) {
  TempDir dir;
  TuningServer server(server_options(dir));
  DeviceWorker w1(worker_options(server, "cpu")), w2(worker_options(server, "cpu"));
  ServiceClient client(client_options(server));
  JobSpec a = matmul_job("cpu", 32, 1);
  a.owner = "alice@laptop";
  JobSpec b = matmul_job("cpu", 32, 2);
  b.owner = "bob@desktop";
  b.args["N"] = "32";  // another workload: its own records
  const uint64_t ja = client.submit(a).id;
  const uint64_t jb = client.submit(b).id;
  // Neither waits for the other: each has measured something before either ends.
  bool both_progressed = false;
  ASSERT_TRUE(wait_until(
      [&] {
        auto jobs = client.jobs(true);
        uint64_t da = 0, db = 0;
        bool finished = false;
        for (const auto& j : jobs) {
          if (j.id == ja) da = j.done;
          if (j.id == jb) db = j.done;
          finished |= j.finished();
        }
        if (da > 0 && db > 0 && !finished) both_progressed = true;
        return finished;
      },
      120));
  EXPECT_TRUE(both_progressed);
  EXPECT_EQ(client.watch(ja).job.state, tuning_db::JobState::kDone);
  EXPECT_EQ(client.watch(jb).job.state, tuning_db::JobState::kDone);
  EXPECT_EQ(client.job(ja).done, 32u);
  EXPECT_EQ(client.job(jb).done, 32u);
  EXPECT_EQ(client.job(ja).owner, "alice@laptop");
  EXPECT_EQ(client.job(jb).owner, "bob@desktop");
}

TEST(Service, ADetachedJobFinishesWithNoClientAndAKeyWithoutWorkersWaits) {
  TempDir dir;
  TuningServer server(server_options(dir));
  uint64_t id = 0;
  {
    ServiceClient client(client_options(server));
    id = client.submit(matmul_job("late", 16)).id;
  }  // the client is gone
  ServiceClient client(client_options(server));
  ASSERT_TRUE(wait_until(
      [&] { return client.job(id).message.find("waiting for a device") != std::string::npos; }, 5));
  JobStatus waiting = client.job(id);
  EXPECT_EQ(waiting.state, tuning_db::JobState::kQueued);
  EXPECT_EQ(waiting.devices, 0);
  EXPECT_EQ(waiting.message, "waiting for a device with key 'late'");
  DeviceWorker worker(worker_options(server, "late"));
  ASSERT_TRUE(wait_until([&] { return client.job(id).finished(); }, 60));
  EXPECT_EQ(client.job(id).state, tuning_db::JobState::kDone);
  EXPECT_EQ(client.job(id).done, 16u);
  EXPECT_EQ(client.jobs(false).size(), 0u);  // nothing queued or running
  EXPECT_EQ(client.jobs(true).size(), 1u);
}

TEST(Service, CancelStopsAJobAndBadRequestsGetOneClearError) {
  TempDir dir;
  // The log already holds a record no trial of the job can beat (another run's, 1 ns; not of the
  // fallback config, which every run measures or takes as its own).
  const codegen::Target host = codegen::Target::host();
  const auto task = schedule_space::Task::create(
      "matmul", {{"M", "64"}, {"N", "64"}, {"K", "64"}},
      schedule_space::make_target_traits(host.str(), host.triple(), host.vector_bits(),
                                         host.cores()));
  {
    tuning_db::Record r;
    r.workload_key = task.workload_key();
    r.template_name = "matmul";
    r.args = task.args_json();
    r.flop = task.flop();
    r.target = {host.str(), codegen::llvm_version()};
    r.device_key = "cpu";
    uint64_t seeded = 0;
    while (!task.space().is_valid(seeded) || seeded == task.fallback_config().index()) ++seeded;
    r.config_index = static_cast<int64_t>(seeded);
    r.config = task.space().get(seeded).to_json();
    r.costs = {1e-9};
    r.tuner = "seeded";
    tuning_db::Database::open(server_options(dir).db_path).add({r});
  }
  TuningServer server(server_options(dir));
  DeviceWorker worker(worker_options(server, "cpu"));
  ServiceClient client(client_options(server));
  const uint64_t id = client.submit(matmul_job("cpu", 5000)).id;
  ASSERT_TRUE(wait_until([&] { return client.job(id).done >= 8; }, 60));
  client.cancel(id);
  ASSERT_TRUE(wait_until([&] { return client.job(id).finished(); }, 20));
  const JobStatus s = client.job(id);
  EXPECT_EQ(s.state, tuning_db::JobState::kCancelled);
  EXPECT_LT(s.done, 5000u);
  // The log serves the seeded record; the cancelled job shows the best of its own trials, not
  // that other run's figure.
  const auto served = client.best(task.workload_key(), host.str(), "cpu");
  ASSERT_EQ(served.size(), 1u);
  EXPECT_EQ(served[0].tuner, "seeded");
  const double seeded_gflops = task.flop() / 1e-9 / 1e9;
  EXPECT_GT(s.best_gflops, 0);
  EXPECT_LT(s.best_gflops, seeded_gflops / 100) << "the log's best, another run's";
  // Nothing is measured after the cancellation took effect.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(client.job(id).done, s.done);

  auto expect_error = [](auto&& call, ErrorKind kind, const std::string& text) {
    try {
      call();
      ADD_FAILURE() << "no error; expected: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
    }
  };
  expect_error([&] { client.cancel(999); }, ErrorKind::kNotFound, "no job 999");
  expect_error([&] { client.watch(999); }, ErrorKind::kNotFound, "no job 999");
  JobSpec bad = matmul_job("cpu", 8);
  bad.template_name = "nosuch";
  expect_error([&] { client.submit(bad); }, ErrorKind::kInvalidArgument, "nosuch");
  bad = matmul_job("cpu", 0);
  expect_error([&] { client.submit(bad); }, ErrorKind::kInvalidArgument, "trials");
  bad = matmul_job("cpu", 8);
  bad.measure.run_timeout_s = -1;
  expect_error([&] { client.submit(bad); }, ErrorKind::kInvalidArgument, "timeout");
  ServiceClientOptions nowhere;
  nowhere.server = "127.0.0.1:1";
  nowhere.timeout_s = 2;
  expect_error([&] { ServiceClient(nowhere).jobs(); }, ErrorKind::kIo,
               "cannot reach the tuning server at 127.0.0.1:1");
}

// Malformed and oversized requests are refused with one line each, and the server goes on.
TEST(Service, MalformedAndOversizedRequestsAreRefusedAndTheServerGoesOn) {
  TempDir dir;
  TuningServer server(server_options(dir));
  auto stub = rpc::Tuning::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(server.port()),
                                                       grpc::InsecureChannelCredentials()));
  auto submit = [&](const rpc::JobSpec& spec) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    rpc::JobInfo reply;
    return stub->SubmitJob(&ctx, spec, &reply);
  };
  rpc::JobSpec spec;
  spec.set_protocol_version(kProtocolVersion);
  spec.set_template_name("matmul");
  spec.set_device_key("cpu");
  spec.set_trials(8);
  spec.set_tuner("random");
  spec.set_batch_size(8);
  spec.mutable_measure()->set_number(1);
  spec.mutable_measure()->set_repeat(1);
  spec.mutable_measure()->set_build_timeout_s(10);
  spec.mutable_measure()->set_run_timeout_s(10);
  spec.set_args_json("{\"M\": [1, 2");  // not JSON
  grpc::Status status = submit(spec);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_NE(status.error_message().find("args_json"), std::string::npos) << status.error_message();
  spec.set_protocol_version(kProtocolVersion + 1);
  spec.set_args_json("{}");
  status = submit(spec);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(status.error_message().find("version " + std::to_string(kProtocolVersion + 1)),
            std::string::npos);
  // Over the 64 MiB message limit: gRPC refuses it before ktune sees it.
  spec.set_protocol_version(kProtocolVersion);
  spec.set_owner(std::string(65 << 20, 'x'));
  status = submit(spec);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  // Still serving.
  ServiceClient client(client_options(server));
  EXPECT_TRUE(client.jobs(true).empty());
}

// ExportLog's messages stay under 4 MiB and 500 records whatever the records hold: many small
// ones, several of 1.5 MiB (three would pass the bound), one of 6 MiB (alone over it: its error
// text is cut as a worker's is).
TEST(Service, ExportChunksAreBoundedByBytesWhateverTheRecordSizes) {
  TempDir dir;
  const TuningServerOptions options = server_options(dir);
  std::vector<size_t> sizes(600, 1 << 10);
  sizes.insert(sizes.end(), 8, size_t{3} << 19);
  sizes.push_back(size_t{6} << 20);
  {
    auto db = tuning_db::Database::open(options.db_path);
    std::vector<tuning_db::Record> records;
    for (size_t i = 0; i < sizes.size(); ++i) {
      records.push_back(
          tuning_db::testing::make_failure(64, static_cast<int64_t>(i), ErrorKind::kRun));
      records.back().error_message = std::string(sizes[i], 'e');
    }
    db.add(records);
  }
  TuningServer server(options);
  auto stub = rpc::Tuning::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(server.port()),
                                                       grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = stub->ExportLog(&ctx, rpc::ExportRequest());
  rpc::RecordLines chunk;
  std::vector<size_t> got;  // the error text's size of each record, in order
  size_t messages = 0;
  while (reader->Read(&chunk)) {
    ++messages;
    EXPECT_LE(chunk.ByteSizeLong(), size_t{4} << 20);
    EXPECT_LE(chunk.lines_size(), 500);
    for (const std::string& line : chunk.lines())
      got.push_back(tuning_db::from_json_line(line).error_message.size());
  }
  const grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(got.size(), sizes.size());
  for (size_t i = 0; i + 1 < sizes.size(); ++i) EXPECT_EQ(got[i], sizes[i]) << "record " << i;
  EXPECT_LE(got.back(), kMaxErrorTextBytes);
  EXPECT_GT(got.back(), kMaxErrorTextBytes / 2);
  // 500 small records; the other 100 with two of 1.5 MiB; the rest of those two by two, the cut
  // one with the last pair.
  EXPECT_EQ(messages, 5u);
}

// A worker that answers every candidate with an impossible time (after a plausible calibration,
// 20 GFLOP/s, which this raw stream scripts: no proof asked): its results must not reach the log
// as measurements.
TEST(Service, ImplausibleResultsAreRefused) {
  TempDir dir;
  TuningServerOptions options = server_options(dir);
  options.calibration_proof_s = 0;
  TuningServer server(options);
  ServiceClient client(client_options(server));
  const uint64_t id = client.submit(matmul_job("liar", 8)).id;
  auto stub = rpc::Tuning::NewStub(grpc::CreateChannel("127.0.0.1:" + std::to_string(server.port()),
                                                       grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  auto stream = stub->Attach(&ctx);
  rpc::WorkerMessage hello;
  hello.mutable_hello()->set_protocol_version(kProtocolVersion);
  hello.mutable_hello()->set_key("liar");
  hello.mutable_hello()->set_target(codegen::Target::host().str());
  hello.mutable_hello()->set_cores(1);
  hello.mutable_hello()->set_slots(1);
  hello.mutable_hello()->set_can_build(true);
  ASSERT_TRUE(stream->Write(hello));
  rpc::ServerToWorker in;
  int answered = 0;
  while (answered < 9 && stream->Read(&in)) {  // the fallback, then 8 trials
    if (!in.has_candidate()) continue;
    rpc::WorkerMessage out;
    out.mutable_result()->set_id(in.candidate().id());
    if (in.candidate().task().template_name() == "fma_peak") {
      out.mutable_result()->add_costs(from_proto(in.candidate().task()).flop() / 20e9);
      ASSERT_TRUE(stream->Write(out));
      continue;
    }
    out.mutable_result()->add_costs(answered % 2 ? 1e-15 : -1.0);
    ASSERT_TRUE(stream->Write(out));
    ++answered;
  }
  ASSERT_TRUE(wait_until([&] { return client.job(id).finished(); }, 20));
  const JobStatus s = client.job(id);
  EXPECT_EQ(s.state, tuning_db::JobState::kDone) << s.message;
  EXPECT_EQ(s.best_gflops, 0);
  const auto records = testing::log_records(server_options(dir).db_path, s.workload);
  ASSERT_EQ(records.size(), 8u + 1);  // the refused fallback is logged too
  for (const auto& r : records) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(*r.error, ErrorKind::kUnknown);
    EXPECT_NE(r.error_message.find("refused from worker"), std::string::npos) << r.error_message;
  }
  ctx.TryCancel();
}

}  // namespace
}  // namespace ktune::rpc_runner
