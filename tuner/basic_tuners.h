// Defines the model-free tuners: RandomTuner, GridSearchTuner and GATuner (genetic algorithm).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "schedule_space/config_space.h"
#include "tuner/tuner.h"

namespace ktune::tuner {

// Proposes distinct valid configs uniformly at random (ConfigSpace::sample), seeded.
// Keeps a reference to the space: the task must outlive the tuner.
class RandomTuner : public Tuner {
 public:
  RandomTuner(const schedule_space::ConfigSpace& space, uint64_t seed);
  std::string name() const override { return "random"; }
  bool has_next() const override;
  std::vector<schedule_space::Config> next_batch(size_t n) override;
  void update(const std::vector<MeasureInput>& inputs,
              const std::vector<MeasureResult>& results) override;

 private:
  const schedule_space::ConfigSpace& space_;
  std::mt19937_64 rng_;
  std::unordered_set<uint64_t> visited_;
  bool exhausted_ = false;  // sample() returned nothing: no valid config left
};

// Walks the space in index order, skipping invalid and already-visited configs.
class GridSearchTuner : public Tuner {
 public:
  explicit GridSearchTuner(const schedule_space::ConfigSpace& space);
  std::string name() const override { return "grid"; }
  bool has_next() const override { return next_index_ < space_.size(); }
  std::vector<schedule_space::Config> next_batch(size_t n) override;
  void update(const std::vector<MeasureInput>& inputs,
              const std::vector<MeasureResult>& results) override;

 private:
  const schedule_space::ConfigSpace& space_;
  uint64_t next_index_ = 0;
  std::unordered_set<uint64_t> visited_;
};

// Parameters of GATuner; defaults are AutoTVM's GATuner(pop_size=100, elite_num=3,
// mutation_prob=0.1).
struct GAOptions {
  size_t pop_size = 100;       // genes per generation
  size_t elite_num = 3;        // best genes carried into the next generation's parent pool
  double mutation_prob = 0.1;  // per knob, chance to replace its value by a random one
  uint64_t seed = 0;
  size_t max_retries = 64;  // attempts per child before falling back to a random config
};

// AutoTVM's GATuner semantics: a gene is the vector of knob indices of a config. The first
// generation is random; once a whole generation is measured, the next one is bred from the
// measured genes plus the elites: parents drawn with probability proportional to their
// score (flop / mean cost, failed = 0), one-point crossover on knob indices, per-knob
// mutation; children that are invalid or already visited are redrawn.
class GATuner : public Tuner {
 public:
  GATuner(const schedule_space::ConfigSpace& space, double flop, const GAOptions& options = {});
  std::string name() const override { return "ga"; }
  bool has_next() const override { return !exhausted_; }
  std::vector<schedule_space::Config> next_batch(size_t n) override;
  void update(const std::vector<MeasureInput>& inputs,
              const std::vector<MeasureResult>& results) override;

  // Returns the generation being proposed (0 = the random first one); for tests.
  size_t generation() const { return generation_; }

 private:
  struct Scored {
    uint64_t index;
    double score;
  };
  void breed();
  uint64_t child_of(const std::vector<Scored>& parents, const std::vector<double>& cumulative);

  const schedule_space::ConfigSpace& space_;
  double flop_;
  GAOptions options_;
  std::mt19937_64 rng_;
  std::unordered_set<uint64_t> visited_;
  std::vector<uint64_t> population_;  // current generation, proposed in order
  size_t next_in_population_ = 0;
  std::vector<Scored> measured_;  // results of the current generation so far
  std::vector<Scored> elites_;
  size_t generation_ = 0;
  bool exhausted_ = false;
};

}  // namespace ktune::tuner
