// The nearest tuned workload: rank the template's tuned workloads by argument distance, take the
// first config that the new shape's space holds and that instantiates.
#include "tuning_db/nearest.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
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
  if (s.empty() || s.size() > 18 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(s);
}

// How far two split entities are: |log2| differences of their fixed factors (the remainder
// factor -1 is whatever is left); infinite for splits of different lengths.
double split_distance(const schedule_space::Entity& a, const schedule_space::Entity& b) {
  if (a.values.size() != b.values.size()) return std::numeric_limits<double>::infinity();
  double d = 0;
  for (size_t i = 0; i < a.values.size(); ++i) {
    if (a.values[i] == -1 && b.values[i] == -1) continue;
    if (a.values[i] <= 0 || b.values[i] <= 0) return std::numeric_limits<double>::infinity();
    d += std::fabs(std::log2(static_cast<double>(a.values[i])) -
                   std::log2(static_cast<double>(b.values[i])));
  }
  return d;
}

// Whether a split's fixed factors leave a remainder on `extent` (a guarded or peeled tail).
bool leaves_tail(const schedule_space::Entity& split, int64_t extent) {
  int64_t product = 1;
  for (int64_t f : split.values)
    if (f > 0) product *= f;
  return product <= 0 || extent % product != 0;
}

const schedule_space::SplitKnob* as_split(const schedule_space::Knob* knob) {
  return dynamic_cast<const schedule_space::SplitKnob*>(knob);
}

// The config of `space` closest to `old` (a config of `old_space`, the tuned shape's): each
// knob keeps the old value where the space has it; a split knob whose factors this shape does
// not offer takes the candidate with the nearest factors (AutoTVM's fallback_split); another
// knob without the old value takes the fallback's. A split that divided the tuned shape's axis
// must divide this one too: a tuned schedule whose tiles now leave tails is not the schedule
// that was measured (remainder loops lose the vector body), so the nearest dividing factors are
// taken instead. Returns the index (nullopt when a knob cannot be carried over) and counts the
// knobs that were adapted. A knob the space has and the old config lacks takes its legacy value,
// if it has one; otherwise the config cannot be carried over.
std::optional<uint64_t> adapt(const schedule_space::Config& old,
                              const schedule_space::ConfigSpace& old_space,
                              const schedule_space::ConfigSpace& space,
                              const schedule_space::Config& fallback, int* adapted) {
  std::vector<uint64_t> digits;
  *adapted = 0;
  // A knob the old config lacks but that has a legacy value (added to the template later, or
  // offered only for this shape, as stream_b for M <= 4) means the schedule the old one had.
  const schedule_space::Config full = space.complete(old);
  for (size_t k = 0; k < space.num_knobs(); ++k) {
    const schedule_space::Knob& knob = space.knob(k);
    const schedule_space::Entity* value = full.find(knob.name());
    if (!value) return std::nullopt;
    int64_t at = knob.find(*value);
    const schedule_space::SplitKnob* split = as_split(&knob);
    const schedule_space::SplitKnob* old_split = as_split(old_space.find_knob(knob.name()));
    const bool must_divide = split && old_split && !leaves_tail(*value, old_split->params().extent);
    if (at >= 0 && must_divide && leaves_tail(*value, split->params().extent)) at = -1;
    if (at < 0) {
      ++*adapted;
      if (split) {
        double best = std::numeric_limits<double>::infinity();
        for (uint64_t i = 0; i < knob.size(); ++i) {
          if (must_divide && leaves_tail(knob.entity(i), split->params().extent)) continue;
          const double d = split_distance(*value, knob.entity(i));
          if (d < best) best = d, at = static_cast<int64_t>(i);
        }
      } else if (const schedule_space::Entity* f = fallback.find(knob.name())) {
        at = knob.find(*f);
      }
      if (at < 0) return std::nullopt;
    }
    digits.push_back(static_cast<uint64_t>(at));
  }
  return space.index_of(digits);
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

std::optional<NearestTuned> nearest_tuned(Database& db, const schedule_space::Task& task,
                                          const TargetKey& target, const RecordQuery& query) {
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
    std::vector<Record> best =
        db.top_k(s.workload_key, TargetKey{target.target, ""}, kRecordsPerWorkload, query);
    if (best.empty()) continue;
    const double d = workload_distance(best.front().args, own_args);
    if (std::isfinite(d)) candidates.push_back({d, s.workload_key, std::move(best)});
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& x, const Candidate& y) {
    return x.distance != y.distance ? x.distance < y.distance : x.workload_key < y.workload_key;
  });
  const schedule_space::ConfigSpace& space = task.space();
  const schedule_space::Config fallback = task.fallback_config();
  for (Candidate& c : candidates) {
    std::optional<schedule_space::Task> tuned;  // the tuned shape's task, for its axes' extents
    for (Record& r : c.best) {
      try {
        if (!tuned) {
          std::map<std::string, std::string> args;
          for (const auto& [k, v] : r.args.items())
            args[k] = v.is_string() ? v.get<std::string>() : v.dump();
          tuned = schedule_space::Task::create(task.template_name(), args, task.target());
        }
        int adapted = 0;
        const auto index = adapt(schedule_space::Config::from_json(r.config), tuned->space(), space,
                                 fallback, &adapted);
        if (!index || !space.is_valid(*index)) continue;
        schedule_space::Config config = space.get(*index);
        task.instantiate(config);  // throws for a config this shape cannot take
        return NearestTuned{std::move(r), std::move(config), c.distance, adapted};
      } catch (const Error&) {
        // Not a config of this shape (it does not instantiate), or a tuned shape this ktune
        // cannot rebuild: the next record.
      }
    }
  }
  return std::nullopt;
}

}  // namespace ktune::tuning_db
