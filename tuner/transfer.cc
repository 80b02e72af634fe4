// Transfer learning: training a loop-feature ranking model on other workloads of a template.
#include "tuner/transfer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <future>
#include <map>
#include <random>
#include <string>

#include "cost_model/loop_features.h"
#include "support/error.h"
#include "support/thread_pool.h"
#include "tuner/submodular_pick.h"

namespace ktune::tuner {
namespace {

std::map<std::string, std::string> args_map(const nlohmann::json& args) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : args.items()) {
    if (value.is_number_integer())
      out[name] = std::to_string(value.get<int64_t>());
    else if (value.is_string())
      out[name] = value.get<std::string>();
    else
      out[name] = value.dump();
  }
  return out;
}

// Computes f(i) for i in [0, n) on `threads` threads; f must be safe to call concurrently.
std::vector<std::vector<float>> parallel_rows(size_t n, size_t threads,
                                              const std::function<std::vector<float>(size_t)>& f) {
  std::vector<std::vector<float>> rows(n);
  if (threads <= 1 || n < 2) {
    for (size_t i = 0; i < n; ++i) rows[i] = f(i);
    return rows;
  }
  ThreadPool pool(threads);
  std::vector<std::future<void>> done;
  for (size_t t = 0; t < threads; ++t) {
    done.push_back(pool.submit([&, t] {
      for (size_t i = t; i < n; i += threads) rows[i] = f(i);
    }));
  }
  for (auto& d : done) d.get();  // rethrows a row's error
  return rows;
}

}  // namespace

std::unique_ptr<TransferModel> TransferModel::train(const schedule_space::Task& task,
                                                    const std::vector<tuning_db::Record>& history,
                                                    const TransferParams& params) {
  // One task per other workload, and its usable records: (task, config, cost).
  struct Sample {
    const schedule_space::Task* task;
    schedule_space::Config config;
    double cost;
  };
  std::map<std::string, schedule_space::Task> tasks;
  std::map<std::string, std::vector<Sample>> by_workload;
  std::map<std::string, bool> unusable;
  size_t ok_records = 0;
  for (const tuning_db::Record& r : history) {
    if (r.template_name != task.template_name() || r.workload_key == task.workload_key()) continue;
    if (unusable.count(r.workload_key) != 0) continue;
    auto it = tasks.find(r.workload_key);
    if (it == tasks.end()) {
      try {
        it = tasks
                 .emplace(r.workload_key, schedule_space::Task::create(
                                              r.template_name, args_map(r.args), task.target()))
                 .first;
      } catch (const Error& e) {
        spdlog::warn("transfer: skipping {}: {}", r.workload_key, e.what());
        unusable[r.workload_key] = true;
        continue;
      }
    }
    schedule_space::Config config;
    try {
      const auto& space = it->second.space();
      config = space.get(space.index_of(schedule_space::Config::from_json(r.config)));
    } catch (const Error&) {
      continue;  // a config of an older version of the template
    }
    by_workload[r.workload_key].push_back({&it->second, std::move(config), r.cost()});
    if (r.ok()) ++ok_records;
  }
  if (by_workload.size() < std::max<size_t>(1, params.min_workloads) ||
      ok_records < params.min_ok_records) {
    spdlog::debug("transfer: not enough history ({} workloads, {} ok records)", by_workload.size(),
                  ok_records);
    return nullptr;
  }

  std::vector<const Sample*> samples;
  std::vector<uint32_t> groups;
  std::vector<float> labels;
  for (const auto& [key, list] : by_workload) {
    std::vector<double> costs;
    for (const Sample& s : list) {
      samples.push_back(&s);
      costs.push_back(s.cost);
    }
    std::vector<float> l = cost_model::throughput_labels(costs);
    labels.insert(labels.end(), l.begin(), l.end());
    groups.push_back(static_cast<uint32_t>(list.size()));
  }
  std::vector<std::vector<float>> rows =
      parallel_rows(samples.size(), params.feature_threads, [&](size_t i) {
        return cost_model::config_loop_features(*samples[i]->task, samples[i]->config);
      });
  cost_model::FeatureMatrix x;
  for (const auto& row : rows) x.append(row);

  std::unique_ptr<TransferModel> out(new TransferModel());
  out->params_ = params;
  cost_model::XGBoostParams mp = params.model;
  mp.seed = params.seed * 0x9e3779b97f4a7c15ull + 7;
  out->model_ = std::make_unique<cost_model::XGBoostModel>(mp);
  out->model_->fit(x, labels, groups);
  out->rows_ = samples.size();
  out->workloads_ = by_workload.size();
  spdlog::info("transfer: model trained on {} records of {} other workloads of {}", out->rows_,
               out->workloads_, task.template_name());
  return out;
}

