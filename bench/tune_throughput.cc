// Benchmark: tuning throughput of `ktune tune` on this machine — random search over matmul
// 512x512x512 through the local runner; trials per second and where the wall time goes.
#include <cstdio>
#include <string>

#include "codegen/target.h"
#include "rpc_runner/local_runner.h"
#include "schedule_space/task.h"
#include "tuner/basic_tuners.h"
#include "tuner/tune.h"

int main(int argc, char** argv) {
  using namespace ktune;
  size_t trials = argc > 1 ? std::stoul(argv[1]) : 64;
  try {
    codegen::Target target = codegen::Target::host();
    auto task = schedule_space::Task::create(
        "matmul", {{"M", "512"}, {"N", "512"}, {"K", "512"}},
        schedule_space::make_target_traits(target.str(), target.triple(), target.vector_bits(), target.cores()));
    rpc_runner::LocalRunnerOptions options;
    options.runner_path = KTUNE_RUNNER_PATH;
    rpc_runner::LocalRunner runner(options);
    tuner::RandomTuner random(task.space(), 1);
    tuner::TuneOptions tune_options;
    tune_options.n_trial = trials;
    tuner::TuneResult r = tuner::tune(task, random, runner, tune_options);

    const auto& phases = runner.phase_times();
    double other = r.wall_s - phases.build_s - phases.run_s - r.tuner_s;
    std::printf("workload            %s\n", task.workload_key().c_str());
    std::printf("trials              %zu (%zu ok", r.n_measured, r.n_ok);
    for (const auto& [kind, n] : r.errors) std::printf(", %zu %s", n, std::string(to_string(kind)).c_str());
    std::printf(")\n");
    std::printf("best GFLOP/s        %.2f\n", r.best_gflops);
    std::printf("wall s              %.2f\n", r.wall_s);
    std::printf("building (wall)     %5.1f %%  (%.2f s; instantiate + lower + LLVM in the build pool)\n",
                100 * phases.build_s / r.wall_s, phases.build_s);
    std::printf("running  (wall)     %5.1f %%  (%.2f s; reference + check + number*repeat runs)\n",
                100 * phases.run_s / r.wall_s, phases.run_s);
    std::printf("tuner              %5.1f %%  (%.4f s)\n", 100 * r.tuner_s / r.wall_s, r.tuner_s);
    std::printf("other (callbacks)   %5.1f %%\n", 100 * other / r.wall_s);
    std::printf("trials_per_s %.3f\n", r.n_measured / r.wall_s);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tune_throughput: %s\n", e.what());
    return 1;
  }
}
