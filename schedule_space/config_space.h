// Defines ConfigSpace (the knobs of a template with mixed-radix indexing, per-config constraints,
// sampling and features) and ConfigSet (config indices that sampling excludes cheaply).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "schedule_space/config.h"
#include "schedule_space/knob.h"

namespace ktune::schedule_space {

class ConfigSpace;
class ConfigSet;

// Read access to the entities of one config, by knob name, whether the config is an index of a
// space or a Config read from JSON. What constraint predicates see.
class EntityView {
 public:
  EntityView(const ConfigSpace& space, const std::vector<uint64_t>& knob_indices)
      : space_(&space), knob_indices_(&knob_indices) {}
  explicit EntityView(const Config& config) : config_(&config) {}
  // The entity of knob `name`; throws Error(kInstantiation) when there is no such knob.
  const Entity& operator[](std::string_view name) const;
  // The config's index in its space (a JSON config: the index it was saved with).
  uint64_t index() const;

 private:
  const ConfigSpace* space_ = nullptr;
  const std::vector<uint64_t>* knob_indices_ = nullptr;
  const Config* config_ = nullptr;
};

// A named cross-knob rule, checked on one config at a time (never by walking the space).
struct Constraint {
  std::string name;  // shown when a config is rejected, e.g. "tile fits the register file"
  std::function<bool(const EntityView&)> predicate;  // true = allowed
};

// The cartesian product of knobs. Index = mixed-radix number over the knobs' candidate
// positions, the first-defined knob being the least significant digit (AutoTVM's order), so
// indices stay meaningful when knobs are added at the end. Sizes up to 2^63.
// Build it single-threaded; afterwards all const members are safe to call concurrently.
class ConfigSpace {
 public:
  // Largest space size: beyond, defining a knob throws Error(kInvalidArgument).
  static constexpr uint64_t kMaxSize = uint64_t{1} << 63;

  explicit ConfigSpace(std::string template_name = "") : template_name_(std::move(template_name)) {}

  // Definition (templates call these). Each returns the knob; throws Error(kInvalidArgument)
  // for a duplicate name, bad parameters, or a space that would exceed kMaxSize.
  const Knob& add_knob(std::shared_ptr<const Knob> knob);
  const Knob& define_split(const std::string& name, const SplitParams& params);
  const Knob& define_reorder(const std::string& name, const ReorderParams& params);
  const Knob& define_annotate(const std::string& name, const AnnotateParams& params);
  const Knob& define_knob(const std::string& name, const std::vector<int64_t>& values);
  const Knob& define_knob(const std::string& name, const std::vector<std::string>& values);
  void add_constraint(std::string name, std::function<bool(const EntityView&)> predicate);
  // A knob added to a template after configs were logged: configs that lack knob `name` mean its
  // candidate `value` (the schedule the template built before), so old records stay valid.
  // Throws Error(kInvalidArgument) for an unknown knob or a value it does not have.
  void set_legacy_value(const std::string& name, int64_t value);
  // `config` with the legacy value of every knob it lacks filled in (itself when none is missing).
  Config complete(const Config& config) const;

  const std::string& template_name() const { return template_name_; }
  // Product of knob sizes (1 for a space without knobs).
  uint64_t size() const { return size_; }
  size_t num_knobs() const { return knobs_.size(); }
  std::vector<uint64_t> knob_sizes() const;
  const Knob& knob(size_t i) const { return *knobs_.at(i); }
  // The knob named `name` or nullptr.
  const Knob* find_knob(std::string_view name) const;
  // Position of knob `name` or -1.
  int64_t knob_position(std::string_view name) const;
  const std::vector<Constraint>& constraints() const { return constraints_; }

  // The config at `index`; throws Error(kInvalidArgument) if index >= size(). Valid or not.
  Config get(uint64_t index) const;
  // True when every constraint accepts the config at `index` (false when out of range).
  bool is_valid(uint64_t index) const;
  // Name of the first constraint that rejects `config`, or "" when all accept it.
  // Throws Error(kInstantiation) when the config lacks a knob that a constraint reads.
  std::string rejecting_constraint(const Config& config) const;

  // Digits of `index`, one per knob (knob 0 first); throws Error(kInvalidArgument) if out of range.
  std::vector<uint64_t> knob_indices(uint64_t index) const;
  // Inverse of knob_indices; throws Error(kInvalidArgument) for a wrong length or a digit out of
  // range.
  uint64_t index_of(const std::vector<uint64_t>& knob_indices) const;
  // Index of the config whose entities equal config's (matched by knob name), if the space has it;
  // throws Error(kInvalidArgument) naming the first knob that is missing or has a value this space
  // lacks.
  uint64_t index_of(const Config& config) const;

