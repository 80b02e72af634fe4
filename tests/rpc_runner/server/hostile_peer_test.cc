// Fault tests of the tuning server against peers that hold a valid worker token: a crafted worker
// (FakePeer, whose answers are scripted here) sends non-finite, negative, huge and
// implausibly fast results, 5 MB error texts and absurd hello fields, or heartbeats and never
// answers. `ktune server` and the honest `ktune worker` run as processes on 127.0.0.1.
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "codegen/target.h"
#include "rpc_runner/client/service_client.h"
#include "rpc_runner/protocol/peer_checks.h"
#include "rpc_runner/worker/worker_session.h"
#include "tests/process_util.h"
#include "tests/rpc_runner/server/fake_peer.h"
#include "tests/rpc_runner/server/service_test_util.h"

#define KTUNE_BINARY KTUNE_BIN
#include "tests/cli_util.h"

namespace ktune::rpc_runner {
namespace {

namespace fs = std::filesystem;
using testing::costs;
using testing::error;
using testing::FakePeer;
using testing::wait_until;
using testing_process::Child;
using testing_process::read_file;

// matmul 64x64x64: its flop, for answers that claim a speed.
constexpr double kFlop = 2.0 * 64 * 64 * 64;

class HostilePeer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_.path;
    db_ = temp_.file("server.db");
    const testing::TokenFiles tokens = testing::write_token_files(temp_);
    tokens_ = tokens.server;
    worker_token_ = tokens.worker;
    client_token_ = tokens.client;
  }

  // Starts `ktune server` with the tokens, this deadline margin and calibration proof (seconds);
  // returns false when it does not listen.
  bool start_server(const std::string& deadline_margin, const std::string& proof_s = "1") {
    server_ = std::make_unique<Child>(
        std::vector<std::string>{KTUNE_BIN, "server", "--port", "0", "--db", db_, "--token-file",
                                 tokens_, "--heartbeat", "0.5", "--worker-timeout", "5",
                                 "--deadline-margin", deadline_margin, "--calibration-proof",
                                 proof_s},
        dir_ / "server.out", dir_ / "server.err");
    address_ = testing_process::wait_for_address(dir_ / "server.out");
    if (address_.empty()) return false;
    ServiceClientOptions o;
    o.server = address_;
    o.token_file = client_token_;
    o.timeout_s = 60;  // generous: these tests check outcomes, not how fast calls return
    client_ = std::make_unique<ServiceClient>(o);
    return true;
  }

  WorkerSessionOptions peer_options(const std::string& description) const {
    WorkerSessionOptions o;
    o.server = address_;
    o.key = "cpu";
    o.target = codegen::Target::host().str();
    o.description = description;
    o.cores = 1;
    o.slots = 1;
    o.token_file = worker_token_;
    o.reconnect_initial_s = 0.1;
    o.reconnect_max_s = 0.2;
    return o;
  }

  static JobSpec matmul_job(uint64_t trials, uint64_t batch, const std::string& tuner) {
    JobSpec s;
    s.template_name = "matmul";
    s.args = {{"M", "64"}, {"N", "64"}, {"K", "64"}};
    s.session.device_key = "cpu";
    s.session.trials = trials;
    s.session.tuner = tuner;
    s.session.seed = 3;
    s.session.batch_size = batch;
    return s;
  }

  std::string ktune_args(const std::string& args) const {
    return args + " --server " + address_ + " --token-file " + testing_cli::quote(client_token_);
  }

  testing::TempDir temp_;  // first: removed after the processes below are gone
  fs::path dir_;
  std::string db_, tokens_, worker_token_, client_token_, address_;
  std::unique_ptr<Child> server_;
  std::unique_ptr<ServiceClient> client_;
};

