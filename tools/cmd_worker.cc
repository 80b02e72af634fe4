// `ktune worker`: attach this machine to a tuning server as a device and serve until
// SIGINT/SIGTERM.
#include <pthread.h>
#include <signal.h>

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "rpc_runner/worker/device_worker.h"
#include "support/error.h"
#include "tools/commands.h"
#include "tools/option_checks.h"

namespace ktune::tools {
namespace {

void run_worker(const rpc_runner::DeviceWorkerOptions& options) {
  // Blocked before the worker starts its threads, so the signals reach only sigwait below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  rpc_runner::DeviceWorker worker(options);
  // Until a signal; a worker the server refuses before it was ever attached (wrong token, other
  // protocol version, TLS that does not match) is misconfigured: that is this command's error, not
  // a reason to retry.
  const timespec poll{0, 200'000'000};
  int signal = -1;
  while (signal < 0) {
    signal = sigtimedwait(&signals, nullptr, &poll);
    if (signal >= 0) break;
    const std::string refused = worker.refused_at_start();
    if (!refused.empty()) {
      worker.stop();
      throw Error(ErrorKind::kInvalidArgument,
                  "the tuning server at " + options.server + " refused this worker: " + refused);
    }
  }
  spdlog::info("{}: detaching", signal == SIGINT ? "SIGINT" : "SIGTERM");
  worker.stop();
}

void add_worker(CLI::App& app) {
  auto o = std::make_shared<rpc_runner::DeviceWorkerOptions>();
  auto* cmd = app.add_subcommand(
      "worker", "Serve this machine as a device of a tuning server (builds and times kernels)");
  cmd->add_option("--server", o->server, "The tuning server, HOST:PORT")->required();
  cmd->add_option("--key", o->key, "Device key that jobs name (e.g. x86-avx512)")->required();
  cmd->add_option("--token-file", o->token_file,
                  "File with the worker token (a bare token, or the server's token file)")
      ->check(CLI::ExistingFile);
  cmd->add_flag(
      "--allow-readable-token", o->allow_readable_token,
      "Accept a token file that group or others may read (refused by default, as ssh does)");
  cmd->add_option("--tls-ca", o->tls_ca_file,
                  "PEM of the CA that signed the server's certificate (TLS)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--slots", o->slots, "Candidates taken at once, built in parallel (0 = cores)")
      ->capture_default_str()
      ->check(finite_in(0, 64));
  cmd->add_option(
         "--peak-gflops", o->peak_gflops,
         "This device's f32 peak (informational: the server bounds results by its own ceiling)")
      ->check(finite_in(0, 1e9));
  cmd->add_flag(
      "--no-build", [o](int64_t) { o->can_build = false; },
      "Do not build kernels here: the server cross-builds them (a device without LLVM)");
  cmd->add_flag(
      "--emulated", o->emulated,
      "This machine emulates the device (qemu): the server marks its timings as emulated");
  cmd->add_option("--runner", o->runner_path,
                  "The ktune-runner executable (default: next to ktune)");
  cmd->add_option("--description", o->description, "Free text shown by `ktune server devices`");
  cmd->add_option("--reconnect-max", o->reconnect_max_s,
                  "Longest wait between reconnection attempts, s")
      ->capture_default_str()
      ->check(finite_in(0.1, 3600));
  cmd->callback([o] { run_worker(*o); });
}

}  // namespace

KTUNE_REGISTER_COMMAND(worker, add_worker);

}  // namespace ktune::tools
