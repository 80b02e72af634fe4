// Benchmark: what the xgb tuner's bound on fit rows (ModelTunerParams::max_fit_rows) costs in
// search quality once a job resumes more records than it, as the fleet's xgb jobs resume 16,000.
// A recorded landscape is extended to its whole space (each config not recorded takes the mean
// throughput of the recorded configs nearest to it in knob values, i.e. differing in the fewest
// knobs; a failure counts 0, and all nearest failed is a failure). Per seed, the tuner resumes
// `--resume` random configs of it, drawn below 95% of its best (so that the top is still to be
// found), then measures `--trials` more in batches of 16; the same with the bound and with every
// row (or `--against` rows). Last line:
//   fit_cap_trials_ratio <median trials to 95% of the best with the bound / without>
// Usage: tuner_fit_cap [--seeds N] [--resume N] [--trials N] [--cap N] [--against N]
//                      [landscape file] (default bench/landscapes/matmul_512.txt)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tuner/landscape.h"
#include "tuner/model_based_tuner.h"

namespace {

using namespace ktune;

constexpr double kFraction = 0.95;
constexpr size_t kBatch = 16;  // `ktune tune`'s default batch size

// `recorded` over the whole space of its task: recorded configs keep their point, the others
// take the mean of the recorded configs that differ from them in the fewest knobs.
tuner::Landscape extend(const tuner::Landscape& recorded) {
  const schedule_space::Task task = recorded.space_task();
  const schedule_space::ConfigSpace& space = task.space();
  std::vector<std::vector<uint64_t>> digits;
  std::vector<const tuner::LandscapePoint*> points;
  for (const auto& [index, point] : recorded.points) {
    digits.push_back(space.knob_indices(index));
    points.push_back(&point);
  }
  tuner::Landscape out;
  out.header = recorded.header;
  for (uint64_t index = 0; index < space.size(); ++index) {
    if (!space.is_valid(index)) continue;
    if (const auto it = recorded.points.find(index); it != recorded.points.end()) {
      out.points[index] = it->second;
      continue;
    }
    const std::vector<uint64_t> d = space.knob_indices(index);
    size_t nearest = std::numeric_limits<size_t>::max();
    double sum = 0;
    size_t count = 0;
    const tuner::LandscapePoint* failed = nullptr;
    for (size_t r = 0; r < digits.size(); ++r) {
      size_t differ = 0;
      for (size_t k = 0; k < d.size() && differ <= nearest; ++k) differ += d[k] != digits[r][k];
      if (differ > nearest) continue;
      if (differ < nearest) {
        nearest = differ;
        sum = 0;
        count = 0;
        failed = nullptr;
      }
      sum += points[r]->gflops;
      ++count;
      if (points[r]->error && !failed) failed = points[r];
    }
    tuner::LandscapePoint p;
    p.gflops = sum / static_cast<double>(count);
    if (p.gflops == 0 && failed) p.error = failed->error;
    out.points[index] = p;
  }
  return out;
}

struct Run {
  size_t trials_to_target = 0;  // of the new trials; trials + 1 when not reached
  double best_fraction = 0;     // best found (resumed included) / the landscape's best
  size_t refits = 0;
  double fit_s = 0;     // all refits' fit time
  size_t max_rows = 0;  // rows of the largest fit
};

Run search(const schedule_space::Task& task, const tuner::Landscape& landscape,
           const std::vector<uint64_t>& resumed, size_t trials, size_t max_fit_rows,
           uint64_t seed) {
  const double best = landscape.best_gflops();
  tuner::XGBTunerParams params;
  params.search.seed = seed;
  params.search.max_fit_rows = max_fit_rows;
  tuner::XGBTuner tuner(task, params);
  tuner::ReplayMeasurer measurer(landscape, task.flop());
  Run run;
  run.trials_to_target = trials + 1;
  double found = 0;
  auto gflops = [&](const tuner::MeasureResult& r) {
    return r.ok() ? task.flop() / r.mean_cost() / 1e9 : 0.0;
  };
  {
    std::vector<tuner::MeasureInput> inputs;
    for (uint64_t index : resumed) inputs.push_back({&task, task.space().get(index)});
    const auto results = measurer.measure(inputs);
    for (const auto& r : results) found = std::max(found, gflops(r));
    tuner.update(inputs, results);
  }
  size_t done = 0;
  while (done < trials && tuner.has_next()) {
    std::vector<tuner::MeasureInput> inputs;
    for (auto& config : tuner.next_batch(std::min(kBatch, trials - done)))
      inputs.push_back({&task, std::move(config)});
    if (inputs.empty()) break;
    const auto results = measurer.measure(inputs);
    for (const auto& r : results) {
      ++done;
      found = std::max(found, gflops(r));
      if (run.trials_to_target > trials && gflops(r) >= kFraction * best)
        run.trials_to_target = done;
    }
    tuner.update(inputs, results);
  }
  run.best_fraction = found / best;
  for (const tuner::RefitStats& r : tuner.search().refits()) {
    if (r.transferred) continue;
    ++run.refits;
    run.fit_s += r.fit_s;
    run.max_rows = std::max(run.max_rows, r.fit_rows);
  }
  return run;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int seeds = 5;
    size_t resume = 16000, trials = 1000, cap = tuner::ModelTunerParams{}.max_fit_rows, against = 0;
    std::string path = std::string(KTUNE_LANDSCAPE_DIR) + "/matmul_512.txt";
    for (int i = 1; i < argc; ++i) {
      auto value = [&] {
        if (i + 1 >= argc)
          throw Error(ErrorKind::kInvalidArgument, std::string(argv[i]) + " needs a value");
        return std::stoul(argv[++i]);
      };
      if (std::strcmp(argv[i], "--seeds") == 0)
        seeds = static_cast<int>(value());
      else if (std::strcmp(argv[i], "--resume") == 0)
        resume = value();
      else if (std::strcmp(argv[i], "--trials") == 0)
        trials = value();
      else if (std::strcmp(argv[i], "--cap") == 0)
        cap = value();
      else if (std::strcmp(argv[i], "--against") == 0)
        against = value();
      else
        path = argv[i];
    }
    const tuner::Landscape recorded = tuner::read_landscape(path);
    const tuner::Landscape landscape = extend(recorded);
    const schedule_space::Task task = landscape.task();
    const double best = landscape.best_gflops();
    std::vector<uint64_t> below;  // the configs a resumed record may be
    for (const auto& [index, point] : landscape.points)
      if (point.gflops < kFraction * best) below.push_back(index);
    std::sort(below.begin(), below.end());
    if (below.size() < resume + trials)
      throw Error(ErrorKind::kInvalidArgument,
                  "the landscape has " + std::to_string(below.size()) +
                      " configs below 95% of its best: fewer than --resume + --trials");
    std::printf(
        "%s: %zu recorded configs extended to %zu (%s), best %.1f GFLOP/s, %zu within "
        "%.0f%%\n",
        task.workload_key().c_str(), recorded.points.size(), landscape.points.size(),
        landscape.header.value("measured", "").c_str(), best, landscape.count_within(kFraction),
        kFraction * 100);
    std::printf(
        "per seed: %zu random configs below %.0f%% resumed, then %zu xgb trials in "
        "batches of %zu\n",
        resume, kFraction * 100, trials, kBatch);
    const std::string cap_name = std::to_string(cap) + " rows";
    const std::string against_name = against == 0 ? "every row" : std::to_string(against) + " rows";
    std::vector<double> to_target[2], fraction[2], fit_s[2];
    std::vector<size_t> refits[2], rows[2];
    for (int seed = 1; seed <= seeds; ++seed) {
      std::mt19937_64 rng(static_cast<uint64_t>(seed));
      std::vector<uint64_t> pool = below;
      std::shuffle(pool.begin(), pool.end(), rng);
      pool.resize(resume);
      const size_t caps[2] = {cap, against};
      for (int v = 0; v < 2; ++v) {
        const Run r = search(task, landscape, pool, trials, caps[v], static_cast<uint64_t>(seed));
        to_target[v].push_back(static_cast<double>(r.trials_to_target));
        fraction[v].push_back(r.best_fraction);
        fit_s[v].push_back(r.fit_s / static_cast<double>(std::max<size_t>(1, r.refits)));
        refits[v].push_back(r.refits);
        rows[v].push_back(r.max_rows);
      }
      std::printf(
          "  seed %d: trials to %.0f%%: %zu (%s) / %zu (%s); best found %.3f / %.3f; "
          "fit %.3f / %.3f s per refit (%zu / %zu rows)\n",
          seed, kFraction * 100, static_cast<size_t>(to_target[0].back()), cap_name.c_str(),
          static_cast<size_t>(to_target[1].back()), against_name.c_str(), fraction[0].back(),
          fraction[1].back(), fit_s[0].back(), fit_s[1].back(), rows[0].back(), rows[1].back());
      std::fflush(stdout);
    }
    std::printf(
        "medians: trials to %.0f%% %.1f (%s) / %.1f (%s) (%zu = not reached); best found "
        "%.3f / %.3f; fit %.3f / %.3f s per refit\n",
        kFraction * 100, median(to_target[0]), cap_name.c_str(), median(to_target[1]),
        against_name.c_str(), trials + 1, median(fraction[0]), median(fraction[1]),
        median(fit_s[0]), median(fit_s[1]));
    std::printf("\nfit_cap_trials_ratio %.3f\n", median(to_target[0]) / median(to_target[1]));
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "tuner_fit_cap: %s\n", e.what());
    return 1;
  }
}
