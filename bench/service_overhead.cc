// Benchmark: the tuning server's CPU cost per measured trial. A `ktune server` process and 1, 2 and
// 4 `ktune worker` processes on loopback run a job of cheap kernels (so the devices are never the
// bottleneck of the server's work), for the random tuner and for xgb; the server's CPU time
// (user + system, from /proc/PID/stat) over the job is divided by the trials it measured.
// Usage: service_overhead [trials]   (default 192)
// Last line: `server_ms_per_trial <x>`, the worst xgb figure.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rpc_runner/client/service_client.h"
#include "tests/process_util.h"

namespace {

using namespace ktune;
namespace fs = std::filesystem;
using testing_process::Child;
using testing_process::cpu_seconds;

struct Row {
  std::string tuner;
  int workers = 0;
  uint64_t trials = 0;
  double wall_s = 0, cpu_s = 0;
};

Row run(const std::string& tuner, int workers, uint64_t trials, const fs::path& dir) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  Child server({KTUNE_BIN, "server", "--port", "0", "--db", (dir / "server.db").string()},
               dir / "server.out", dir / "server.err");
  const std::string address = testing_process::wait_for_address(dir / "server.out");
  if (address.empty())
    throw std::runtime_error("the server did not start: " +
                             testing_process::read_file(dir / "server.err"));
  std::vector<std::unique_ptr<Child>> fleet;
  for (int i = 0; i < workers; ++i)
    fleet.push_back(std::make_unique<Child>(
        std::vector<std::string>{KTUNE_BIN, "worker", "--server", address, "--key", "bench",
                                 "--slots", "1", "--runner", KTUNE_RUNNER_PATH},
        dir / "worker.out", dir / "worker.err"));
  rpc_runner::ServiceClientOptions options;
  options.server = address;
  rpc_runner::ServiceClient client(options);
  while (client.devices().size() < static_cast<size_t>(workers))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));

  rpc_runner::JobSpec job;
  job.template_name = "matmul";
  job.args = {{"M", "16"}, {"N", "16"}, {"K", "16"}};
  job.session.device_key = "bench";
  job.session.trials = trials;
  job.session.tuner = tuner;
  job.session.seed = 1;
  const double cpu_before = cpu_seconds(server.pid);
  const auto start = std::chrono::steady_clock::now();
  const rpc_runner::JobEvent last = client.watch(client.submit(job).id);
  Row row;
  row.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  row.cpu_s = cpu_seconds(server.pid) - cpu_before;
  if (last.job.state != tuning_db::JobState::kDone)
    throw std::runtime_error("job " + std::string(tuning_db::to_string(last.job.state)) + ": " +
                             last.job.message);
  row.tuner = tuner;
  row.workers = workers;
  row.trials = last.job.done + 1;  // and the fallback, which the server also handled
  return row;
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t trials = argc > 1 ? std::stoull(argv[1]) : 192;
  const fs::path dir =
      fs::temp_directory_path() / ("ktune-service-overhead-" + std::to_string(::getpid()));
  try {
    std::vector<Row> rows;
    for (const char* tuner : {"random", "xgb"})
      for (int workers : {1, 2, 4}) rows.push_back(run(tuner, workers, trials, dir));
    fs::remove_all(dir);
    std::printf(
        "server CPU per measured trial, matmul 16x16x16 (cheap kernels), %llu trials + the "
        "fallback\n",
        static_cast<unsigned long long>(trials));
    std::printf("%-8s %8s %10s %12s %14s\n", "tuner", "workers", "wall s", "trials/s",
                "server ms/trial");
    double worst_xgb = 0;
    for (const Row& r : rows) {
      const double ms = 1e3 * r.cpu_s / static_cast<double>(r.trials);
      std::printf("%-8s %8d %10.2f %12.2f %14.3f\n", r.tuner.c_str(), r.workers, r.wall_s,
                  r.trials / r.wall_s, ms);
      if (r.tuner == "xgb") worst_xgb = std::max(worst_xgb, ms);
    }
    std::printf("server_ms_per_trial %.3f\n", worst_xgb);
    return 0;
  } catch (const std::exception& e) {
    fs::remove_all(dir);
    std::fprintf(stderr, "service_overhead: %s\n", e.what());
    return 1;
  }
}
