// SimulatedAnnealing: lockstep chains, AutoTVM's acceptance rule, a top-k set of distinct points.
#include "tuner/simulated_annealing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include "schedule_space/config_space.h"
#include "support/error.h"

namespace ktune::tuner {
namespace {

// The k best distinct points seen, excluding a given set.
class TopSet {
 public:
  TopSet(size_t k, const std::unordered_set<uint64_t>& exclude) : k_(k), exclude_(exclude) {}

  // Returns true when the point entered the set.
  bool offer(uint64_t index, float score) {
    if (k_ == 0 || members_.count(index) != 0 || exclude_.count(index) != 0) return false;
    if (items_.size() == k_) {
      auto worst = items_.begin();
      if (!(score > worst->first)) return false;
      members_.erase(worst->second);
      items_.erase(worst);
    }
    items_.emplace(score, index);
    members_.insert(index);
    return true;
  }

  std::vector<ScoredIndex> sorted() const {
    std::vector<ScoredIndex> out;
    out.reserve(items_.size());
    for (auto it = items_.rbegin(); it != items_.rend(); ++it)
      out.push_back({it->second, it->first});
    return out;
  }

 private:
  // Ordered worst first: lower score, then larger index (so ties prefer smaller indices).
  struct Worse {
    bool operator()(const std::pair<float, uint64_t>& a,
                    const std::pair<float, uint64_t>& b) const {
      if (a.first != b.first) return a.first < b.first;
      return a.second > b.second;
    }
  };
  size_t k_;
  const std::unordered_set<uint64_t>& exclude_;
  std::set<std::pair<float, uint64_t>, Worse> items_;
  std::unordered_set<uint64_t> members_;
};

std::vector<float> score_checked(const BatchScore& score, const std::vector<uint64_t>& points) {
  std::vector<float> s = score(points);
  if (s.size() != points.size()) {
    throw Error(ErrorKind::kInvalidArgument, "annealing: the scoring function returned " +
                                                 std::to_string(s.size()) + " scores for " +
                                                 std::to_string(points.size()) + " points");
  }
  // A NaN would never compare; treat it as the worst score.
  for (float& v : s) {
    if (std::isnan(v)) v = std::numeric_limits<float>::lowest();
  }
  return s;
}

}  // namespace

SpaceMoves space_moves(const schedule_space::ConfigSpace& space) {
  const schedule_space::ConfigSpace* s = &space;
  return SpaceMoves{
      .sample = [s](size_t n, std::mt19937_64& rng) { return s->sample(n, rng); },
      .neighbour = [s](uint64_t index, std::mt19937_64& rng) { return s->neighbour(index, rng); },
  };
}

SimulatedAnnealing::SimulatedAnnealing(SpaceMoves moves, AnnealingParams params)
    : moves_(std::move(moves)), params_(params), rng_(params.seed) {
  if (!moves_.sample || !moves_.neighbour) {
    throw Error(ErrorKind::kInvalidArgument, "annealing: the space moves are not set");
  }
}

std::vector<ScoredIndex> SimulatedAnnealing::find_maximums(
    size_t top_k, const BatchScore& score, const std::unordered_set<uint64_t>& exclude) {
  report_ = AnnealingReport{};
  if (!params_.persistent || points_.empty()) points_ = moves_.sample(params_.chains, rng_);
  TopSet top(top_k, exclude);
  if (points_.empty()) return {};

  std::vector<float> scores = score_checked(score, points_);
  report_.scored += points_.size();
  for (size_t i = 0; i < points_.size(); ++i) top.offer(points_[i], scores[i]);

  double t = params_.temperature_start;
  double cool = (params_.temperature_start - params_.temperature_end) / (params_.steps + 1);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  std::vector<uint64_t> proposals(points_.size());
  int k = 0, last_change = 0;
  while (k < params_.steps && k < last_change + params_.early_stop) {
    for (size_t i = 0; i < points_.size(); ++i) proposals[i] = moves_.neighbour(points_[i], rng_);
    std::vector<float> proposal_scores = score_checked(score, proposals);
    report_.scored += proposals.size();
    for (size_t i = 0; i < points_.size(); ++i) {
      double delta = (static_cast<double>(proposal_scores[i]) - scores[i]) / (t + 1e-5);
      if (std::exp(std::min(delta, 1.0)) > uniform(rng_)) {
        points_[i] = proposals[i];
        scores[i] = proposal_scores[i];
      }
    }
    for (size_t i = 0; i < proposals.size(); ++i) {
      if (top.offer(proposals[i], proposal_scores[i])) last_change = k;
    }
    ++k;
    t -= cool;
  }
  report_.steps = k;
  std::vector<ScoredIndex> result = top.sorted();
  if (!params_.persistent) points_.clear();
  return result;
}

}  // namespace ktune::tuner
