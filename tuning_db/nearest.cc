// The nearest tuned workload: rank the template's tuned workloads by argument distance, take the
// first config that the new shape's space holds and that instantiates.
#include "tuning_db/nearest.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace ktune::tuning_db {
namespace {

constexpr int64_t kRecordsPerWorkload = 5;

// An argument's integer value (numbers, or strings of digits as the CLI writes them), if it is one.
std::optional<int64_t> as_integer(const nlohmann::json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_string()) return std::nullopt;
  const std::string& s = v.get_ref<const std::string&>();
  if (s.empty() || s.size() > 18 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(s);
}

}  // namespace

double workload_distance(const nlohmann::json& a, const nlohmann::json& b) {
  constexpr double kInfinite = std::numeric_limits<double>::infinity();
  if (!a.is_object() || !b.is_object() || a.size() != b.size()) return kInfinite;
  double d = 0;
  for (const auto& [name, va] : a.items()) {
    if (!b.contains(name)) return kInfinite;
    const nlohmann::json& vb = b.at(name);
    const auto ia = as_integer(va), ib = as_integer(vb);
    if (ia && ib) {
      // Sizes are >= 1 in every template; a 0 (a padding) counts as 1.
      d += std::fabs(std::log2(static_cast<double>(std::max<int64_t>(*ia, 1))) -
                     std::log2(static_cast<double>(std::max<int64_t>(*ib, 1))));
    } else if (va != vb) {
      return kInfinite;
    }
  }
  return d;
}

std::optional<NearestTuned> nearest_tuned(Database& db, const schedule_space::Task& task, const TargetKey& target,
                                          const RecordQuery& query) {
  struct Candidate {
    double distance;
    std::string workload_key;
    std::vector<Record> best;
  };
  const nlohmann::json own_args = task.args_json();
  std::vector<Candidate> candidates;
  for (const WorkloadSummary& s : db.summaries()) {
    if (s.template_name != task.template_name() || s.target.target != target.target) continue;
    if (s.workload_key == task.workload_key()) continue;
    std::vector<Record> best = db.top_k(s.workload_key, TargetKey{target.target, ""}, kRecordsPerWorkload, query);
    if (best.empty()) continue;
    const double d = workload_distance(best.front().args, own_args);
    if (std::isfinite(d)) candidates.push_back({d, s.workload_key, std::move(best)});
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& x, const Candidate& y) {
    return x.distance != y.distance ? x.distance < y.distance : x.workload_key < y.workload_key;
  });
  const schedule_space::ConfigSpace& space = task.space();
  for (Candidate& c : candidates) {
    for (Record& r : c.best) {
      try {
        const uint64_t index = space.index_of(schedule_space::Config::from_json(r.config));
        if (!space.is_valid(index)) continue;
        schedule_space::Config config = space.get(index);
        task.instantiate(config);  // throws for a config this shape cannot take
        return NearestTuned{std::move(r), std::move(config), c.distance};
      } catch (const Error&) {
        // Not a config of this shape (a knob value its space lacks, or it does not instantiate).
      }
    }
  }
  return std::nullopt;
}

}  // namespace ktune::tuning_db
