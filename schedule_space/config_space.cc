// ConfigSpace: mixed-radix indexing, constraint checks per config, rejection sampling, neighbours.
#include "schedule_space/config_space.h"

#include <algorithm>
#include <sstream>

#include "support/error.h"

namespace ktune::schedule_space {

const Entity& EntityView::operator[](std::string_view name) const {
  if (config_) return (*config_)[name];
  const int64_t pos = space_->knob_position(name);
  if (pos < 0)
    throw Error(ErrorKind::kInstantiation,
                "constraint reads unknown knob '" + std::string(name) + "'");
  return space_->knob(static_cast<size_t>(pos)).entity((*knob_indices_)[static_cast<size_t>(pos)]);
}

uint64_t EntityView::index() const {
  return config_ ? config_->index() : space_->index_of(*knob_indices_);
}

const Knob& ConfigSpace::add_knob(std::shared_ptr<const Knob> knob) {
  if (!knob) throw Error(ErrorKind::kInvalidArgument, "null knob");
  if (positions_.count(knob->name()))
    throw Error(ErrorKind::kInvalidArgument, "knob '" + knob->name() + "' defined twice");
  const uint64_t k = knob->size();
  if (size_ > kMaxSize / k || size_ * k > kMaxSize)
    throw Error(ErrorKind::kInvalidArgument,
                "config space exceeds 2^63 configs when adding knob '" + knob->name() + "' (size " +
                    std::to_string(k) + ")");
  size_ *= k;
  feature_length_ += knob->feature_length();
  if (k > 1) movable_.push_back(knobs_.size());
  positions_.emplace(knob->name(), knobs_.size());
  valid_set_ = std::make_shared<ValidSet>();
  knobs_.push_back(std::move(knob));
  return *knobs_.back();
}

const Knob& ConfigSpace::define_split(const std::string& name, const SplitParams& params) {
  return add_knob(std::make_shared<SplitKnob>(name, params));
}
const Knob& ConfigSpace::define_reorder(const std::string& name, const ReorderParams& params) {
  return add_knob(std::make_shared<ReorderKnob>(name, params));
}
const Knob& ConfigSpace::define_annotate(const std::string& name, const AnnotateParams& params) {
  return add_knob(std::make_shared<AnnotateKnob>(name, params));
}
const Knob& ConfigSpace::define_knob(const std::string& name, const std::vector<int64_t>& values) {
  return add_knob(std::make_shared<OtherKnob>(name, values));
}
const Knob& ConfigSpace::define_knob(const std::string& name,
                                     const std::vector<std::string>& values) {
  return add_knob(std::make_shared<OtherKnob>(name, values));
}

void ConfigSpace::add_constraint(std::string name,
                                 std::function<bool(const EntityView&)> predicate) {
  if (!predicate)
    throw Error(ErrorKind::kInvalidArgument, "constraint '" + name + "' has no predicate");
  constraints_.push_back({std::move(name), std::move(predicate)});
  valid_set_ = std::make_shared<ValidSet>();
}

void ConfigSpace::set_legacy_value(const std::string& name, int64_t value) {
  const Knob* k = find_knob(name);
  if (!k) throw Error(ErrorKind::kInvalidArgument, "legacy value for unknown knob '" + name + "'");
  for (const Entity& e : k->entities())
    if (!e.is_string && e.values.size() == 1 && e.values[0] == value) {
      legacy_[name] = e;
      return;
    }
  throw Error(ErrorKind::kInvalidArgument,
              "knob '" + name + "' has no candidate " + std::to_string(value));
}

Config ConfigSpace::complete(const Config& config) const {
  std::vector<Entity> entities;
  for (const auto& [name, entity] : legacy_)
    if (!config.find(name)) entities.push_back(entity);
  if (entities.empty()) return config;
  entities.insert(entities.begin(), config.entities().begin(), config.entities().end());
  return Config(config.template_name(), config.index(), std::move(entities));
}

std::vector<uint64_t> ConfigSpace::knob_sizes() const {
  std::vector<uint64_t> out;
  out.reserve(knobs_.size());
  for (const auto& k : knobs_) out.push_back(k->size());
  return out;
}

const Knob* ConfigSpace::find_knob(std::string_view name) const {
  const int64_t pos = knob_position(name);
  return pos < 0 ? nullptr : knobs_[static_cast<size_t>(pos)].get();
}

int64_t ConfigSpace::knob_position(std::string_view name) const {
  auto it = positions_.find(name);
  return it == positions_.end() ? -1 : static_cast<int64_t>(it->second);
}

void ConfigSpace::decompose(uint64_t index, std::vector<uint64_t>& digits) const {
  digits.resize(knobs_.size());
  for (size_t i = 0; i < knobs_.size(); ++i) {
    const uint64_t k = knobs_[i]->size();
    digits[i] = index % k;
    index /= k;
  }
}

std::vector<uint64_t> ConfigSpace::knob_indices(uint64_t index) const {
  if (index >= size_)
    throw Error(ErrorKind::kInvalidArgument, "config index " + std::to_string(index) +
                                                 " out of range (space size " +
                                                 std::to_string(size_) + ")");
  std::vector<uint64_t> digits;
  decompose(index, digits);
  return digits;
}

uint64_t ConfigSpace::index_of(const std::vector<uint64_t>& digits) const {
  if (digits.size() != knobs_.size())
    throw Error(ErrorKind::kInvalidArgument,
                "knob index vector has " + std::to_string(digits.size()) +
                    " entries, the space has " + std::to_string(knobs_.size()) + " knobs");
  uint64_t index = 0;
  for (size_t i = knobs_.size(); i-- > 0;) {
    if (digits[i] >= knobs_[i]->size())
      throw Error(ErrorKind::kInvalidArgument,
                  "knob '" + knobs_[i]->name() + "' has no candidate " + std::to_string(digits[i]) +
                      " (size " + std::to_string(knobs_[i]->size()) + ")");
    index = index * knobs_[i]->size() + digits[i];
  }
  return index;
}

uint64_t ConfigSpace::index_of(const Config& given) const {
  const Config config = complete(given);
  std::vector<uint64_t> digits(knobs_.size());
  for (size_t i = 0; i < knobs_.size(); ++i) {
    const Entity* e = config.find(knobs_[i]->name());
    if (!e)
      throw Error(ErrorKind::kInvalidArgument, "config has no knob '" + knobs_[i]->name() + "'");
    if (e->kind != knobs_[i]->kind())
      throw Error(ErrorKind::kInvalidArgument,
                  "config knob '" + e->name + "' is of kind " + std::string(to_string(e->kind)) +
                      ", the space's is " + std::string(to_string(knobs_[i]->kind())));
    const int64_t pos = knobs_[i]->find(*e);
    if (pos < 0)
      throw Error(ErrorKind::kInvalidArgument, "config value " + e->to_json()[2].dump() +
                                                   " of knob '" + e->name +
                                                   "' is not in this space");
    digits[i] = static_cast<uint64_t>(pos);
  }
  return index_of(digits);
}

Config ConfigSpace::get(uint64_t index) const {
  const auto digits = knob_indices(index);
  std::vector<Entity> entities;
  entities.reserve(knobs_.size());
  for (size_t i = 0; i < knobs_.size(); ++i) entities.push_back(knobs_[i]->entity(digits[i]));
  return Config(template_name_, index, std::move(entities));
}

bool ConfigSpace::valid_digits(const std::vector<uint64_t>& digits) const {
  const EntityView view(*this, digits);
  for (const auto& c : constraints_)
    if (!c.predicate(view)) return false;
  return true;
}

bool ConfigSpace::is_valid(uint64_t index) const {
  if (index >= size_) return false;
  if (constraints_.empty()) return true;
  std::vector<uint64_t> digits;
  decompose(index, digits);
  return valid_digits(digits);
}

std::string ConfigSpace::rejecting_constraint(const Config& given) const {
  const Config config = complete(given);
  const EntityView view(config);
  for (const auto& c : constraints_)
    if (!c.predicate(view)) return c.name;
  return "";
}

const ConfigSpace::ValidSet* ConfigSpace::valid_set() const {
  if (size_ > kEnumerateLimit || !valid_set_) return nullptr;
  ValidSet& set = *valid_set_;
  std::call_once(set.once, [&] {
    set.valid.assign(size_, false);
    std::vector<uint64_t> digits;
    for (uint64_t i = 0; i < size_; ++i) {
      decompose(i, digits);
      if (!valid_digits(digits)) continue;
      set.valid[i] = true;
      set.indices.push_back(static_cast<uint32_t>(i));
    }
  });
  return &set;
}

namespace {

// The valid indices less an excluded set, in ascending order, addressed by position without
// building the list: position j is the j-th valid index once the excluded ones are skipped.
class RemainingValid {
 public:
  RemainingValid(const std::vector<uint32_t>& valid, const std::vector<bool>& is_valid,
                 const std::unordered_set<uint64_t>& exclude)
      : valid_(valid) {
    for (uint64_t e : exclude) {
      if (e >= is_valid.size() || !is_valid[e]) continue;
      gone_.push_back(static_cast<size_t>(
          std::lower_bound(valid.begin(), valid.end(), static_cast<uint32_t>(e)) - valid.begin()));
    }
    std::sort(gone_.begin(), gone_.end());
    // gone_[k] - k valid indices that remain lie before the k-th excluded one: it precedes
    // remaining position j exactly when that count is <= j.
    for (size_t k = 0; k < gone_.size(); ++k) gone_[k] -= k;
  }
  size_t size() const { return valid_.size() - gone_.size(); }
  uint64_t at(size_t j) const {
    const auto skipped = std::upper_bound(gone_.begin(), gone_.end(), j) - gone_.begin();
    return valid_[j + static_cast<size_t>(skipped)];
  }

