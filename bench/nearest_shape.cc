// Benchmark: what `ktune build` gives a shape nobody tuned. Tunes a few workloads (xgb, a
// TuningSession over the local runner, as `ktune tune` does) into a temporary log, then for
// shapes near them that were not tuned takes the config tuning_db::nearest_tuned() picks (what
// `ktune build` now builds) and times it against the template's fallback config in the same
// runner, interleaved (fastest of `passes` measurements each); where no tuned config carries
// over, `ktune build` builds the fallback itself (ratio 1). Prints per untuned shape the
// nearest tuned workload, both speeds and nearest/fallback; last line
//   nearest_over_fallback <geomean of fallback time / nearest time>
// Usage: nearest_shape [--trials N] [--passes P] [--seed S]   (defaults 64, 5, 1; 1 thread)
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "rpc_runner/runner/local_runner.h"
#include "schedule_space/task.h"
#include "support/error.h"
#include "tuner/tuning_session.h"
#include "tuning_db/database.h"
#include "tuning_db/nearest.h"

namespace {

using namespace ktune;
namespace fs = std::filesystem;

struct Workload {
  std::string template_name;
  std::vector<std::string> args;
};

// Tuned: shapes of the kind a model has. Untuned: their neighbours (another layer, another
// batch, a padded size; some whose axes the tuned tiles still divide, some they do not).
const std::vector<Workload> kTuned = {
    {"matmul", {"M=256", "N=256", "K=256"}},
    {"matmul", {"M=64", "N=1024", "K=512"}},
    {"conv2d_nchwc", {"C=64", "H=28", "W=28", "K=64", "R=3", "S=3", "pad=1"}},
};
const std::vector<Workload> kUntuned = {
    {"matmul", {"M=240", "N=250", "K=260"}},
    {"matmul", {"M=200", "N=300", "K=180"}},
    {"matmul", {"M=50", "N=1000", "K=512"}},
    {"matmul", {"M=128", "N=256", "K=512"}},
    {"matmul", {"M=64", "N=512", "K=512"}},
    {"conv2d_nchwc", {"C=64", "H=30", "W=30", "K=64", "R=3", "S=3", "pad=1"}},
    {"conv2d_nchwc", {"C=48", "H=28", "W=28", "K=80", "R=3", "S=3", "pad=1"}},
};

std::string name_of(const Workload& w) {
  std::string s = w.template_name;
  for (const auto& a : w.args) s += " " + a;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    size_t trials = 64;
    int passes = 5;
    uint64_t seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
      if (!std::strcmp(argv[i], "--trials"))
        trials = std::stoul(argv[i + 1]);
      else if (!std::strcmp(argv[i], "--passes"))
        passes = std::stoi(argv[i + 1]);
      else if (!std::strcmp(argv[i], "--seed"))
        seed = std::stoull(argv[i + 1]);
      else
        throw Error(ErrorKind::kInvalidArgument, std::string("unknown option ") + argv[i]);
    }
    const fs::path dir =
        fs::temp_directory_path() / ("ktune-nearest-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const codegen::Target host = codegen::Target::host();
    const auto traits =
        schedule_space::make_target_traits(host.str(), host.triple(), host.vector_bits(), 1);
    const tuning_db::TargetKey target{host.str(), codegen::llvm_version()};
    auto task_of = [&](const Workload& w) {
      return schedule_space::Task::create(
          w.template_name, schedule_space::parse_workload_args(w.template_name, w.args), traits);
    };
    rpc_runner::LocalRunnerOptions ro;
    ro.runner_path = KTUNE_RUNNER_PATH;
    ro.measure.run_threads = 1;
    ro.measure.data_seed = seed;
    rpc_runner::LocalRunner runner(ro);
    auto db = tuning_db::Database::open((dir / "tune.db").string());
    std::printf("target %s, 1 thread, xgb %zu trials per tuned workload, seed %llu\n",
                host.str().c_str(), trials, static_cast<unsigned long long>(seed));
    for (const Workload& w : kTuned) {
      const schedule_space::Task task = task_of(w);
      tuner::SessionOptions so;
      so.trials = trials;
      so.seed = seed;
      const tuner::SessionReport r = tuner::TuningSession(task, db, runner, target, so).run();
      std::printf("tuned   %-52s best %7.1f GFLOP/s\n", name_of(w).c_str(), r.result.best_gflops);
      std::fflush(stdout);
    }

    std::printf("%-52s %-40s %9s %9s %9s %7s\n", "untuned shape", "nearest tuned workload",
                "nearest", "fallback", "nearest/", "knobs");
    std::printf("%-52s %-40s %9s %9s %9s %7s\n", "", "", "GFLOP/s", "GFLOP/s", "fallback",
                "adapted");
    double log_sum = 0;
    for (const Workload& w : kUntuned) {
      const schedule_space::Task task = task_of(w);
      const auto nearest = tuning_db::nearest_tuned(db, task, target);
      if (!nearest) {  // `ktune build` builds the fallback: the same kernel, ratio 1
        std::printf("%-52s %-40s %9s %9s %9.3f %7s\n", name_of(w).c_str(),
                    "none carries over: fallback", "-", "-", 1.0, "-");
        continue;
      }
      double nearest_s = INFINITY, fallback_s = INFINITY;
      for (int p = 0; p < passes; ++p) {  // interleaved: both see the same machine
        const auto m = runner.measure({{&task, nearest->config}, {&task, task.fallback_config()}});
        if (!m[0].ok() || !m[1].ok())
          throw Error(ErrorKind::kRun, name_of(w) + ": " + m[0].error_message + m[1].error_message);
        nearest_s = std::min(nearest_s, m[0].mean_cost());
        fallback_s = std::min(fallback_s, m[1].mean_cost());
      }
      const double flop = task.flop();
      std::printf("%-52s %-40s %9.1f %9.1f %9.3f %7d\n", name_of(w).c_str(),
                  nearest->record.workload_key.substr(0, 40).c_str(), flop / nearest_s * 1e-9,
                  flop / fallback_s * 1e-9, fallback_s / nearest_s, nearest->adapted);
      std::fprintf(stderr, "  there:    %s\n  nearest:  %s\n  fallback: %s\n",
                   nearest->record.config.dump().c_str(), nearest->config.to_json_string().c_str(),
                   task.fallback_config().to_json_string().c_str());
      std::fflush(stdout);
      log_sum += std::log(fallback_s / nearest_s);
    }
    fs::remove_all(dir);
    std::printf("nearest_over_fallback %.3f\n",
                std::exp(log_sum / static_cast<double>(kUntuned.size())));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nearest_shape: %s\n", e.what());
    return 1;
  }
}