TEST_F(HostilePeer, LiesAreRefusedTheJobCompletesAndTheLogStaysServable) {
  ASSERT_TRUE(start_server("150")) << read_file(dir_ / "server.err");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::string five_mb(5 << 20, 'e');
  // The n-th candidate's answer: the job's first candidate is the fallback config (measured for
  // the speed-up, not recorded); then six lies the server must refuse, three crashes with 5 MB of
  // error text, a kind that is no measurement's, six plausible timings (10 to 10.5 GFLOP/s); then
  // the job's re-timing of its five best records (15 more candidates): a steady 10.25 GFLOP/s.
  FakePeer::Answer answer = [&](size_t n) -> std::optional<rpc::CandidateResult> {
    if (n == 0) return costs({kFlop / 8e9});
    if (n > 16) return costs({kFlop / 10.25e9});
    switch (n - 1) {
      case 0:
        return costs({nan});
      case 1:
        return costs({-1e-3});
      case 2:
        return costs({1e308});
      case 3:
        return costs({kFlop / 10e9}, nan);
      case 4:
        return costs({kFlop / 10e9}, 0.1, -1e308);
      case 5:
        return costs({kFlop / 5000e9});  // 5,000 GFLOP/s on one core
      case 6:
      case 7:
      case 8:
        return error("run", five_mb + "\n\x1b[31m");
      case 9:
        return error("database", "disk full");
      default:
        return costs({kFlop / (10e9 * (1 + 0.01 * static_cast<double>(n - 11)))});
    }
  };
  WorkerSessionOptions liar_options = peer_options(std::string(10 << 20, 'd') + "\n");
  liar_options.slots = 16;
  liar_options.peak_gflops = 1e9;  // its claim: ignored, the server has its own ceiling
  FakePeer liar(liar_options, answer);
  ASSERT_TRUE(wait_until([&] { return client_->devices().size() == 1; }, 20))
      << read_file(dir_ / "server.err");
  EXPECT_LE(client_->devices()[0].description.size(), kMaxDescriptionBytes);

  const JobEvent last = client_->watch(client_->submit(matmul_job(16, 16, "grid")).id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  // The 16 trials and the fallback config (measured for the speed-up, logged once).
  const auto all = testing::log_records(db_);
  ASSERT_EQ(all.size(), 17u);
  std::vector<tuning_db::Record> records;
  for (const auto& r : all)
    if (r.tuner != "fallback") records.push_back(r);
  ASSERT_EQ(records.size(), 16u);
  const auto kinds = testing::kinds_of(records);
  EXPECT_EQ(kinds.at("ok"), 6);
  EXPECT_EQ(kinds.at("unknown"), 7);
  EXPECT_EQ(kinds.at("run"), 3);
  int refused = 0;
  for (const auto& r : records) {
    refused += r.error_message.find("refused from worker") != std::string::npos;
    EXPECT_LE(r.error_message.size(), kMaxErrorTextBytes);
    EXPECT_EQ(r.error_message.find('\n'), std::string::npos);
    EXPECT_TRUE(std::isfinite(r.all_cost) && r.all_cost >= 0) << r.all_cost;
    if (r.ok()) {
      EXPECT_LT(r.gflops(), 11.0);
    }
  }
  EXPECT_EQ(refused, 6);

  // The best record served is a plausible one, not the 5,000 GFLOP/s claim.
  const auto best = client_->best(last.job.workload, last.job.target);
  ASSERT_EQ(best.size(), 1u);
  EXPECT_NEAR(best[0].gflops(), 10.5, 0.3);

  // The log exports through the server, and the device is flagged.
  const auto exported = testing_cli::ktune(ktune_args("db export"), true);
  ASSERT_EQ(exported.status, 0) << exported.err;
  EXPECT_EQ(testing_cli::count_lines(exported.out), 17u);  // every record, the fallback's too
  const auto devices = testing_cli::ktune(ktune_args("server devices"), true);
  ASSERT_EQ(devices.status, 0) << devices.err;
  EXPECT_NE(devices.out.find("FLAGGED: 6 result(s) refused"), std::string::npos) << devices.out;
  EXPECT_EQ(client_->devices()[0].refused, 6u);
}

TEST_F(HostilePeer, AbsurdHelloFieldsAreRefusedWithOneLineAndNotLogged) {
  ASSERT_TRUE(start_server("150")) << read_file(dir_ / "server.err");
  auto never = [](size_t) -> std::optional<rpc::CandidateResult> { return std::nullopt; };
  WorkerSessionOptions huge_key = peer_options("huge key");
  huge_key.key = std::string(1 << 20, 'k');
  WorkerSessionOptions many_cores = peer_options("many cores");
  many_cores.cores = 2147483647;
  WorkerSessionOptions odd_vectors = peer_options("odd vectors");
  odd_vectors.vector_bits = 1000;
  FakePeer a(huge_key, never), b(many_cores, never), c(odd_vectors, never);
  ASSERT_TRUE(wait_until(
      [&] {
        return !a.session().refused_at_start().empty() && !b.session().refused_at_start().empty() &&
               !c.session().refused_at_start().empty();
      },
      20));
  EXPECT_NE(a.session().refused_at_start().find("device key"), std::string::npos);
  EXPECT_NE(b.session().refused_at_start().find("cores 2147483647"), std::string::npos);
  EXPECT_NE(c.session().refused_at_start().find("vector bits 1000"), std::string::npos);
  for (FakePeer* p : {&a, &b, &c})
    EXPECT_LT(p->session().refused_at_start().size(), 200u) << p->session().refused_at_start();
  EXPECT_TRUE(client_->devices().empty());
  EXPECT_LT(fs::file_size(dir_ / "server.err"), 64u << 10) << "the 1 MB key is not in the log";
}

// A worker that says it has 1024 cores on a machine of two: its calibration at attach, timed by
// the device, runs like two (20 GFLOP/s on one core, 40 on all). It is accepted and noted, and its
// results are bounded by what it ran, not by what it said: the 766,771 GFLOP/s a 1024-core hello
// once got accepted on matmul 64 is refused, a plausible 30 GFLOP/s is kept and served. A
// calibration implausible for the declared target (a core at 1e6 GFLOP/s) or cores (one core
// declared, 100 times its one-core figure on all) refuses the worker at attach with one line.
TEST_F(HostilePeer, ResultsAreBoundedByTheCalibrationNotByTheDeclaredCores) {
  ASSERT_TRUE(start_server("150")) << read_file(dir_ / "server.err");
  WorkerSessionOptions o = peer_options("claims 1024 cores");
  o.cores = 1024;
  o.slots = 4;
  // The fallback config first, then four lies, then plausible timings (the re-timing's too).
  FakePeer::Answer answer = [](size_t n) -> std::optional<rpc::CandidateResult> {
    if (n == 0) return costs({kFlop / 25e9});
    if (n <= 4) return costs({kFlop / 766771e9});
    return costs({kFlop / (30e9 * (1 + 0.01 * static_cast<double>(n % 5)))});
  };
  FakePeer liar(o, answer, /*rejoin=*/false, {.core_gflops = 20, .all_gflops = 40});
  ASSERT_TRUE(wait_until(
      [&] {
        const auto d = client_->devices();
        return d.size() == 1 && d[0].core_gflops > 0;
      },
      20))
      << read_file(dir_ / "server.err");
  const DeviceInfo calibrated = client_->devices()[0];
  EXPECT_NEAR(calibrated.core_gflops, 20, 0.01);
  EXPECT_NEAR(calibrated.all_gflops, 40, 0.01);
  EXPECT_EQ(calibrated.calibration_note, "says 1024 cores; its calibration runs like 2.0");

  const JobEvent last = client_->watch(client_->submit(matmul_job(8, 8, "grid")).id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  int refused = 0, ok = 0;
  for (const auto& r : testing::log_records(db_)) {
    refused += r.error_message.find("faster than the device's ceiling") != std::string::npos;
    if (r.ok()) {
      ++ok;
      EXPECT_LT(r.gflops(), 40.0);
    }
  }
  EXPECT_EQ(refused, 4);
  EXPECT_EQ(ok, 5);  // the fallback config and four trials
  const auto best = client_->best(last.job.workload, last.job.target);
  ASSERT_EQ(best.size(), 1u);
  EXPECT_NEAR(best[0].gflops(), 30, 1.5);
  const auto devices = testing_cli::ktune(ktune_args("server devices"), true);
  ASSERT_EQ(devices.status, 0) << devices.err;
  EXPECT_NE(devices.out.find("calibrated: 20.0 GFLOP/s on one core, 40.0 on all (says 1024 cores; "
                             "its calibration runs like 2.0)"),
            std::string::npos)
      << devices.out;
  EXPECT_NE(devices.out.find("FLAGGED: 4 result(s) refused"), std::string::npos) << devices.out;

  auto never = [](size_t) -> std::optional<rpc::CandidateResult> { return std::nullopt; };
  FakePeer fast(peer_options("fast core"), never, false, {.core_gflops = 1e6, .all_gflops = 1e6});
  FakePeer wide(peer_options("wide"), never, false, {.core_gflops = 20, .all_gflops = 2000});
  ASSERT_TRUE(wait_until(
      [&] {
        return !fast.session().last_refusal().empty() && !wide.session().last_refusal().empty();
      },
      20))
      << read_file(dir_ / "server.err");
  EXPECT_NE(fast.session().last_refusal().find("above what a core of its target can"),
            std::string::npos)
      << fast.session().last_refusal();
  EXPECT_NE(wide.session().last_refusal().find("more than its 1 declared core(s)"),
            std::string::npos)
      << wide.session().last_refusal();
  for (FakePeer* p : {&fast, &wide}) {
    EXPECT_LT(p->session().last_refusal().size(), 300u);
    EXPECT_EQ(p->received(), 0u) << "a refused worker got a job's candidate";
  }
}

// A worker that declares 32 cores and times its calibration to match (3,200 GFLOP/s on all, 100
// on one) passes every check of its own figures; the proof, sized to that claim and timed here,
// takes a 2-core machine over four times longer than claimed: refused, one line naming both
// figures. One that forges its proof's outputs is refused for them. Neither gets a candidate.
TEST_F(HostilePeer, AConsistentLiarIsMeasuredNotBelieved) {
  ASSERT_TRUE(start_server("150", "0.25")) << read_file(dir_ / "server.err");
  auto never = [](size_t) -> std::optional<rpc::CandidateResult> { return std::nullopt; };
  WorkerSessionOptions o = peer_options("32 cores, timed to match");
  o.cores = 32;
  FakePeer liar(o, never, false, {.core_gflops = 100, .all_gflops = 3200});
  FakePeer forger(peer_options("forged proof"), never, false,
                  {.core_gflops = 20, .all_gflops = 0, .forge_proof = true});
  ASSERT_TRUE(wait_until(
      [&] {
        return !liar.session().last_refusal().empty() && !forger.session().last_refusal().empty();
      },
      60))
      << read_file(dir_ / "server.err");
  const std::string lie = liar.session().last_refusal(), forged = forger.session().last_refusal();
  EXPECT_NE(lie.find("its calibration runs 3200.0 GFLOP/s on all threads by its own timing; the "
                     "same work took"),
            std::string::npos)
      << lie;
  EXPECT_NE(forged.find("did not run the work it was sent"), std::string::npos) << forged;
  for (const std::string& r : {lie, forged}) {
    EXPECT_LT(r.size(), 300u);
    EXPECT_EQ(r.find('\n'), std::string::npos);
  }
  EXPECT_EQ(liar.received() + forger.received(), 0u) << "a refused worker got a job's candidate";
  // Each may attach again (its session reconnects), never calibrated.
  for (const DeviceInfo& d : client_->devices()) EXPECT_EQ(d.core_gflops, 0) << d.description;
}

// A worker whose calibration is honest but whose timings flatter (35 GFLOP/s where an honest
// worker of its key times 10, under its calibrated ceiling): alone, nothing contradicts it and its
// records lead. Its re-timing of an honest record never becomes that record's figure. Once an
// honest worker of the key re-times its records, they are disputed and not served: the build gets
// the honest figure again, and the honest records it disputed are settled by the honest worker.
TEST_F(HostilePeer, AWorkerWhoseTimingsDisagreeIsDisputedAndNeverRewritesAnHonestRecord) {
  ASSERT_TRUE(start_server("150")) << read_file(dir_ / "server.err");
  const auto at = [](double gflops) {
    return [gflops](size_t n) -> std::optional<rpc::CandidateResult> {
      return costs({kFlop / (gflops * 1e9 * (1 + 0.01 * static_cast<double>(n % 5)))});
    };
  };
  const auto attached = [&](size_t n) {
    return wait_until(
        [&] {
          const auto d = client_->devices();
          return d.size() == n && (n == 0 || d[0].core_gflops > 0);
        },
        20);
  };
  const auto run = [&](uint64_t trials) {
    const JobEvent last = client_->watch(client_->submit(matmul_job(trials, 4, "random")).id);
    EXPECT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
    return last.job;
  };
  // The first timing's speed: what the worker that measured it said.
  const auto said = [](const tuning_db::Record& r) { return kFlop / r.mean_cost() / 1e9; };

  auto honest = std::make_unique<FakePeer>(peer_options("honest"), at(10));
  ASSERT_TRUE(attached(1)) << read_file(dir_ / "server.err");
  const JobStatus first = run(8);
  honest.reset();
  ASSERT_TRUE(attached(0));

  auto flatterer = std::make_unique<FakePeer>(peer_options("flatterer"), at(35));
  ASSERT_TRUE(attached(1)) << read_file(dir_ / "server.err");
  run(4);
  // Alone, its records lead; its rounds on an honest record (the fallback config's, when it
  // re-timed it) are never that record's figure.
  auto best = client_->best(first.workload, first.target);
  ASSERT_EQ(best.size(), 1u);
  EXPECT_GT(best[0].gflops(), 30);
  for (const auto& r : testing::log_records(db_)) {
    if (!r.ok() || said(r) > 20) continue;
    for (double round : r.retimed_costs)
      EXPECT_LT(kFlop / round / 1e9, 20) << "config " << r.config_index << " of " << r.worker;
  }
  flatterer.reset();
  ASSERT_TRUE(attached(0));

  honest = std::make_unique<FakePeer>(peer_options("honest again"), at(10));
  ASSERT_TRUE(attached(1)) << read_file(dir_ / "server.err");
  const JobStatus last = run(4);
  best = client_->best(last.workload, last.target);
  ASSERT_EQ(best.size(), 1u);
  EXPECT_LT(best[0].gflops(), 12);
  int flattering = 0;
  for (const auto& r : testing::log_records(db_)) {
    if (!r.ok()) continue;
    if (said(r) > 20) {
      ++flattering;
      EXPECT_TRUE(r.disputed) << "config " << r.config_index << " at " << r.gflops();
      EXPECT_GT(r.gflops(), 30) << "its figure stays its own device's";
    } else {
      EXPECT_FALSE(r.disputed) << "config " << r.config_index << " at " << r.gflops();
      EXPECT_LT(r.gflops(), 12) << "config " << r.config_index;
    }
  }
  EXPECT_GE(flattering, 4);
  const auto stats = testing_cli::ktune("db stats --db " + testing_cli::quote(db_), true);
  ASSERT_EQ(stats.status, 0) << stats.err;
  EXPECT_NE(stats.out.find("disputed   " + std::to_string(flattering) + " of the ok records"),
            std::string::npos)
      << stats.out;
}

TEST_F(HostilePeer, AWorkerThatHeartbeatsButNeverAnswersIsDetachedAndTheJobCompletes) {
  ASSERT_TRUE(start_server("5")) << read_file(dir_ / "server.err");
  WorkerSessionOptions o = peer_options("mute");
  o.slots = 4;
  FakePeer mute(o, [](size_t) -> std::optional<rpc::CandidateResult> { return std::nullopt; });
  ASSERT_TRUE(wait_until([&] { return client_->devices().size() == 1; }, 20));
  JobSpec spec = matmul_job(12, 4, "random");
  spec.measure.build_timeout_s = 4;
  spec.measure.run_timeout_s = 4;
  const uint64_t id = client_->submit(spec).id;
  ASSERT_TRUE(wait_until(
      [&] {
        const auto devices = client_->devices();
        return devices.size() == 1 && devices[0].in_flight > 0;
      },
      30));
  // An honest worker joins; the mute one's candidate (the fallback config, the job's first) comes
  // to it once its deadline passed (5 s + 8 s).
  Child honest({KTUNE_BIN, "worker", "--server", address_, "--key", "cpu", "--slots", "1",
                "--runner", KTUNE_RUNNER_PATH, "--token-file", worker_token_},
               dir_ / "honest.out", dir_ / "honest.err");
  const JobEvent last = client_->watch(id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  const auto records = testing::log_records(db_);
  EXPECT_EQ(records.size(), 13u);  // 12 trials and the fallback config
  // What the honest worker measured: ok, unless this machine is so loaded that a build took
  // over its timeout; never a lost candidate or a refused result.
  auto kinds = testing::kinds_of(records);
  EXPECT_GT(kinds["ok"], 0) << read_file(dir_ / "honest.err");
  EXPECT_EQ(kinds["worker_lost"], 0);
  EXPECT_EQ(kinds["unknown"], 0);
  std::set<int64_t> configs;
  for (const auto& r : records) configs.insert(r.config_index);
  EXPECT_EQ(configs.size(), records.size()) << "a config was recorded twice";
  const std::string log = read_file(dir_ / "server.err");
  EXPECT_NE(log.find("past their deadline"), std::string::npos) << log;
  ASSERT_EQ(client_->devices().size(), 1u);
  EXPECT_NE(client_->devices()[0].description, "mute");
}

// A worker that answers every candidate kUnsupported beside an honest `ktune worker` of the same
// key: its answer is its own, the candidates go to the honest one and the job completes with
// every trial measured there. Alone, the same worker fails the next job with its answer.
TEST_F(HostilePeer, OneWorkersUnsupportedGoesToAnotherWorkerOfTheKey) {
  ASSERT_TRUE(start_server("150")) << read_file(dir_ / "server.err");
  WorkerSessionOptions o = peer_options("cannot");
  o.slots = 4;
  FakePeer cannot(o, [](size_t) -> std::optional<rpc::CandidateResult> {
    return error(std::string(to_string(ErrorKind::kUnsupported)), "no such instruction set here");
  });
  ASSERT_TRUE(wait_until([&] { return client_->devices().size() == 1; }, 20));
  Child honest({KTUNE_BIN, "worker", "--server", address_, "--key", "cpu", "--slots", "1",
                "--runner", KTUNE_RUNNER_PATH, "--token-file", worker_token_},
               dir_ / "honest.out", dir_ / "honest.err");
  ASSERT_TRUE(wait_until([&] { return client_->devices().size() == 2; }, 20));
  const JobEvent last = client_->watch(client_->submit(matmul_job(8, 4, "random")).id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  const auto records = testing::log_records(db_);
  EXPECT_EQ(records.size(), 9u);  // 8 trials and the fallback config
  EXPECT_EQ(testing::kinds_of(records)["unsupported"], 0);
  EXPECT_GT(cannot.received(), 0u);  // it was asked, and said no
  const std::string log = read_file(dir_ / "server.err");
  EXPECT_NE(log.find("it goes to another worker of the key"), std::string::npos) << log;

  honest.kill(SIGKILL);
  ASSERT_TRUE(wait_until([&] { return client_->devices().size() == 1; }, 30));
  JobSpec second = matmul_job(4, 4, "random");
  second.args = {{"M", "32"}, {"N", "64"}, {"K", "64"}};
  const JobEvent failed = client_->watch(client_->submit(second).id);
  EXPECT_EQ(failed.job.state, tuning_db::JobState::kFailed);
  EXPECT_NE(failed.job.message.find("cannot run this task: no such instruction set here"),
            std::string::npos)
      << failed.job.message;
}

// A server's log of two targets: the honest `ktune worker` on this host (key cpu) and a 4-core
// AArch64 board (a crafted worker answering plausible timings, key arm). `db export --server`,
// then `db import` into a local log, then `db export` of that log gives back every record, each
// instantiated against its own target (the board's spaces once lost the configs with
// parallel = 1: a foreign target read without its device's cores); so does `report --server`.
TEST_F(HostilePeer, AMultiTargetServerLogRoundTripsThroughExportAndImport) {
  // No calibration proof: the crafted AArch64 board below cannot run its proof's kernel here.
  ASSERT_TRUE(start_server("150", "0")) << read_file(dir_ / "server.err");
  Child honest({KTUNE_BIN, "worker", "--server", address_, "--key", "cpu", "--slots", "1",
                "--runner", KTUNE_RUNNER_PATH, "--token-file", worker_token_},
               dir_ / "honest.out", dir_ / "honest.err");
  WorkerSessionOptions board = peer_options("board");
  board.key = "arm";
  board.target = "llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72";
  board.cores = 4;
  board.slots = 4;
  FakePeer arm(board, [](size_t n) -> std::optional<rpc::CandidateResult> {
    return costs({kFlop / (2e9 * (1 + 0.01 * static_cast<double>(n % 7)))});
  });
  ASSERT_TRUE(wait_until([&] { return client_->devices().size() == 2; }, 20))
      << read_file(dir_ / "server.err");
  JobSpec on_arm = matmul_job(24, 8, "random");
  on_arm.session.device_key = "arm";
  const JobEvent arm_done = client_->watch(client_->submit(on_arm).id);
  ASSERT_EQ(arm_done.job.state, tuning_db::JobState::kDone) << arm_done.job.message;
  const JobEvent cpu_done = client_->watch(client_->submit(matmul_job(8, 4, "random")).id);
  ASSERT_EQ(cpu_done.job.state, tuning_db::JobState::kDone) << cpu_done.job.message;
  EXPECT_NE(arm_done.job.target, cpu_done.job.target);

  const auto exported = testing_cli::ktune(ktune_args("db export"), true);
  ASSERT_EQ(exported.status, 0) << exported.err;
  const std::vector<tuning_db::Record> server_records = testing::log_records(db_);
  ASSERT_EQ(testing_cli::count_lines(exported.out), server_records.size());
  int parallel_on_arm = 0;
  for (const auto& r : server_records)
    parallel_on_arm += r.target.target == arm_done.job.target &&
                       r.config.dump().find("\"parallel\",\"ot\",1") != std::string::npos;
  EXPECT_GT(parallel_on_arm, 0) << "no config of the board's with parallel = 1: nothing tested";
  const std::string file = (dir_ / "server.jsonl").string();
  {
    std::ofstream out(file);
    out << exported.out;
  }
  const std::string local = (dir_ / "local.db").string();
  const auto imported = testing_cli::ktune(
      "db import " + testing_cli::quote(file) + " --db " + testing_cli::quote(local) + " --json",
      true);
  ASSERT_EQ(imported.status, 0) << imported.out << imported.err;
  const auto report = nlohmann::json::parse(imported.out);
  EXPECT_EQ(report.at("imported").get<size_t>(), server_records.size()) << imported.out;
  EXPECT_EQ(report.at("rejected").get<int64_t>(), 0) << imported.out;
  // The local log's export is the server's, record for record (in its own order).
  const auto again = testing_cli::ktune("db export --db " + testing_cli::quote(local), true);
  ASSERT_EQ(again.status, 0) << again.err;
  auto lines = [](const std::string& text) {
    std::multiset<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) out.insert(nlohmann::json::parse(line).dump());
    return out;
  };
  EXPECT_EQ(lines(again.out), lines(exported.out));
  // The report through the server reads the same records: none skipped.
  const auto html = testing_cli::ktune(
      ktune_args("report -o " + testing_cli::quote((dir_ / "report.html").string())), true);
  ASSERT_EQ(html.status, 0) << html.err;
  EXPECT_EQ(html.err.find("skipped"), std::string::npos) << html.err;
  EXPECT_TRUE(fs::exists(dir_ / "report.html"));
}

TEST_F(HostilePeer, ACandidateNoWorkerAnswersFailsAsWorkerLostAfterThreeDeadlines) {
  ASSERT_TRUE(start_server("0.5")) << read_file(dir_ / "server.err");
  // It gives its candidate up when dropped and attaches again, as a new worker, every time.
  FakePeer mute(
      peer_options("mute"),
      [](size_t) -> std::optional<rpc::CandidateResult> { return std::nullopt; },
      /*rejoin=*/true);
  ASSERT_TRUE(wait_until([&] { return client_->devices().size() == 1; }, 20));
  JobSpec spec = matmul_job(2, 2, "random");
  spec.measure.build_timeout_s = 0.5;
  spec.measure.run_timeout_s = 0.5;
  const JobEvent last = client_->watch(client_->submit(spec).id);
  ASSERT_EQ(last.job.state, tuning_db::JobState::kDone) << last.job.message;
  const auto records = testing::log_records(db_);
  ASSERT_EQ(records.size(), 3u);  // the 2 trials and the fallback config, each lost
  EXPECT_EQ(testing::kinds_of(records)["worker_lost"], 3);
  EXPECT_NE(records[0].error_message.find("3 workers"), std::string::npos)
      << records[0].error_message;
  EXPECT_EQ(mute.received(), 9u) << "the fallback and each trial went out three times";
}

}  // namespace
}  // namespace ktune::rpc_runner
