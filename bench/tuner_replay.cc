// Benchmark: how many trials each tuner needs to reach 95% of the best throughput of a measured
// landscape, replayed (no kernel runs), over 10 seeds. Last line:
//   xgb_over_random <median trials of xgb / median trials of random, the worst landscape's>
// Usage: tuner_replay [--seeds N] [--max-fit-rows N] [landscape files...]
//          (default: bench/landscapes/*.txt; --max-fit-rows: the xgb tuner's bound on the rows a
//          fit sees, 0 = all, e.g. to compare a bound that binds within a replay with none)
//        tuner_replay --record <out.txt> --db <log.db> <template> k=v...
//          writes the landscape of a workload from a tuning log made on this machine. The two of
//          bench/landscapes were recorded so (4000 random configs each, then --record with the
//          same template and arguments):
//            ktune tune matmul M=512 N=512 K=512 --tuner random --trials 4000 --db log.db
//            ktune tune conv2d N=1 C=64 H=28 W=28 K=64 R=3 S=3 stride=1 pad=1 dilation=1
//                --tuner random --trials 4000 --db log.db
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "tuner/basic_tuners.h"
#include "tuner/db_log.h"
#include "tuner/landscape.h"
#include "tuner/model_based_tuner.h"
#include "tuning_db/database.h"

namespace {

using namespace ktune;

constexpr double kFraction = 0.95;
constexpr size_t kBatch = 16;  // `ktune tune`'s default batch size

// The xgb tuner's bound on fit rows; nullopt = its default.
std::optional<size_t> max_fit_rows;

std::unique_ptr<tuner::Tuner> make_tuner(const std::string& name, const schedule_space::Task& task,
                                         uint64_t seed) {
  if (name == "random") return std::make_unique<tuner::RandomTuner>(task.space(), seed);
  if (name == "ga") {
    tuner::GAOptions options;
    options.seed = seed;
    return std::make_unique<tuner::GATuner>(task.space(), task.flop(), options);
  }
  tuner::XGBTunerParams params;
  params.search.seed = seed;
  if (max_fit_rows) params.search.max_fit_rows = *max_fit_rows;
  return std::make_unique<tuner::XGBTuner>(task, params);
}

// Trials (failures included) until a config reaches kFraction of the landscape's best; the
// landscape size + 1 when the tuner ran out first.
size_t trials_to_target(const std::string& name, const schedule_space::Task& task,
                        const tuner::Landscape& landscape, uint64_t seed) {
  const double target = kFraction * landscape.best_gflops();
  tuner::ReplayMeasurer measurer(landscape, task.flop());
  auto tuner = make_tuner(name, task, seed);
  size_t trials = 0;
  while (tuner->has_next() && trials < landscape.points.size()) {
    std::vector<tuner::MeasureInput> inputs;
    for (auto& config : tuner->next_batch(kBatch)) inputs.push_back({&task, std::move(config)});
    if (inputs.empty()) break;
    auto results = measurer.measure(inputs);
    for (const auto& result : results) {
      ++trials;
      if (result.ok() && task.flop() / result.mean_cost() / 1e9 >= target) return trials;
    }
    tuner->update(inputs, results);
  }
  return landscape.points.size() + 1;
}

double median(std::vector<size_t> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? static_cast<double>(v[n / 2]) : 0.5 * static_cast<double>(v[n / 2 - 1] + v[n / 2]);
}

// Returns xgb's median over random's for one landscape, after printing its table.
double replay(const std::string& path, int seeds) {
  tuner::Landscape landscape = tuner::read_landscape(path);
  schedule_space::Task task = landscape.task();
  std::printf("\n%s: %zu configs (%s), best %.1f GFLOP/s, %zu within %.0f%%\n",
              task.workload_key().c_str(), landscape.points.size(),
              landscape.header.value("measured", "").c_str(), landscape.best_gflops(),
              landscape.count_within(kFraction), kFraction * 100);
  // Uniform sampling without replacement of n configs of which m qualify: the first hit's
  // median is about n * (1 - 0.5^(1/m)). Shown to judge how lucky random's seeds were.
  const double n = static_cast<double>(landscape.points.size());
  const double m = static_cast<double>(landscape.count_within(kFraction));
  std::printf("trials to reach %.0f%% of the best, seeds 1..%d (random's expected median %.0f)\n",
              kFraction * 100, seeds, n * (1 - std::pow(0.5, 1 / m)));
  std::map<std::string, double> medians;
  for (const std::string name : {"random", "ga", "xgb"}) {
    std::vector<size_t> trials;
    std::printf("  %-7s", name.c_str());
    for (int seed = 1; seed <= seeds; ++seed) {
      trials.push_back(trials_to_target(name, task, landscape, static_cast<uint64_t>(seed)));
      std::printf(" %5zu", trials.back());
      std::fflush(stdout);
    }
    medians[name] = median(trials);
    std::printf("   median %.1f\n", medians[name]);
  }
  const double ratio = medians["xgb"] / medians["random"];
  std::printf("  xgb/random %.3f, ga/random %.3f\n", ratio, medians["ga"] / medians["random"]);
  return ratio;
}

int record(int argc, char** argv) {
  if (argc < 6 || std::strcmp(argv[3], "--db") != 0) {
    std::fprintf(stderr, "usage: tuner_replay --record <out> --db <log.db> <template> k=v...\n");
    return 2;
  }
  std::map<std::string, std::string> args;
  for (int i = 6; i < argc; ++i) {
    const char* eq = std::strchr(argv[i], '=');
    if (!eq) throw Error(ErrorKind::kInvalidArgument, std::string("expected k=v, got ") + argv[i]);
    args[std::string(argv[i], static_cast<size_t>(eq - argv[i]))] = eq + 1;
  }
  codegen::Target target = codegen::Target::host();
  auto task = schedule_space::Task::create(
      argv[5], args,
      schedule_space::make_target_traits(target.str(), target.triple(), target.vector_bits(),
                                         target.cores()));
  auto db = tuning_db::Database::open(argv[4], {.create = false});
  auto past = tuner::load_past_measurements(db, task, {target.str(), codegen::llvm_version()});
  if (past.empty()) throw Error(ErrorKind::kNotFound, "no records of " + task.workload_key());
  tuner::write_landscape(
      argv[2], task, past,
      target.cpu() + ", " + std::to_string(target.cores()) + " cores, ktune tune");
  std::printf("%s: %zu configs written to %s\n", task.workload_key().c_str(), past.size(), argv[2]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::strcmp(argv[1], "--record") == 0) return record(argc, argv);
    int seeds = 10;
    std::vector<std::string> paths;
    for (int i = 1; i < argc; ++i) {
      if (std::strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
        seeds = std::stoi(argv[++i]);
      } else if (std::strcmp(argv[i], "--max-fit-rows") == 0 && i + 1 < argc) {
        max_fit_rows = std::stoul(argv[++i]);
      } else {
        paths.push_back(argv[i]);
      }
    }
    if (paths.empty()) {
      for (const auto& entry : std::filesystem::directory_iterator(KTUNE_LANDSCAPE_DIR))
        if (entry.path().extension() == ".txt") paths.push_back(entry.path().string());
      std::sort(paths.begin(), paths.end());
    }
    double worst = 0;
    for (const auto& path : paths) worst = std::max(worst, replay(path, seeds));
    std::printf("\nxgb_over_random %.3f\n", worst);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "tuner_replay: %s\n", e.what());
    return 1;
  }
}
