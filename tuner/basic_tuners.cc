// The random, grid-search and genetic-algorithm tuners.
#include "tuner/basic_tuners.h"

#include <algorithm>
#include <numeric>

namespace ktune::tuner {
namespace {

void mark_visited(std::unordered_set<uint64_t>& visited, const std::vector<MeasureInput>& inputs) {
  for (const auto& input : inputs) visited.insert(input.config.index());
}

}  // namespace

// ---------------------------------------------------------------------------------- random

RandomTuner::RandomTuner(const schedule_space::ConfigSpace& space, uint64_t seed)
    : space_(space), rng_(seed) {}

bool RandomTuner::has_next() const { return !exhausted_ && visited_.size() < space_.size(); }

std::vector<schedule_space::Config> RandomTuner::next_batch(size_t n) {
  std::vector<schedule_space::Config> batch;
  if (!has_next() || n == 0) return batch;
  std::vector<uint64_t> picked = space_.sample(n, rng_, visited_);
  // An empty draw means no valid unvisited config is left (or a very sparse space defeated
  // rejection sampling, which repeated asks would not fix either).
  if (picked.empty()) exhausted_ = true;
  for (uint64_t index : picked) {
    visited_.insert(index);
    batch.push_back(space_.get(index));
  }
  return batch;
}

void RandomTuner::update(const std::vector<MeasureInput>& inputs,
                         const std::vector<MeasureResult>& /*results*/) {
  mark_visited(visited_, inputs);
}

// ------------------------------------------------------------------------------------ grid

GridSearchTuner::GridSearchTuner(const schedule_space::ConfigSpace& space) : space_(space) {}

std::vector<schedule_space::Config> GridSearchTuner::next_batch(size_t n) {
  std::vector<schedule_space::Config> batch;
  const uint64_t size = space_.size();
  while (batch.size() < n && next_index_ < size) {
    uint64_t index = next_index_++;
    if (visited_.count(index) || !space_.is_valid(index)) continue;
    visited_.insert(index);
    batch.push_back(space_.get(index));
  }
  return batch;
}

void GridSearchTuner::update(const std::vector<MeasureInput>& inputs,
                             const std::vector<MeasureResult>& /*results*/) {
  mark_visited(visited_, inputs);
}

// -------------------------------------------------------------------------------------- GA

GATuner::GATuner(const schedule_space::ConfigSpace& space, double flop, const GAOptions& options)
    : space_(space), flop_(flop), options_(options), rng_(options.seed) {
  options_.pop_size = std::max<size_t>(options_.pop_size, 2);
  options_.elite_num = std::min(options_.elite_num, options_.pop_size);
}

std::vector<schedule_space::Config> GATuner::next_batch(size_t n) {
  std::vector<schedule_space::Config> batch;
  while (batch.size() < n && !exhausted_) {
    if (next_in_population_ == population_.size()) {
      breed();
      if (population_.empty()) {
        exhausted_ = true;
        break;
      }
    }
    uint64_t index = population_[next_in_population_++];
    batch.push_back(space_.get(index));
  }
  return batch;
}

void GATuner::update(const std::vector<MeasureInput>& inputs,
                     const std::vector<MeasureResult>& results) {
  for (size_t i = 0; i < inputs.size() && i < results.size(); ++i) {
    uint64_t index = inputs[i].config.index();
    visited_.insert(index);
    double score = results[i].ok() ? flop_ / results[i].mean_cost() : 0.0;
    measured_.push_back({index, score});
  }
}

void GATuner::breed() {
  population_.clear();
  next_in_population_ = 0;
  if (visited_.size() >= space_.size()) return;

  std::vector<Scored> pool = measured_;
  pool.insert(pool.end(), elites_.begin(), elites_.end());
  measured_.clear();
  if (generation_ > 0 || !pool.empty()) ++generation_;

  // Too few parents to cross over (first generation, or nothing measured): random genes.
  if (pool.size() < 2) {
    population_ = space_.sample(options_.pop_size, rng_, visited_);
    for (uint64_t index : population_) visited_.insert(index);
    return;
  }

  // Elites: the best elite_num genes of the pool survive as parents of the next generation.
  std::vector<Scored> sorted = pool;
  std::sort(sorted.begin(), sorted.end(),
            [](const Scored& a, const Scored& b) { return a.score > b.score; });
  elites_.assign(sorted.begin(), sorted.begin() + std::min(options_.elite_num, sorted.size()));

  // Selection probability proportional to the normalized score (+1e-8: all-failed pools
  // become uniform rather than degenerate, as in AutoTVM).
  double max_score = sorted.front().score;
  std::vector<double> cumulative(pool.size());
  double total = 0;
  for (size_t i = 0; i < pool.size(); ++i) {
    double p = max_score > 0 ? pool[i].score / max_score + 1e-8 : 1.0;
    total += p;
    cumulative[i] = total;
  }
  for (size_t i = 0; i < options_.pop_size; ++i) {
    uint64_t child = child_of(pool, cumulative);
    if (child == UINT64_MAX) break;
    visited_.insert(child);
    population_.push_back(child);
  }
}

uint64_t GATuner::child_of(const std::vector<Scored>& parents,
                           const std::vector<double>& cumulative) {
  const std::vector<uint64_t> dims = space_.knob_sizes();
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  auto pick_parent = [&](size_t avoid) {
    for (;;) {
      double u = unit(rng_) * cumulative.back();
      size_t i = std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin();
      i = std::min(i, parents.size() - 1);
      if (i != avoid) return i;
    }
  };
  size_t a = pick_parent(parents.size());
  size_t b = pick_parent(a);
  std::vector<uint64_t> gene = space_.knob_indices(parents[a].index);
  std::vector<uint64_t> other = space_.knob_indices(parents[b].index);
  size_t point = std::uniform_int_distribution<size_t>(0, dims.size() - 1)(rng_);
  for (size_t j = point; j < dims.size(); ++j) gene[j] = other[j];
  for (size_t j = 0; j < dims.size(); ++j) {
    if (unit(rng_) < options_.mutation_prob)
      gene[j] = std::uniform_int_distribution<uint64_t>(0, dims[j] - 1)(rng_);
  }
  // Redraw single knobs until the child is new and valid (AutoTVM only checks "new").
  for (size_t attempt = 0; attempt < options_.max_retries; ++attempt) {
    uint64_t index = space_.index_of(gene);
    if (!visited_.count(index) && space_.is_valid(index)) return index;
    size_t j = std::uniform_int_distribution<size_t>(0, dims.size() - 1)(rng_);
    gene[j] = std::uniform_int_distribution<uint64_t>(0, dims[j] - 1)(rng_);
  }
  std::vector<uint64_t> fresh = space_.sample(1, rng_, visited_);
  return fresh.empty() ? UINT64_MAX : fresh.front();
}

}  // namespace ktune::tuner
