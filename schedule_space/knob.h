// Defines the knobs of a config space (split, reorder, annotate, other) and the Entity, the value
// one knob takes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ktune::schedule_space {

// The four knob kinds of AutoTVM; their JSON tags are "sp", "re", "an", "ot".
enum class KnobKind { kSplit, kReorder, kAnnotate, kOther };

// JSON tag of a kind ("sp", ...).
std::string_view to_string(KnobKind kind);
// Inverse of to_string; throws Error(kInvalidArgument) for an unknown tag.
KnobKind knob_kind_from_string(std::string_view tag);

// What an annotate knob does to one axis.
enum class Annotation : int64_t { kNone = 0, kUnroll = 1, kVectorize = 2 };
std::string_view to_string(Annotation a);  // "none", "unroll", "vec"
// Throws Error(kInvalidArgument) for an unknown name.
Annotation annotation_from_string(std::string_view name);

// The value of one knob in one config. Self-contained: a template rebuilds its schedule from
// entities alone, without the space they came from.
//   split:    values = factors, outermost first; values[0] == -1 means "what remains"
//             (ceil(extent / product of the others)), as in AutoTVM's records.
//   reorder:  values = a permutation of 0..n-1 (new position i holds old axis values[i]).
//   annotate: values = one Annotation per axis (as int64).
//   other:    values = {v} for an int knob; str holds the value of a string knob.
struct Entity {
  std::string name;
  KnobKind kind = KnobKind::kOther;
  std::vector<int64_t> values;
  std::string str;
  bool is_string = false;  // other knobs only: str is the value

  // The split factors with the remainder resolved against `extent` (ceil division).
  // Throws Error(kInstantiation) when this is not a split or a factor is not positive.
  std::vector<int64_t> split_factors(int64_t extent) const;
  // The int value of an int "other" knob; throws Error(kInstantiation) otherwise.
  int64_t as_int() const;
  // The string value of a string "other" knob; throws Error(kInstantiation) otherwise.
  const std::string& as_string() const;
  // The annotation of axis i; throws Error(kInstantiation) when not an annotate entity or out of
  // range.
  Annotation annotation(size_t axis) const;

  // [name, tag, value] as in AutoTVM's "entity" list.
  nlohmann::json to_json() const;
  // Inverse of to_json; throws Error(kInvalidArgument) with the reason on malformed input.
  static Entity from_json(const nlohmann::json& j);

  bool operator==(const Entity&) const = default;
};

// One dimension of a config space: a finite, ordered list of entities. Knobs enumerate their
// (small) candidate lists when defined; only the product of knobs is never enumerated.
// Immutable after construction, so safe to share between threads.
class Knob {
 public:
  Knob(std::string name, KnobKind kind, std::vector<Entity> entities, size_t feature_length);
  virtual ~Knob() = default;

  const std::string& name() const { return name_; }
  KnobKind kind() const { return kind_; }
  uint64_t size() const { return entities_.size(); }
  // The i-th candidate; i < size() is the caller's duty (ConfigSpace checks).
  const Entity& entity(uint64_t i) const { return entities_[i]; }
  const std::vector<Entity>& entities() const { return entities_; }
  // Position of an entity equal to e in this knob, or -1.
  int64_t find(const Entity& e) const;
  // Numeric features of candidate i, appended to out; always feature_length() values.
  virtual void append_features(uint64_t i, std::vector<float>& out) const = 0;
  size_t feature_length() const { return feature_length_; }
  // A one-line human description (kind, parameters, size).
  virtual std::string describe() const = 0;

 protected:
  std::string name_;
  KnobKind kind_;
  std::vector<Entity> entities_;
  size_t feature_length_;
};

// How a split knob chooses its factors.
enum class SplitPolicy {
  kFactors,     // every inner factor divides the extent
  kPowerOfTwo,  // inner factors are powers of two (1, 2, 4, ...)
  kCandidates,  // exactly the listed inner-factor tuples
};

struct SplitParams {
  int64_t extent = 1;   // length of the axis being split, > 0
  int num_outputs = 2;  // number of resulting axes, >= 2
  SplitPolicy policy = SplitPolicy::kFactors;
  int64_t max_factor = 0;   // largest inner factor allowed; 0 = extent
  bool allow_tail = false;  // false: the product of inner factors divides the extent
  // kCandidates only: tuples of num_outputs - 1 inner factors (outermost first).
  std::vector<std::vector<int64_t>> candidates = {};
  // The innermost factor is a multiple of min(innermost_multiple, extent), e.g. of the
  // vector lanes, so that vectorized tiles are whole vectors. Not for kCandidates.
  int64_t innermost_multiple = 1;
  // Largest innermost factor (a register tile, an unrolled loop); 0 = no limit beyond max_factor.
  int64_t max_innermost = 0;
  // kFactors without allow_tail only: when the extent has fewer divisors eligible as the
  // innermost factor than there are powers of two in the same range (a prime, 1000 with whole
  // 16-lane vectors, 77, ...), the powers of two join the pool and tuples may leave a tail (the
  // lowering guards or peels it). Extents with many divisors (powers of two among them) keep
  // exactly their dividing tuples.
  bool tail_when_few_divisors = true;
};

// Throws Error(kInvalidArgument) for bad parameters or an empty candidate list.
class SplitKnob : public Knob {
 public:
  SplitKnob(std::string name, const SplitParams& params);
  void append_features(uint64_t i, std::vector<float>& out) const override;
  std::string describe() const override;
  const SplitParams& params() const { return params_; }

 private:
  SplitParams params_;
};

struct ReorderParams {
  int num_axes = 2;  // permutations of 0..num_axes-1; "all" needs num_axes <= 8
  // Empty: all permutations. Otherwise exactly these permutations.
  std::vector<std::vector<int64_t>> candidates = {};
};

// Throws Error(kInvalidArgument) when a candidate is not a permutation or the space is too big.
class ReorderKnob : public Knob {
 public:
  ReorderKnob(std::string name, const ReorderParams& params);
  void append_features(uint64_t i, std::vector<float>& out) const override;
  std::string describe() const override;

 private:
  ReorderParams params_;
};

struct AnnotateParams {
  // Extent of each annotated axis (known when defined); 0 = unknown (no length check).
  std::vector<int64_t> extents = {};
  bool allow_unroll = true;
  bool allow_vectorize = true;
  int64_t max_unroll = 16;        // an axis longer than this is never unrolled (0 = no limit)
  int64_t max_vector_lanes = 64;  // an axis longer than this is never vectorized
  bool vectorize_innermost_only = true;  // vectorize only the last axis (te's rule)
};

// Per axis none / unroll / vectorize, at most one vectorized axis.
class AnnotateKnob : public Knob {
 public:
  AnnotateKnob(std::string name, const AnnotateParams& params);
  void append_features(uint64_t i, std::vector<float>& out) const override;
  std::string describe() const override;

 private:
  AnnotateParams params_;
};

// A list of ints or of strings (AutoTVM's define_knob). Throws Error(kInvalidArgument) when empty.
class OtherKnob : public Knob {
 public:
  OtherKnob(std::string name, const std::vector<int64_t>& values);
  OtherKnob(std::string name, const std::vector<std::string>& values);
  void append_features(uint64_t i, std::vector<float>& out) const override;
  std::string describe() const override;
};

}  // namespace ktune::schedule_space
