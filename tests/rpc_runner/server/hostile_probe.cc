// ktune-hostile-probe: a crafted device worker for scripts/hostile. It attaches to a tuning server
// with a valid worker token and answers every candidate as its case says (non-finite, negative,
// huge or implausibly fast costs, huge error text, an error kind of no measurement, never,
// kUnsupported, a plausible timing at once, or one four times faster), or says hello with an absurd
// field, or answers the server's calibration at attach with an implausible one. A result case
// serves until SIGTERM or SIGINT (exit 0); a hello case exits 0 once attached (the server took the
// absurd field), a calibration case once calibrated (no refusal within 10 s of attaching). Refused
// at its hello or its calibration, it prints the server's one line and exits 1. A client case
// (client-...) is a crafted client instead, with a client's token: it submits a job whose text the
// CLI would refuse before sending (a 6 MB owner, an owner that forges a log line, a model job of
// 20,000 tasks) straight to SubmitJob; refused, it prints the server's one line and exits 1;
// accepted, it exits 0.
//   ktune-hostile-probe --server HOST:PORT --token-file FILE --key KEY --case CASE [--slots N]
//                       [--delay-ms D]   (each answer D ms after its candidate came)
//                       [--target T] [--cores N]   (the hello's; default this host, 1 core)
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "codegen/target.h"
#include "rpc_runner/client/service_client.h"
#include "rpc_runner/protocol/job_types.h"
#include "support/error.h"
#include "tests/rpc_runner/server/fake_peer.h"