 private:
  const std::vector<uint32_t>& valid_;
  std::vector<size_t> gone_;  // per excluded valid index: its position less the ones before it
};

// The first n of a partial Fisher-Yates shuffle of `pool` (size() and at(position), ascending):
// a uniform sample without replacement. Only the positions it swapped are stored.
template <typename Pool>
std::vector<uint64_t> partial_shuffle(const Pool& pool, size_t n, std::mt19937_64& rng) {
  std::unordered_map<size_t, uint64_t> swapped;
  auto value = [&](size_t pos) {
    auto it = swapped.find(pos);
    return it == swapped.end() ? pool.at(pos) : it->second;
  };
  const size_t take = std::min(n, pool.size());
  std::vector<uint64_t> out;
  out.reserve(take);
  for (size_t i = 0; i < take; ++i) {
    std::uniform_int_distribution<size_t> pick(i, pool.size() - 1);
    const size_t j = pick(rng);
    const uint64_t chosen = value(j);
    if (j != i) swapped[j] = value(i);
    out.push_back(chosen);
  }
  return out;
}

}  // namespace

template <typename Excluded>
std::vector<uint64_t> ConfigSpace::sample_rejecting(size_t n, std::mt19937_64& rng,
                                                    const Excluded& excluded) const {
  std::vector<uint64_t> out;
  std::vector<uint64_t> digits;
  std::unordered_set<uint64_t> taken;
  std::uniform_int_distribution<uint64_t> draw(0, size_ - 1);
  const size_t budget = kSampleTriesBase + kSampleTriesPerPick * n;
  for (size_t t = 0; t < budget && out.size() < n; ++t) {
    const uint64_t i = draw(rng);
    if (excluded.count(i) || taken.count(i)) continue;
    decompose(i, digits);
    if (!valid_digits(digits)) continue;
    taken.insert(i);
    out.push_back(i);
  }
  return out;
}

std::vector<uint64_t> ConfigSpace::sample(size_t n, std::mt19937_64& rng,
                                          const std::unordered_set<uint64_t>& exclude) const {
  if (n == 0) return {};
  if (const ValidSet* set = valid_set())
    return partial_shuffle(RemainingValid(set->indices, set->valid, exclude), n, rng);
  return sample_rejecting(n, rng, exclude);
}

std::vector<uint64_t> ConfigSpace::sample(size_t n, std::mt19937_64& rng,
                                          const ConfigSet& exclude) const {
  if (n == 0) return {};
  const ValidSet* set = valid_set();
  if (set && exclude.valid_.get() != set) return sample(n, rng, exclude.indices());
  if (set) {
    // The remaining valid indices, addressed through the set's tree.
    struct Pool {
      const ConfigSet& exclude;
      const std::vector<uint32_t>& valid;
      size_t size() const { return exclude.remaining(); }
      uint64_t at(size_t j) const { return valid[exclude.remaining_position(j)]; }
    };
    return partial_shuffle(Pool{exclude, set->indices}, n, rng);
  }
  return sample_rejecting(n, rng, exclude.indices());
}

uint64_t ConfigSpace::neighbour(uint64_t index, std::mt19937_64& rng) const {
  std::vector<uint64_t> digits = knob_indices(index);
  if (movable_.empty()) return index;
  const ValidSet* set = valid_set();
  std::uniform_int_distribution<size_t> pick_knob(0, movable_.size() - 1);
  for (int t = 0; t < kNeighbourTries; ++t) {
    const size_t k = movable_[pick_knob(rng)];
    const uint64_t old = digits[k];
    // Uniform over the other candidates: draw from size-1 values and skip the current one.
    std::uniform_int_distribution<uint64_t> pick_value(0, knobs_[k]->size() - 2);
    uint64_t v = pick_value(rng);
    if (v >= old) ++v;
    digits[k] = v;
    if (set) {
      const uint64_t candidate = index_of(digits);
      if (set->valid[candidate]) return candidate;
    } else if (valid_digits(digits)) {
      return index_of(digits);
    }
    digits[k] = old;
  }
  return index;
}

std::vector<float> ConfigSpace::knob_features(uint64_t index) const {
  const auto digits = knob_indices(index);
  std::vector<float> out;
  out.reserve(feature_length_);
  for (size_t i = 0; i < knobs_.size(); ++i) knobs_[i]->append_features(digits[i], out);
  return out;
}

ConfigSet::ConfigSet(const ConfigSpace& space) {
  if (!space.valid_set()) return;
  valid_ = space.valid_set_;
  // Every valid position starts as remaining: a Fenwick tree of ones.
  const size_t n = valid_->indices.size();
  tree_.resize(n + 1);
  for (size_t i = 1; i <= n; ++i) tree_[i] = static_cast<uint32_t>(i & (~i + 1));
}

bool ConfigSet::insert(uint64_t index) {
  if (!indices_.insert(index).second) return false;
  if (!valid_ || index >= valid_->valid.size() || !valid_->valid[index]) return true;
  const std::vector<uint32_t>& valid = valid_->indices;
  const auto pos = static_cast<size_t>(
      std::lower_bound(valid.begin(), valid.end(), static_cast<uint32_t>(index)) - valid.begin());
  for (size_t i = pos + 1; i < tree_.size(); i += i & (~i + 1)) --tree_[i];
  ++excluded_valid_;
  return true;
}

size_t ConfigSet::remaining() const {
  return valid_ ? valid_->indices.size() - excluded_valid_ : 0;
}

size_t ConfigSet::remaining_position(size_t j) const {
  // Descends the tree to the last position before which at most j valid indices remain.
  size_t pos = 0;
  size_t left = j + 1;
  size_t step = 1;
  while (step * 2 < tree_.size()) step *= 2;
  for (; step > 0; step /= 2) {
    if (pos + step < tree_.size() && tree_[pos + step] < left) {
      pos += step;
      left -= tree_[pos];
    }
  }
  return pos;
}

std::string ConfigSpace::describe() const {
  std::ostringstream os;
  for (const auto& k : knobs_) os << k->name() << ": " << k->describe() << "\n";
  for (const auto& c : constraints_) os << "constraint: " << c.name << "\n";
  os << "size: " << size_ << "\n";
  return os.str();
}

}  // namespace ktune::schedule_space
