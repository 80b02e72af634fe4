// Benchmark: the gradient task scheduler against an equal split of one trial budget over the
// tasks of a ResNet-18-shaped model. Trials to reach 1.1x of the final best estimated model
// latency (sum over tasks of count x best latency), per seed. Last line:
//   scheduler_over_equal <median over seeds of scheduler trials / equal-split trials>
//
// What it replays (no kernel runs, so it is deterministic and takes seconds): the tasks, counts
// and FLOPs come from the ResNet-18 model written by scripts/make-test-models (frontend's task
// extraction, all 18 tasks). Each task is searched by a tuner over a RECORDED landscape of
// bench/landscapes/: the conv tasks over conv2d_c64_28x28.txt, the pooling and Gemm tasks over
// matmul_512.txt (4000 measured configs each); a config's latency for a task is the task's FLOPs
// divided by the config's recorded GFLOP/s. So every task has a real landscape's shape scaled to
// its own size; tasks differ by count, FLOPs and their tuner's seed.
// The equal split is round robin (each task in turn gets one batch), which at the end gives
// every task the same share, and whose curve is defined from the same point (after one batch each).
//
// Usage: model_tuning [--seeds N (7)] [--trials-per-task T (64)] [--tuner xgb|random (xgb)]
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "frontend/model_tasks.h"
#include "frontend/onnx_graph.h"
#include "tuner/basic_tuners.h"
#include "tuner/landscape.h"
#include "tuner/model_based_tuner.h"
#include "tuner/task_scheduler.h"

namespace {

using namespace ktune;
constexpr size_t kBatch = 16;
constexpr double kWithin = 1.1;

// A task's search over a recorded landscape (see the file comment).
class ReplayTaskTuner final : public tuner::TaskTuner {
 public:
  ReplayTaskTuner(const tuner::Landscape& landscape, const schedule_space::Task& task, double flop,
                  const std::string& tuner_name, uint64_t seed)
      : task_(task), measurer_(landscape, flop) {
    if (tuner_name == "xgb") {
      tuner::XGBTunerParams params;
      params.search.seed = seed;
      tuner_ = std::make_unique<tuner::XGBTuner>(task_, params);
    } else {
      tuner_ = std::make_unique<tuner::RandomTuner>(task_.space(), seed);
    }
  }
  size_t tune(size_t n) override {
    size_t measured = 0;
    while (measured < n && tuner_->has_next()) {
      std::vector<tuner::MeasureInput> inputs;
      for (auto& config : tuner_->next_batch(n - measured))
        inputs.push_back({&task_, std::move(config)});
      if (inputs.empty()) break;
      const auto results = measurer_.measure(inputs);
      for (const auto& r : results)
        if (r.ok()) best_ = std::min(best_, r.mean_cost());
      tuner_->update(inputs, results);
      measured += inputs.size();
    }
    return measured;
  }
  double best_latency() const override { return best_; }

