// ktune-device: the device program for boards without LLVM (AArch64 boards, phones). It dials
// out to a tuning server, receives kernels the server cross-built and linked, and checks and
// times them in an isolated child (this same program, started with --fd).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "rpc_runner/runner/runner_service.h"
#include "rpc_runner/worker/prebuilt_runner.h"
#include "rpc_runner/worker/worker_session.h"
#include "support/error.h"
#include "support/logging.h"
#include "support/version.h"
#include "tools/device_target.h"
#include "tools/option_checks.h"

namespace {

struct Options {
  ktune::rpc_runner::WorkerSessionOptions session;
  std::string cpu;             // "" = detect
  std::string target;          // "" = detected
  std::string runner_wrapper;  // command the runner child is started through ("" = none)
  bool verbose = false;
};

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Serves until SIGINT/SIGTERM. Returns the exit status.
int serve(Options o, const std::string& self) {
  const ktune::tools::DeviceTarget detected = ktune::tools::detect_device_target(o.cpu);
  o.session.target = o.target.empty() ? detected.str() : o.target;
  o.session.cores = detected.cores;
  if (o.session.description.empty()) {
    char host[256] = {0};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    o.session.description = "ktune-device, cpu " + detected.cpu + " (" + detected.cpu_source +
                            "), " + detected.triple + ", " + std::to_string(detected.cores) +
                            " cores" + (host[0] ? std::string(", host ") + host : "") +
                            (o.session.emulated ? ", emulated" : "");
  }
  o.session.can_build = false;  // no compiler here: the server sends linked kernels

  // Blocked before any thread starts, so the signals reach only sigtimedwait below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ktune::rpc_runner::PrebuiltRunner runner(self, split_words(o.runner_wrapper));
  auto measure = [&runner](const std::vector<ktune::rpc::Candidate>& batch,
                           const std::string& target) {
    std::vector<ktune::rpc::CandidateResult> results;
    for (const ktune::rpc::Candidate& c : batch) {
      results.push_back(runner.run(c, target));
      const ktune::rpc::CandidateResult& r = results.back();
      if (r.error_kind() == "unsupported")
        spdlog::error("candidate {} refused: {}", c.id(), r.error_message());
      else
        spdlog::debug("candidate {}: {}", c.id(), r.error_kind().empty() ? "ok" : r.error_kind());
    }
    return results;
  };
  spdlog::info("ktune-device: key {}, target '{}', dialing {}", o.session.key, o.session.target,
               o.session.server);
  ktune::rpc_runner::WorkerSession session(o.session, measure);
  const timespec poll{0, 200'000'000};
  int signal = -1;
  while (signal < 0) {
    signal = sigtimedwait(&signals, nullptr, &poll);
    if (signal >= 0) break;
    const std::string refused = session.refused_at_start();
    if (!refused.empty()) {
      session.stop();
      spdlog::error("the tuning server at {} refused this device: {}", o.session.server, refused);
      return 1;
    }
  }
  spdlog::info("{}: detaching ({} results sent)", signal == SIGINT ? "SIGINT" : "SIGTERM",
               session.results_sent());
  session.stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // The runner child: started by this program itself as `ktune-device --fd N`.
  if (argc == 3 && std::strcmp(argv[1], "--fd") == 0)
    return ktune::rpc_runner::serve(std::atoi(argv[2]), ktune::rpc_runner::make_kernel_loader());

  Options o;
  o.session.slots = 1;  // one kernel at a time: timings on a small board must not overlap
  CLI::App app{
      "ktune-device: serve this board as a device of a ktune tuning server (no compiler needed)"};
  app.set_version_flag("--version", std::string("ktune-device ") + ktune::kVersion);
  app.add_option("--server", o.session.server, "The tuning server, HOST:PORT")->required();
  app.add_option("--key", o.session.key, "Device key that jobs name (e.g. rk3399)")->required();
  app.add_option("--token-file", o.session.token_file, "File with the worker token")
      ->check(CLI::ExistingFile);
  app.add_flag(
      "--allow-readable-token", o.session.allow_readable_token,
      "Accept a token file that group or others may read (refused by default, as ssh does)");
  app.add_option("--tls-ca", o.session.tls_ca_file,
                 "PEM of the CA that signed the server's certificate (TLS)")
      ->check(CLI::ExistingFile);
  app.add_option("--cpu", o.cpu,
                 "This board's core as LLVM names it (default: from /proc/cpuinfo)");
  app.add_option("--target", o.target, "Full target string, instead of the detected one");
  app.add_option(
         "--peak-gflops", o.session.peak_gflops,
         "This device's f32 peak (informational: the server bounds results by its own ceiling)")
      ->check(ktune::tools::finite_in(0, 1e9));
  app.add_option("--description", o.session.description,
                 "Free text shown by `ktune server devices`");
  app.add_flag(
      "--emulated", o.session.emulated,
      "This program runs under an emulator (qemu): the server marks its timings as emulated");
  app.add_option("--runner-wrapper", o.runner_wrapper,
                 "Command that starts this program's runner children, e.g. qemu-aarch64-static "
                 "under emulation");
  app.add_option("--reconnect-max", o.session.reconnect_max_s,
                 "Longest wait between reconnection attempts, s")
      ->capture_default_str()
      ->check(ktune::tools::finite_in(0.1, 3600));
  app.add_flag("-v,--verbose", o.verbose, "Log every candidate");
  // Tests only: claim another wire version, to see the server refuse it.
  app.add_option("--protocol-version", o.session.protocol_version)->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  ktune::LoggingOptions logging;
  logging.verbose = o.verbose;
  ktune::setup_logging(logging);
  try {
    std::error_code ec;
    const std::string self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    if (ec)
      throw ktune::Error(ktune::ErrorKind::kIo, "cannot read /proc/self/exe: " + ec.message());
    return serve(o, self);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}