std::vector<float> TransferModel::score(const schedule_space::Task& task,
                                        const std::vector<uint64_t>& indices) const {
  const auto& space = task.space();
  for (uint64_t i : indices) {
    if (i >= space.size())
      throw Error(ErrorKind::kInvalidArgument, "transfer: config index outside the space");
  }
  std::vector<std::vector<float>> rows = parallel_rows(
      indices.size(), params_.feature_threads,
      [&](size_t i) { return cost_model::config_loop_features(task, space.get(indices[i])); });
  cost_model::FeatureMatrix x;
  for (const auto& row : rows) x.append(row);
  if (x.rows == 0) return {};
  return model_->predict(x);
}

std::vector<ScoredIndex> TransferModel::plan(const schedule_space::Task& task, size_t n,
                                             const std::unordered_set<uint64_t>& exclude) const {
  std::mt19937_64 rng(params_.seed ^ 0x5851f42d4c957f2dull);
  std::vector<uint64_t> pool = task.space().sample(std::max(params_.pool, n), rng, exclude);
  std::vector<float> scores = score(task, pool);
  std::vector<std::vector<uint64_t>> digits;
  digits.reserve(pool.size());
  for (uint64_t i : pool) digits.push_back(task.space().knob_indices(i));
  std::vector<size_t> picked = submodular_pick(scores, digits, n);
  std::vector<ScoredIndex> out;
  out.reserve(picked.size());
  for (size_t p : picked) out.push_back({pool[p], scores[p]});
  return out;
}

std::vector<uint64_t> same_space_best(const schedule_space::Task& task,
                                      const std::vector<tuning_db::Record>& history, size_t n,
                                      const std::unordered_set<uint64_t>& exclude) {
  const std::string space = task.space().describe();
  std::map<std::string, bool> same;  // workload key -> its space is the task's
  std::map<std::string, std::vector<const tuning_db::Record*>> by_workload;
  for (const tuning_db::Record& r : history) {
    if (r.error || r.costs.empty() || r.template_name != task.template_name() ||
        r.workload_key == task.workload_key())
      continue;
    auto it = same.find(r.workload_key);
    if (it == same.end()) {
      bool equal = false;
      try {
        equal = schedule_space::Task::create(r.template_name, args_map(r.args), task.target())
                    .space()
                    .describe() == space;
      } catch (const Error&) {
        // A workload this build cannot instantiate has no configs to offer.
      }
      it = same.emplace(r.workload_key, equal).first;
    }
    if (it->second) by_workload[r.workload_key].push_back(&r);
  }
  auto mean = [](const tuning_db::Record* r) {
    double sum = 0;
    for (double c : r->costs) sum += c;
    return sum / static_cast<double>(r->costs.size());
  };
  for (auto& [key, records] : by_workload)
    std::stable_sort(
        records.begin(), records.end(),
        [&](const tuning_db::Record* a, const tuning_db::Record* b) { return mean(a) < mean(b); });
  std::vector<uint64_t> out;
  std::unordered_set<uint64_t> taken;
  for (size_t rank = 0; out.size() < n; ++rank) {
    bool any = false;
    for (const auto& [key, records] : by_workload) {
      if (rank >= records.size() || out.size() >= n) continue;
      any = true;
      const tuning_db::Record& r = *records[rank];
      const uint64_t index = static_cast<uint64_t>(r.config_index);
      if (index >= task.space().size() || exclude.count(index) != 0 || taken.count(index) != 0)
        continue;
      if (r.config.contains("entity") &&
          task.space().get(index).to_json()["entity"] != r.config["entity"])
        continue;
      taken.insert(index);
      out.push_back(index);
    }
    if (!any) break;
  }
  return out;
}

}  // namespace ktune::tuner
