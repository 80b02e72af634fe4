// End-to-end test of the service's tenants as processes on 127.0.0.1: `ktune server` with an admin
// and three named clients, a `ktune worker`, and the clients' commands. A client lists, watches
// and cancels its own jobs only (another client's job is "no job ID"), the admin every job;
// records name their client and worker; submissions past the rate limit are refused; the server
// logs every refused or privileged call naming the caller; the older token file still works; a
// client's text is bounded and printable, and jobs are listed in pages.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "rpc_runner/client/service_client.h"
#include "rpc_runner/protocol/job_types.h"
#include "rpc_runner/protocol/ktune.grpc.pb.h"
#include "support/error.h"
#include "tests/process_util.h"
#include "tests/rpc_runner/server/service_test_util.h"
#include "tuning_db/database.h"

#define KTUNE_BINARY KTUNE_BIN
#include "tests/cli_util.h"

namespace ktune {
namespace {

using testing_cli::expect_one_line_error;
using testing_cli::quote;
using testing_process::Child;
using testing_process::read_file;

const char kWorker[] = "worker-token-0123456789";
const char kAdmin[] = "admin-token-0123456789";
const char kAlice[] = "alice-token-0123456789";
const char kBob[] = "bob-token-0123456789ab";
const char kCarol[] = "carol-token-0123456789";

class Tenants : public ::testing::Test {
 protected:
  // Starts `ktune server` with the token file and extra flags, and a `ktune worker` of key k;
  // returns once the worker is attached (false when either does not come up).
  bool start(const std::string& tokens, const std::vector<std::string>& flags) {
    std::vector<std::string> args{KTUNE_BIN, "server", "--port",       "0",
                                  "--db",    db(),     "--token-file", tokens};
    args.insert(args.end(), flags.begin(), flags.end());
    server_ = std::make_unique<Child>(args, dir_.path / "server.out", dir_.path / "server.err");
    address_ = testing_process::wait_for_address(dir_.path / "server.out");
    if (address_.empty()) return false;
    const std::string worker_token = dir_.write("worker-token", std::string(kWorker) + "\n");
    worker_ = std::make_unique<Child>(
        std::vector<std::string>{KTUNE_BIN, "worker", "--server", address_, "--key", "k",
                                 "--runner", KTUNE_RUNNER_PATH, "--slots", "1", "--token-file",
                                 worker_token},
        dir_.path / "worker.out", dir_.path / "worker.err");
    for (int i = 0; i < 500; ++i) {
      auto listed = as(tokens, "server devices --json");
      if (listed.status == 0 && nlohmann::json::parse(listed.out).size() == 1) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
    }
    return false;
  }

  // Runs `ktune ARGS` against the server with this token file (stderr captured).
  testing_cli::Output as(const std::string& token_file, const std::string& args) const {
    return testing_cli::ktune(args + " --server " + address_ + " --token-file " + quote(token_file),
                              true);
  }

  // The jobs a token file's holder lists (--all), by id.
  std::map<uint64_t, std::string> jobs_of(const std::string& token_file) const {
    const auto listed = as(token_file, "jobs --all --json");
    EXPECT_EQ(listed.status, 0) << listed.err;
    std::map<uint64_t, std::string> out;
    for (const auto& j : nlohmann::json::parse(listed.out))
      out[j["id"].get<uint64_t>()] = j["client"].get<std::string>();
    return out;
  }

  // Watches a job over the WatchJob call itself (`ktune jobs watch` asks ListJobs first, which
  // shows no other client's job). Returns the error's message ("" when none).
  std::string watch_error(const std::string& token_file, uint64_t id) const {
    rpc_runner::ServiceClientOptions o;
    o.server = address_;
    o.token_file = token_file;
    o.timeout_s = 60;
    try {
      rpc_runner::ServiceClient(o).watch(id);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kNotFound) << e.what();
      return e.what();
    }
    return "";
  }

  std::string db() const { return dir_.file("server.db"); }
  std::string server_log() const { return read_file(dir_.path / "server.err"); }

  rpc_runner::testing::TempDir dir_;
  std::string address_;
  std::unique_ptr<Child> server_, worker_;
};

// Whether `worker` is a worker id as the server gives them ("w1", "w2", ...): a worker that misses
// its heartbeats on a busy machine attaches again under a new id.
bool worker_id(const std::string& worker) {
  return worker.size() > 1 && worker[0] == 'w' &&
         worker.find_first_not_of("0123456789", 1) == std::string::npos;
}

// Whether the server's log has a line holding every part.
bool logged(const std::string& log, const std::vector<std::string>& parts) {
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    bool all = true;
    for (const auto& p : parts) all = all && line.find(p) != std::string::npos;
    if (all) return true;
  }
  return false;
}

