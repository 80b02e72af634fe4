// Defines the Tuner interface: a search strategy that proposes configs and learns from results.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "schedule_space/config.h"
#include "tuner/measure.h"

namespace ktune::tuner {

// A search strategy over one task's ConfigSpace. The tuning loop calls next_batch, measures
// the configs, then calls update with the inputs and results in the same order. Configs that
// were measured before (resume) are handed to update as well, before the first next_batch,
// so the tuner never proposes them. A Tuner is used by one thread.
class Tuner {
 public:
  virtual ~Tuner() = default;
  // Returns a short stable name ("random", "grid", "ga", "xgb") stored in the tuning log.
  virtual std::string name() const = 0;
  // Returns false once the tuner has nothing left to propose (space exhausted).
  virtual bool has_next() const = 0;
  // Returns up to n valid configs never proposed (or reported through update) before; fewer
  // (possibly none) when the space runs out.
  virtual std::vector<schedule_space::Config> next_batch(size_t n) = 0;
  // Learns from measured candidates (results[i] belongs to inputs[i]).
  virtual void update(const std::vector<MeasureInput>& inputs,
                      const std::vector<MeasureResult>& results) = 0;
};

}  // namespace ktune::tuner