  // Up to n distinct valid indices, none in `exclude`, uniform over the valid configs.
  // Small spaces (<= kEnumerateLimit) are enumerated (once: the valid indices are kept), so fewer
  // than n means no more exist; the result is the first n of a partial Fisher-Yates shuffle of
  // the valid indices not in `exclude`, ascending; it costs O(n + |exclude| log) per call;
  // larger ones use rejection sampling with a budget of kSampleTriesBase + kSampleTriesPerPick*n
  // draws, so a very sparse valid set may yield fewer than n.
  std::vector<uint64_t> sample(size_t n, std::mt19937_64& rng,
                               const std::unordered_set<uint64_t>& exclude = {}) const;
  // The same draws as sample(n, rng, exclude.indices()), at O(n log size) per call in a small
  // space: for a caller that samples many times while its exclude set grows (a tuner's visited
  // configs).
  std::vector<uint64_t> sample(size_t n, std::mt19937_64& rng, const ConfigSet& exclude) const;
  // A valid config that differs from `index` in one knob, chosen at random; `index` itself when
  // none was found in kNeighbourTries attempts (or every knob has one value). In a small space
  // the kept valid set answers the constraint checks.
  uint64_t neighbour(uint64_t index, std::mt19937_64& rng) const;

  // Knob features of config `index`: each knob's features in knob order (fixed length).
  // Throws Error(kInvalidArgument) if out of range.
  std::vector<float> knob_features(uint64_t index) const;
  size_t knob_feature_length() const { return feature_length_; }

  // Several lines: one per knob ("name: description") and the total size.
  std::string describe() const;

  static constexpr uint64_t kEnumerateLimit = 1u << 16;
  static constexpr size_t kSampleTriesBase = 4096;
  static constexpr size_t kSampleTriesPerPick = 256;
  static constexpr int kNeighbourTries = 64;

 private:
  friend class ConfigSet;
  template <typename Excluded>
  std::vector<uint64_t> sample_rejecting(size_t n, std::mt19937_64& rng,
                                         const Excluded& excluded) const;

  // The valid indices of a space of at most kEnumerateLimit configs, ascending, and the same as
  // a bitmap over the space. Enumerated on first use: a model-based tuner samples and checks
  // neighbours thousands of times per batch, and each enumeration checks every constraint of
  // every config. Shared by copies of the space; replaced when a knob or constraint is added.
  struct ValidSet {
    std::once_flag once;
    std::vector<uint32_t> indices;
    std::vector<bool> valid;
  };
  // The filled valid set, or nullptr for a larger space (or a moved-from one).
  const ValidSet* valid_set() const;
  bool valid_digits(const std::vector<uint64_t>& digits) const;
  void decompose(uint64_t index, std::vector<uint64_t>& digits) const;

  std::string template_name_;
  std::vector<std::shared_ptr<const Knob>> knobs_;
  std::map<std::string, Entity, std::less<>>
      legacy_;  // knob name -> what a config without it means
  // Looked up by string_view without building a string: constraint predicates read knobs by
  // name for every config the search checks (those checks were most of the CPU of a server
  // running xgb jobs on 1000 devices).
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, size_t, NameHash, std::equal_to<>> positions_;
  std::vector<Constraint> constraints_;
  std::shared_ptr<ValidSet> valid_set_ = std::make_shared<ValidSet>();
  std::vector<size_t> movable_;  // knobs with more than one candidate (neighbour's moves)
  uint64_t size_ = 1;
  size_t feature_length_ = 0;
};

// A set of config indices of one space that sample() excludes without re-reading it per draw:
// in a small space the set keeps, per valid index, whether it is excluded, in a Fenwick tree,
// so that the j-th remaining valid index is found in O(log size). The space must outlive it;
// knobs or constraints added to the space after the set was made leave the set correct but
// slow (sample() then reads it like an unordered set).
class ConfigSet {
 public:
  explicit ConfigSet(const ConfigSpace& space);

  // Adds `index` (any value, in the space or not); false when it was already there.
  bool insert(uint64_t index);
  bool contains(uint64_t index) const { return indices_.count(index) != 0; }
  size_t size() const { return indices_.size(); }
  const std::unordered_set<uint64_t>& indices() const { return indices_; }

 private:
  friend class ConfigSpace;
  // Valid indices not in the set; and the position among the valid indices of the j-th of them.
  size_t remaining() const;
  size_t remaining_position(size_t j) const;

  std::unordered_set<uint64_t> indices_;
  // The space's valid set when it was enumerated (nullptr for a large space), and per valid
  // position a Fenwick tree of 1 = not in this set.
  std::shared_ptr<const ConfigSpace::ValidSet> valid_;
  std::vector<uint32_t> tree_;
  size_t excluded_valid_ = 0;
};

}  // namespace ktune::schedule_space
