// `ktune worker`: attach this machine to a tuning server as a device and serve until
// SIGINT/SIGTERM; or, with --simulate, attach simulated devices that answer from a recorded
// landscape.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "rpc_runner/worker/device_worker.h"
#include "rpc_runner/worker/simulated_fleet.h"
#include "support/error.h"
#include "tools/commands.h"
#include "tools/option_checks.h"

namespace ktune::tools {
namespace {

// What `ktune worker --simulate` adds to a worker's options.
struct Simulation {
  std::string landscape;  // "" = a real worker
  double delay_ms = 0;
  int devices = 1;
};

// Serves until SIGINT or SIGTERM. `worker` is a DeviceWorker or a SimulatedFleet; one the server
// refuses before it was ever attached (wrong token, other protocol version, TLS that does not
// match) is misconfigured: that is this command's error, not a reason to retry.
template <class Worker>
void serve_until_signal(Worker& worker, const sigset_t& signals, const std::string& server) {
  const timespec poll{0, 200'000'000};
  int signal = -1;
  while (signal < 0) {
    signal = sigtimedwait(&signals, nullptr, &poll);
    if (signal >= 0) break;
    const std::string refused = worker.refused_at_start();
    if (!refused.empty()) {
      worker.stop();
      throw Error(ErrorKind::kInvalidArgument,
                  "the tuning server at " + server + " refused this worker: " + refused);
    }
  }
  spdlog::info("{}: detaching", signal == SIGINT ? "SIGINT" : "SIGTERM");
  worker.stop();
}

void run_worker(const rpc_runner::DeviceWorkerOptions& options, const Simulation& simulation) {
  // Blocked before the worker starts its threads, so the signals reach only sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  if (simulation.landscape.empty()) {
    rpc_runner::DeviceWorker worker(options);
    serve_until_signal(worker, signals, options.server);
    return;
  }
  rpc_runner::SimulatedFleetOptions o;
  o.worker.server = options.server;
  o.worker.key = options.key;
  o.worker.description = options.description;
  o.worker.slots = std::max(options.slots, 1);
  o.worker.token_file = options.token_file;
  o.worker.allow_readable_token = options.allow_readable_token;
  o.worker.tls_ca_file = options.tls_ca_file;
  o.worker.reconnect_max_s = options.reconnect_max_s;
  o.devices = simulation.devices;
  o.delay_s = simulation.delay_ms / 1e3;
  o.seed = static_cast<uint64_t>(::getpid());  // workers started together jitter apart
  rpc_runner::SimulatedFleet fleet(o, std::make_shared<rpc_runner::LandscapeAnswers>(
                                          tuner::read_landscape(simulation.landscape)));
  spdlog::info("{} simulated device(s) replaying {} for {}", simulation.devices,
               simulation.landscape, options.server);
  serve_until_signal(fleet, signals, options.server);
}

void add_worker(CLI::App& app) {
  auto o = std::make_shared<rpc_runner::DeviceWorkerOptions>();
  auto sim = std::make_shared<Simulation>();
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
  cmd->add_option("--simulate", sim->landscape,
                  "Answer from this recorded landscape (bench/landscapes/) instead of building and "
                  "running kernels: a simulated device, to exercise a server")
      ->check(CLI::ExistingFile);
  cmd->add_option("--delay-ms", sim->delay_ms,
                  "With --simulate: each answer leaves this long after its candidate came, ms")
      ->capture_default_str()
      ->check(finite_in(0, 3.6e6));
  cmd->add_option("--devices", sim->devices,
                  "With --simulate: simulated devices in this process, each its own connection")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000));
  cmd->callback([o, sim] {
    if (sim->landscape.empty() && (sim->delay_ms != 0 || sim->devices != 1))
      throw Error(ErrorKind::kInvalidArgument, "--delay-ms and --devices need --simulate");
    run_worker(*o, *sim);
  });
}

}  // namespace

KTUNE_REGISTER_COMMAND(worker, add_worker);

}  // namespace ktune::tools