namespace ktune::rpc_runner {
namespace {

using testing::costs;
using testing::error;
using Answer = testing::FakePeer::Answer;

// The answer of each result case to its n-th candidate.
const std::map<std::string, Answer>& answers() {
  static const std::map<std::string, Answer> cases = {
      {"plausible", [](size_t n) { return costs({1e-3 * (1 + 1e-3 * static_cast<double>(n))}); }},
      // Four times faster than "plausible" says, under any calibrated ceiling: only another
      // device of its key can contradict it.
      {"flattering",
       [](size_t n) { return costs({0.25e-3 * (1 + 1e-3 * static_cast<double>(n))}); }},
      {"nan-costs", [](size_t) { return costs({std::numeric_limits<double>::quiet_NaN()}); }},
      {"negative-costs", [](size_t) { return costs({-1e-3}); }},
      {"huge-costs", [](size_t) { return costs({1e308}); }},
      {"too-fast", [](size_t) { return costs({1e-15}); }},
      {"nan-times", [](size_t) { return costs({1e-3}, std::numeric_limits<double>::quiet_NaN()); }},
      {"huge-error-text",
       [](size_t) { return error("run", std::string(5 << 20, 'e') + "\n\x1b[31m"); }},
      {"foreign-error-kind", [](size_t) { return error("database", "disk full"); }},
      {"unsupported",
       [](size_t) {
         return error(std::string(to_string(ErrorKind::kUnsupported)), "not on this device");
       }},
      {"silent", [](size_t) -> std::optional<rpc::CandidateResult> { return std::nullopt; }},
  };
  return cases;
}

// The hello of each hello case, from the honest one.
const std::map<std::string, std::function<void(WorkerSessionOptions&)>>& hellos() {
  static const std::map<std::string, std::function<void(WorkerSessionOptions&)>> cases = {
      {"huge-key", [](WorkerSessionOptions& o) { o.key = std::string(1 << 20, 'k'); }},
      {"huge-target", [](WorkerSessionOptions& o) { o.target = std::string(1 << 20, 't'); }},
      {"many-cores", [](WorkerSessionOptions& o) { o.cores = 2147483647; }},
      {"odd-vector-bits", [](WorkerSessionOptions& o) { o.vector_bits = 1000; }},
      {"many-slots", [](WorkerSessionOptions& o) { o.slots = 100000; }},
      {"nan-peak",
       [](WorkerSessionOptions& o) { o.peak_gflops = std::numeric_limits<double>::quiet_NaN(); }},
  };
  return cases;
}

// The job of each client case: a valid one-workload job, then the crafted part.
const std::map<std::string, std::function<void(JobSpec&)>>& client_jobs() {
  static const std::map<std::string, std::function<void(JobSpec&)>> cases = {
      {"client-huge-owner", [](JobSpec& j) { j.owner = std::string(6 << 20, 'o'); }},
      {"client-forged-log-line",
       [](JobSpec& j) { j.owner = "eve\n[info] forged line: admin cancels everything\x1b[2J"; }},
      // Measurements no deadline bounds: the server refuses them as the CLI does (one
      // validate(MeasureOptions)), before any worker sees the job.
      {"client-endless-measure",
       [](JobSpec& j) {
         j.measure.number = 2147483647;
         j.measure.repeat = 2147483647;
       }},
      {"client-endless-timeout",
       [](JobSpec& j) {
         j.measure.build_timeout_s = 1e308;
         j.measure.run_timeout_s = std::numeric_limits<double>::infinity();
       }},
      {"client-huge-model",
       [](JobSpec& j) {
         nlohmann::json task = {{"template", "matmul"},
                                {"args", {{"M", "8"}, {"N", "8"}, {"K", "8"}}},
                                {"count", 1},
                                {"flop", 1024.0}};
         j.template_name.clear();
         j.args.clear();
         j.model = {{"model", "m"}, {"tasks", std::vector<nlohmann::json>(20000, task)}};
       }},
  };
  return cases;
}

// The calibration each calibration case answers (GFLOP/s on one core, on all), with one core
// declared: a core faster than any core of the target, all cores faster than the cores declared;
// its proof forged (zeros at once); and a consistent liar, which declares 32 cores (kLiarCores),
// times itself to match and then runs its proof for real, at this machine's speed.
constexpr int kLiarCores = 32;
const std::map<std::string, testing::FakeCalibration>& calibrations() {
  static const std::map<std::string, testing::FakeCalibration> cases = {
      {"calibration-too-fast", {1e6, 1e6}},
      {"calibration-beyond-its-cores", {20, 2000}},
      {"calibration-forged-proof", {20, 0, true}},
      {"calibration-consistent-liar", {100, 100 * kLiarCores}},
  };
  return cases;
}

// A client case: the crafted job straight to SubmitJob (no local validate()).
int submit_crafted(const std::map<std::string, std::string>& flags) {
  JobSpec job;
  job.template_name = "matmul";
  job.args = {{"M", "16"}, {"N", "16"}, {"K", "16"}};
  job.session.device_key = flags.at("--key");
  job.session.trials = 8;
  client_jobs().at(flags.at("--case"))(job);
  ServiceClientOptions o;
  o.server = flags.at("--server");
  o.token_file = flags.count("--token-file") ? flags.at("--token-file") : "";
  o.timeout_s = 30;
  const JobStatus accepted = ServiceClient(o).submit(job);
  std::printf("accepted as job %llu\n", static_cast<unsigned long long>(accepted.id));
  return 0;
}

int run(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  for (int i = 1; i + 1 < argc; i += 2) flags[argv[i]] = argv[i + 1];
  for (const char* required : {"--server", "--key", "--case"})
    if (!flags.count(required))
      throw Error(ErrorKind::kInvalidArgument, std::string("missing ") + required);
  if (client_jobs().count(flags["--case"])) return submit_crafted(flags);
  WorkerSessionOptions o;
  o.server = flags["--server"];
  o.key = flags["--key"];
  o.token_file = flags["--token-file"];
  o.target = flags.count("--target") ? flags["--target"] : codegen::Target::host().str();
  o.description = "hostile probe: " + flags["--case"];
  o.cores = flags.count("--cores") ? std::stoi(flags["--cores"]) : 1;
  o.slots = flags.count("--slots") ? std::stoi(flags["--slots"]) : 4;
  o.reconnect_initial_s = 0.1;
  o.reconnect_max_s = 0.5;
  const std::string& name = flags["--case"];
  Answer answer = answers().at("plausible");
  testing::FakeCalibration calibration;
  if (answers().count(name))
    answer = answers().at(name);
  else if (hellos().count(name))
    hellos().at(name)(o);
  else if (calibrations().count(name))
    calibration = calibrations().at(name);
  else
    throw Error(ErrorKind::kInvalidArgument, "unknown case '" + name + "'");
  if (name == "calibration-consistent-liar") o.cores = kLiarCores;
  if (const int delay_ms = flags.count("--delay-ms") ? std::stoi(flags["--delay-ms"]) : 0;
      delay_ms > 0)
    answer = [answer, delay_ms](size_t n) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      return answer(n);
    };

  // Blocked before the session starts its threads, so the signals reach only sigwait below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  testing::FakePeer peer(o, answer, /*rejoin=*/true, calibration);
  // Attached, or refused, within 20 s.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!peer.session().attached() && peer.session().refused_at_start().empty() &&
         std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (!peer.session().refused_at_start().empty())
    throw Error(ErrorKind::kInvalidArgument, peer.session().refused_at_start());
  if (!peer.session().attached())
    throw Error(ErrorKind::kIo, "not attached to " + o.server + " after 20 s");
  std::printf("attached\n");
  std::fflush(stdout);
  if (hellos().count(name)) return 0;
  if (calibrations().count(name)) {
    // The liar's proof runs for real: 3.2 TFLOP at this machine's speed.
    const auto calibrated = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (peer.session().last_refusal().empty() && std::chrono::steady_clock::now() < calibrated)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!peer.session().last_refusal().empty())
      throw Error(ErrorKind::kInvalidArgument, peer.session().last_refusal());
    return 0;
  }
  int signal = 0;
  sigwait(&signals, &signal);
  return 0;
}

}  // namespace
}  // namespace ktune::rpc_runner

int main(int argc, char** argv) {
  try {
    return ktune::rpc_runner::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ktune-hostile-probe: %s\n", e.what());
    return 1;
  }
}