 private:
  const schedule_space::Task& task_;
  tuner::ReplayMeasurer measurer_;
  std::unique_ptr<tuner::Tuner> tuner_;
  double best_ = std::numeric_limits<double>::infinity();
};

struct Curve {
  std::vector<size_t> trials;
  std::vector<double>
      latency;  // estimated model latency after each allocation (once all tasks have one)
  // Trials until the latency first reaches `target`; 0 when it never does.
  size_t trials_to(double target) const {
    for (size_t i = 0; i < trials.size(); ++i)
      if (latency[i] <= target) return trials[i];
    return 0;
  }
};

struct Setup {
  std::vector<frontend::ModelTask> tasks;
  tuner::Landscape conv, other;
  std::optional<schedule_space::Task> conv_task, other_task;
};

Curve run(const Setup& s, const std::string& strategy, const std::string& tuner_name, uint64_t seed,
          size_t budget) {
  std::vector<std::unique_ptr<ReplayTaskTuner>> tuners;
  std::vector<tuner::ScheduledTask> scheduled;
  for (size_t i = 0; i < s.tasks.size(); ++i) {
    const auto& t = s.tasks[i];
    const bool conv = t.template_name.find("conv") != std::string::npos;
    tuners.push_back(std::make_unique<ReplayTaskTuner>(conv ? s.conv : s.other,
                                                       conv ? *s.conv_task : *s.other_task, t.flop,
                                                       tuner_name, seed * 1000 + i));
    scheduled.push_back(
        {t.key(), static_cast<double>(t.count), t.flop, t.template_name, tuners.back().get()});
  }
  tuner::TaskSchedulerOptions o;
  o.strategy = strategy;
  o.trials = budget;
  o.batch_size = kBatch;
  o.seed = seed;
  tuner::TaskScheduler scheduler(std::move(scheduled), o);
  Curve curve;
  scheduler.run([&](const tuner::SchedulerStep& step) {
    if (!std::isfinite(step.model_latency)) return;
    curve.trials.push_back(step.total);
    curve.latency.push_back(step.model_latency);
  });
  std::printf("    %-11s final %.3f ms; trials per task:", strategy.c_str(),
              curve.latency.back() * 1e3);
  for (size_t i = 0; i < s.tasks.size(); ++i) std::printf(" %zu", scheduler.trials_of(i));
  std::printf("\n");
  return curve;
}

Setup load(const std::string& tuner_name) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("ktune_bench_models_" + std::to_string(::getpid())))
                              .string();
  const std::string cmd = std::string("/usr/bin/python3 ") + KTUNE_SOURCE_DIR_PATH +
                          "/scripts/make-test-models " + dir + " >/dev/null";
  if (std::system(cmd.c_str()) != 0) throw Error(ErrorKind::kIo, "scripts/make-test-models failed");
  const codegen::Target target = codegen::Target::host();
  const auto traits = schedule_space::make_target_traits(target.str(), target.triple(),
                                                         target.vector_bits(), target.cores());
  frontend::ModelTasks m =
      frontend::extract_tasks(frontend::load_onnx(dir + "/resnet18.onnx"), traits);
  std::filesystem::remove_all(dir);
  Setup s{std::move(m.tasks),
          tuner::read_landscape(std::string(KTUNE_LANDSCAPE_DIR) + "/conv2d_c64_28x28.txt"),
          tuner::read_landscape(std::string(KTUNE_LANDSCAPE_DIR) + "/matmul_512.txt"),
          {},
          {}};
  s.conv_task = s.conv.task();
  s.other_task = s.other.task();
  std::printf(
      "ResNet-18 (scripts/make-test-models): %zu tasks, %.2f GFLOP; tuner %s, batch %zu\n",
      s.tasks.size(),
      [&] {
        double f = 0;
        for (const auto& t : s.tasks) f += t.flop * static_cast<double>(t.count);
        return f / 1e9;
      }(),
      tuner_name.c_str(), kBatch);
  std::printf("replayed landscapes: conv tasks %s, pooling/Gemm %s\n",
              s.conv.header.value("workload", "").c_str(),
              s.other.header.value("workload", "").c_str());
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int seeds = 7;
    size_t per_task = 64;
    std::string tuner_name = "xgb";  // ktune's default search
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
        seeds = std::atoi(argv[++i]);
      } else if (std::strcmp(argv[i], "--trials-per-task") == 0 && i + 1 < argc) {
        per_task = static_cast<size_t>(std::atol(argv[++i]));
      } else if (std::strcmp(argv[i], "--tuner") == 0 && i + 1 < argc) {
        tuner_name = argv[++i];
      } else {
        std::fprintf(
            stderr, "usage: model_tuning [--seeds N] [--trials-per-task T] [--tuner random|xgb]\n");
        return 2;
      }
    }
    const Setup s = load(tuner_name);
    const size_t budget = per_task * s.tasks.size();
    std::printf(
        "budget %zu trials (%zu per task on an equal split); target: %.1fx the best final latency "
        "of the two\n\n",
        budget, per_task, kWithin);
    std::printf(
        "trials to reach the target, per seed (the scheduler's curve, then the equal split's)\n");
    std::vector<double> ratios;
    for (int seed = 1; seed <= seeds; ++seed) {
      std::printf("seed %d\n", seed);
      const Curve gradient = run(s, "gradient", tuner_name, static_cast<uint64_t>(seed), budget);
      const Curve equal = run(s, "round_robin", tuner_name, static_cast<uint64_t>(seed), budget);
      const double target = kWithin * std::min(gradient.latency.back(), equal.latency.back());
      const size_t tg = gradient.trials_to(target), te = equal.trials_to(target);
      // A curve that never gets there counts as the whole budget (its true figure is larger).
      const double ratio =
          static_cast<double>(tg ? tg : budget) / static_cast<double>(te ? te : budget);
      std::printf(
          "    target %.3f ms: scheduler %zu%s trials, equal split %zu%s trials, ratio %.3f\n",
          target * 1e3, tg ? tg : budget, tg ? "" : "+", te ? te : budget, te ? "" : "+", ratio);
      ratios.push_back(ratio);
    }
    std::sort(ratios.begin(), ratios.end());
    const double median = ratios.size() % 2
                              ? ratios[ratios.size() / 2]
                              : 0.5 * (ratios[ratios.size() / 2 - 1] + ratios[ratios.size() / 2]);
    std::printf("(+: not reached within the budget; counted as the budget)\n");
    std::printf("scheduler_over_equal %.3f\n", median);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "model_tuning: %s\n", e.what());
    return 1;
  }
}
