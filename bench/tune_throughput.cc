// Benchmark: tuning throughput of `ktune tune` on this machine — random search over matmul
// 512x512x512 through the local runner; trials per second and where the wall time goes.
// Usage: tune_throughput [trials] [--remote]
//   --remote also runs the same search as a job of a tuning server with one device worker on
//   this machine (gRPC over loopback; the worker builds and times), and ends with
//   `remote_over_local <trials/s ratio>`.
// Last line otherwise: `trials_per_s <x>`.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "codegen/target.h"
#include "rpc_runner/client/service_client.h"
#include "rpc_runner/runner/local_runner.h"
#include "rpc_runner/server/tuning_server.h"
#include "rpc_runner/worker/device_worker.h"
#include "schedule_space/task.h"
#include "tuner/basic_tuners.h"
#include "tuner/tune.h"

namespace {

using namespace ktune;

// Runs `trials` random trials (seed 1) through `runner`, prints the table; returns trials/s.
double run(const char* label, const schedule_space::Task& task, rpc_runner::ChannelRunner& runner,
           size_t trials) {
  tuner::RandomTuner random(task.space(), 1);
  tuner::TuneOptions tune_options;
  tune_options.n_trial = trials;
  tuner::TuneResult r = tuner::tune(task, random, runner, tune_options);
  const auto& phases = runner.phase_times();
  const double other = r.wall_s - phases.build_s - phases.run_s - r.tuner_s;
  std::printf("\n%s\n", label);
  std::printf("workload            %s\n", task.workload_key().c_str());
  std::printf("trials              %zu (%zu ok", r.n_measured, r.n_ok);
  for (const auto& [kind, n] : r.errors)
    std::printf(", %zu %s", n, std::string(to_string(kind)).c_str());
  std::printf(")\n");
  std::printf("best GFLOP/s        %.2f\n", r.best_gflops);
  std::printf("wall s              %.2f\n", r.wall_s);
  std::printf(
      "building (wall)     %5.1f %%  (%.2f s; instantiate + lower + LLVM in the build pool)\n",
      100 * phases.build_s / r.wall_s, phases.build_s);
  std::printf("running  (wall)     %5.1f %%  (%.2f s; reference + check + number*repeat runs)\n",
              100 * phases.run_s / r.wall_s, phases.run_s);
  std::printf("tuner              %5.1f %%  (%.4f s)\n", 100 * r.tuner_s / r.wall_s, r.tuner_s);
  std::printf("other (callbacks)   %5.1f %%\n", 100 * other / r.wall_s);
  std::printf("trials/s            %.3f\n", r.n_measured / r.wall_s);
  return r.n_measured / r.wall_s;
}

}  // namespace

int main(int argc, char** argv) {
  size_t trials = 64;
  bool remote = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--remote") == 0)
      remote = true;
    else
      trials = std::stoul(argv[i]);
  }
  try {
    codegen::Target target = codegen::Target::host();
    auto task = schedule_space::Task::create(
        "matmul", {{"M", "512"}, {"N", "512"}, {"K", "512"}},
        schedule_space::make_target_traits(target.str(), target.triple(), target.vector_bits(),
                                           target.cores()));
    double local = 0;
    {
      rpc_runner::LocalRunnerOptions options;
      options.runner_path = KTUNE_RUNNER_PATH;
      rpc_runner::LocalRunner runner(options);
      local = run("local runner", task, runner, trials);
    }
    if (!remote) {
      std::printf("trials_per_s %.3f\n", local);
      return 0;
    }
    const std::string db = (std::filesystem::temp_directory_path() /
                            ("ktune-throughput-" + std::to_string(::getpid()) + ".db"))
                               .string();
    rpc_runner::TuningServerOptions server_options;
    server_options.port = 0;
    server_options.db_path = db;
    rpc_runner::TuningServer server(server_options);
    rpc_runner::DeviceWorkerOptions worker_options;
    worker_options.server = server.address();
    worker_options.key = "bench";
    worker_options.runner_path = KTUNE_RUNNER_PATH;
    rpc_runner::DeviceWorker worker(worker_options);
    rpc_runner::ServiceClientOptions client_options;
    client_options.server = server.address();
    rpc_runner::ServiceClient client(client_options);
    while (client.devices().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    rpc_runner::JobSpec job;
    job.template_name = "matmul";
    job.args = {{"M", "512"}, {"N", "512"}, {"K", "512"}};
    job.session.device_key = "bench";
    job.session.trials = trials;
    job.session.tuner = "random";
    job.session.seed = 1;
    const auto start = std::chrono::steady_clock::now();
    const rpc_runner::JobEvent last = client.watch(client.submit(job).id);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::filesystem::remove(db);
    // The job also measures the fallback config first: count it, as the server did the work.
    const double through_server = (last.job.done + 1) / wall;
    std::printf("\njob on a tuning server + device worker on this machine (gRPC, loopback)\n");
    std::printf("state               %s, %llu trials + the fallback in %.2f s\n",
                std::string(tuning_db::to_string(last.job.state)).c_str(),
                static_cast<unsigned long long>(last.job.done), wall);
    std::printf("best GFLOP/s        %.2f\n", last.job.best_gflops);
    std::printf("trials/s            %.3f\n", through_server);
    std::printf("\ntrials_per_s %.3f local, %.3f remote\n", local, through_server);
    std::printf("remote_over_local %.3f\n", through_server / local);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tune_throughput: %s\n", e.what());
    return 1;
  }
}