TEST_F(Tenants, ClientsSeeTheirOwnJobsTheAdminAllAndRecordsNameClientAndWorker) {
  const std::string tokens =
      dir_.write("tokens", std::string("worker: ") + kWorker + "\nadmin: " + kAdmin +
                               "\nclient alice: " + kAlice + "\nclient bob: " + kBob +
                               "\nclient carol: " + kCarol + "\n");
  const std::string admin = dir_.write("admin-token", std::string(kAdmin) + "\n");
  const std::string alice = dir_.write("alice-token", std::string(kAlice) + "\n");
  // A client's file may hold its line of the server's file.
  const std::string bob = dir_.write("bob-token", std::string("client bob: ") + kBob + "\n");
  const std::string carol = dir_.write("carol-token", std::string(kCarol) + "\n");
  const std::string wrong = dir_.write("wrong-token", "wrong-token-0123456789\n");
  ASSERT_TRUE(start(tokens, {"--max-jobs-per-minute", "3"})) << server_log();
  EXPECT_FALSE(logged(server_log(), {"without a name"})) << server_log();

  // alice's job runs on the worker; bob's waits for a key no worker has.
  const std::string workload = "matmul M=32 N=32 K=32";
  auto tuned = as(alice, "tune " + workload + " --tuner random --trials 8 --device-key k");
  ASSERT_EQ(tuned.status, 0) << tuned.out << tuned.err;
  EXPECT_NE(tuned.out.find("job:      1 (done) on key k"), std::string::npos) << tuned.out;
  auto waiting = as(bob, "tune " + workload + " --trials 8 --detach --device-key nobody");
  ASSERT_EQ(waiting.status, 0) << waiting.err;
  EXPECT_EQ(waiting.out, "job 2 submitted\n");

  // Each client lists its own jobs; the admin every job.
  EXPECT_EQ(jobs_of(alice), (std::map<uint64_t, std::string>{{1, "alice"}}));
  EXPECT_EQ(jobs_of(bob), (std::map<uint64_t, std::string>{{2, "bob"}}));
  EXPECT_TRUE(jobs_of(carol).empty());
  EXPECT_EQ(jobs_of(admin), (std::map<uint64_t, std::string>{{1, "alice"}, {2, "bob"}}));
  auto table = as(admin, "jobs --all");
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("client"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("alice"), std::string::npos) << table.out;

  // Another client's job is "no job ID", as an unknown id is: watch and cancel alike.
  expect_one_line_error(as(alice, "jobs cancel 2"), "no job 2");
  expect_one_line_error(as(alice, "jobs watch 2"), "no job 2");
  expect_one_line_error(as(bob, "jobs watch 1"), "no job 1");
  EXPECT_EQ(watch_error(bob, 1), "no job 1");
  EXPECT_EQ(watch_error(bob, 99), "no job 99");
  const auto unknown = as(alice, "jobs cancel 99");
  expect_one_line_error(unknown, "no job 99");
  const auto other = as(alice, "jobs cancel 2");
  EXPECT_EQ(other.err.substr(0, other.err.find("no job")),
            unknown.err.substr(0, unknown.err.find("no job")));
  // Its own job, alice watches to the end; bob's job still waits.
  auto watched = as(alice, "jobs watch 1");
  EXPECT_EQ(watched.status, 0) << watched.err;
  EXPECT_NE(watched.out.find("measured: 8 configs"), std::string::npos) << watched.out;
  EXPECT_EQ(nlohmann::json::parse(as(bob, "jobs --json").out).at(0)["state"], "queued");
  // The admin cancels bob's job.
  auto cancelled = as(admin, "jobs cancel 2");
  ASSERT_EQ(cancelled.status, 0) << cancelled.err;
  EXPECT_NE(cancelled.out.find("job 2: cancel"), std::string::npos) << cancelled.out;
  // Bob sees who cancelled it (a job waiting for a device ends at once).
  std::string message;
  for (int i = 0; i < 100 && message.empty(); ++i) {
    const auto listed = nlohmann::json::parse(as(bob, "jobs --all --json").out);
    if (listed.at(0)["state"] == "cancelled")
      message = listed.at(0)["message"];
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(message, "cancelled by the admin");

  // Records of alice's job (the fallback's too) name alice and the worker; so does the export.
  {
    auto log = tuning_db::Database::open(db(), {.read_only = true});
    std::stringstream lines;
    ASSERT_EQ(log.export_jsonl(lines), 9);  // 8 trials and the fallback
    for (std::string line; std::getline(lines, line);) {
      const auto r = tuning_db::from_json_line(line);
      EXPECT_EQ(r.client, "alice");
      EXPECT_TRUE(worker_id(r.worker)) << r.worker;
      EXPECT_EQ(r.device_key, "k");
    }
  }
  auto exported = as(bob, "db export");
  ASSERT_EQ(exported.status, 0) << exported.err;
  const auto first = nlohmann::json::parse(exported.out.substr(0, exported.out.find('\n')));
  EXPECT_EQ(first["meta"]["client"], "alice");
  EXPECT_TRUE(worker_id(first["meta"]["worker"].get<std::string>())) << first;

  // The rate limit (3 a minute): carol's fourth submission in a row is refused with one line;
  // alice, with a bucket of her own, still submits.
  for (int i = 0; i < 3; ++i) {
    auto ok = as(carol, "tune " + workload + " --trials 8 --detach --device-key nobody");
    EXPECT_EQ(ok.status, 0) << i << ": " << ok.err;
  }
  expect_one_line_error(as(carol, "tune " + workload + " --trials 8 --detach --device-key nobody"),
                        "too many job submissions: at most 3 a minute per client");
  EXPECT_EQ(jobs_of(carol).size(), 3u);
  EXPECT_EQ(as(alice, "tune " + workload + " --trials 8 --detach --device-key nobody").status, 0);

  // A wrong token is refused.
  expect_one_line_error(as(wrong, "jobs"), "wrong client token");

  // The server's log: one line for each refused or privileged call, naming the caller.
  const std::string log = server_log();
  EXPECT_TRUE(logged(log, {"refused CancelJob of job 2 from client alice (", "client bob's"}))
      << log;
  EXPECT_TRUE(logged(log, {"refused WatchJob of job 1 from client bob (", "client alice's"}))
      << log;
  // `ktune jobs watch` of another client's job reaches the server, which logs the refusal.
  EXPECT_TRUE(logged(log, {"refused WatchJob of job 2 from client alice (", "client bob's"}))
      << log;
  EXPECT_TRUE(logged(log, {"admin (", "cancels job 2 of client bob"})) << log;
  EXPECT_TRUE(logged(log, {"refused SubmitJob from client carol (", "too many job submissions"}))
      << log;
  EXPECT_TRUE(logged(log, {"refused ListJobs from ", "127.0.0.1", "wrong client token"})) << log;
  EXPECT_FALSE(logged(log, {"refused", "job 99"})) << log;  // an unknown id is no one's
}

// The older token file (one "client:" line): its token is the admin's, which submits, lists and
// cancels as before, and its records name "admin". The server says so when it starts.
TEST_F(Tenants, TheOlderTokenFileStillWorksWithItsClientAsTheAdmin) {
  const std::string tokens =
      dir_.write("tokens", std::string("worker: ") + kWorker + "\nclient: " + kAlice + "\n");
  const std::string client = dir_.write("client-token", std::string(kAlice) + "\n");
  ASSERT_TRUE(start(tokens, {})) << server_log();
  EXPECT_TRUE(logged(server_log(), {tokens + ":2: a 'client:' line without a name holds the "
                                             "admin's token"}))
      << server_log();
  auto tuned = as(client, "tune matmul M=32 N=32 K=32 --tuner random --trials 4 --device-key k");
  ASSERT_EQ(tuned.status, 0) << tuned.out << tuned.err;
  ASSERT_EQ(as(tokens, "tune matmul M=32 N=32 K=32 --trials 4 --detach --device-key nobody").out,
            "job 2 submitted\n");
  EXPECT_EQ(jobs_of(client), (std::map<uint64_t, std::string>{{1, "admin"}, {2, "admin"}}));
  EXPECT_EQ(as(client, "jobs cancel 2").status, 0);
  auto log = tuning_db::Database::open(db(), {.read_only = true});
  const auto records = log.history("matmul", log.summaries().at(0).target);
  ASSERT_EQ(records.size(), 5u);  // 4 trials and the fallback
  for (const auto& r : records) {
    EXPECT_EQ(r.client, "admin");
    EXPECT_TRUE(worker_id(r.worker)) << r.worker;
  }
  // Its own job cancelled by the admin itself: no line for a privileged call.
  EXPECT_FALSE(logged(server_log(), {"cancels job 2"})) << server_log();
}

// A client that sends what the CLI refuses before sending (a crafted client: the service client
// without validate()): a 6 MB owner, an owner that forges a log line, a model job of 20,000 tasks,
// each refused with one line naming the field, none in the log; then more jobs than a page holds
// (kMaxJobsPage), every one listed by `ktune jobs` through the pages.
TEST_F(Tenants, AClientsTextIsBoundedAndJobsComeInPages) {
  const std::string tokens =
      dir_.write("tokens", std::string("worker: ") + kWorker + "\nadmin: " + kAdmin +
                               "\nclient alice: " + kAlice + "\n");
  const std::string alice = dir_.write("alice-token", std::string(kAlice) + "\n");
  ASSERT_TRUE(start(tokens, {"--max-jobs-per-minute", "0"})) << server_log();
  rpc_runner::ServiceClientOptions o;
  o.server = address_;
  o.token_file = alice;
  o.timeout_s = 60;
  rpc_runner::ServiceClient client(o);
  rpc_runner::JobSpec job;
  job.template_name = "matmul";
  job.args = {{"M", "16"}, {"N", "16"}, {"K", "16"}};
  job.session.device_key = "nobody";  // no device: the jobs stay queued
  job.session.trials = 8;
  const auto refused = [&](rpc_runner::JobSpec crafted, const std::string& says) {
    try {
      client.submit(crafted);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_LT(std::string(e.what()).size(), 300u);
    }
  };
  rpc_runner::JobSpec huge_owner = job;
  huge_owner.owner = std::string(6 << 20, 'o');
  refused(huge_owner, "the owner is 6291456 bytes long; at most 256");
  rpc_runner::JobSpec forged = job;
  forged.owner = "eve\n[info] forged line: admin cancels everything";
  refused(forged, "the owner has a control character");
  rpc_runner::JobSpec model = job;
  model.template_name.clear();
  model.args.clear();
  const nlohmann::json task = {{"template", "matmul"},
                               {"args", {{"M", "8"}, {"N", "8"}, {"K", "8"}}},
                               {"count", 1},
                               {"flop", 1024.0}};
  model.model = {{"model", "m"}, {"tasks", std::vector<nlohmann::json>(20000, task)}};
  refused(model, "a model job of 20000 tasks; at most 4096");
  // Measurements no deadline bounds, refused by the server as by the CLI (one validate()).
  rpc_runner::JobSpec endless = job;
  endless.measure.number = 2147483647;
  refused(endless, "number (runs per timing)");
  endless = job;
  endless.measure.run_timeout_s = std::numeric_limits<double>::infinity();
  refused(endless, "the run timeout (s)");
  endless = job;
  endless.measure.build_timeout_s = 1e308;
  refused(endless, "the build timeout (s)");
  EXPECT_FALSE(logged(server_log(), {"forged line"})) << server_log();
  EXPECT_TRUE(jobs_of(alice).empty());

  const size_t count = rpc_runner::kMaxJobsPage + 5;
  for (size_t i = 0; i < count; ++i) client.submit(job);
  const std::map<uint64_t, std::string> listed = jobs_of(alice);
  ASSERT_EQ(listed.size(), count);
  EXPECT_EQ(listed.begin()->first, 1u);
  EXPECT_EQ(listed.rbegin()->first, count);
  EXPECT_EQ(jobs_of(tokens).size(), count);  // the admin's view, through the same pages
  // One ListJobs call, as an older client makes it: the first page, and `more`.
  auto stub =
      rpc::Tuning::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
  const auto page = [&](uint64_t after) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + kAlice);
    rpc::ListJobsRequest request;
    request.set_all(true);
    request.set_after_id(after);
    rpc::ListJobsReply reply;
    EXPECT_TRUE(stub->ListJobs(&ctx, request, &reply).ok());
    return reply;
  };
  const rpc::ListJobsReply first = page(0);
  ASSERT_EQ(static_cast<size_t>(first.jobs_size()), rpc_runner::kMaxJobsPage);
  EXPECT_TRUE(first.more());
  EXPECT_EQ(first.jobs(0).id(), 1u);
  const rpc::ListJobsReply last = page(first.jobs(first.jobs_size() - 1).id());
  EXPECT_EQ(static_cast<size_t>(last.jobs_size()), count - rpc_runner::kMaxJobsPage);
  EXPECT_FALSE(last.more());
}

}  // namespace
}  // namespace ktune
