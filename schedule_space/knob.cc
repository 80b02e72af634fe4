// Knob kinds: candidate enumeration per knob (each small), features and JSON of entities.
#include "schedule_space/knob.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "support/error.h"

namespace ktune::schedule_space {
namespace {

[[noreturn]] void invalid_knob(const std::string& message) {
  throw Error(ErrorKind::kInvalidArgument, message);
}

std::string join(const std::vector<int64_t>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  return os.str();
}

int64_t product_of_inner(const Entity& e) {
  int64_t p = 1;
  for (size_t i = 1; i < e.values.size(); ++i) p *= e.values[i];
  return p;
}

float log2p(double x) { return static_cast<float>(std::log2(x + 1.0)); }

// A split knob's table holds this many tuples at most: it is enumerated when defined.
constexpr size_t kMaxKnobSize = 1u << 20;

}  // namespace

std::string_view to_string(KnobKind kind) {
  switch (kind) {
    case KnobKind::kSplit:
      return "sp";
    case KnobKind::kReorder:
      return "re";
    case KnobKind::kAnnotate:
      return "an";
    case KnobKind::kOther:
      return "ot";
  }
  return "?";
}

KnobKind knob_kind_from_string(std::string_view tag) {
  if (tag == "sp") return KnobKind::kSplit;
  if (tag == "re") return KnobKind::kReorder;
  if (tag == "an") return KnobKind::kAnnotate;
  if (tag == "ot") return KnobKind::kOther;
  invalid_knob("unknown knob kind '" + std::string(tag) + "' (expected sp, re, an or ot)");
}

std::string_view to_string(Annotation a) {
  switch (a) {
    case Annotation::kNone:
      return "none";
    case Annotation::kUnroll:
      return "unroll";
    case Annotation::kVectorize:
      return "vec";
  }
  return "?";
}

Annotation annotation_from_string(std::string_view name) {
  if (name == "none") return Annotation::kNone;
  if (name == "unroll") return Annotation::kUnroll;
  if (name == "vec") return Annotation::kVectorize;
  invalid_knob("unknown annotation '" + std::string(name) + "' (expected none, unroll or vec)");
}

// ---------------------------------------------------------------------------------------------
// Entity

std::vector<int64_t> Entity::split_factors(int64_t extent) const {
  if (kind != KnobKind::kSplit || values.empty())
    throw Error(ErrorKind::kInstantiation, "knob '" + name + "' is not a split");
  std::vector<int64_t> f = values;
  int64_t inner = 1;
  for (size_t i = 1; i < f.size(); ++i) {
    if (f[i] <= 0)
      throw Error(ErrorKind::kInstantiation,
                  "split '" + name + "' has a non-positive factor: [" + join(f) + "]");
    inner *= f[i];
  }
  if (f[0] == -1) {
    f[0] = (extent + inner - 1) / inner;
  } else if (f[0] <= 0) {
    throw Error(ErrorKind::kInstantiation,
                "split '" + name + "' has a non-positive factor: [" + join(f) + "]");
  }
  return f;
}

int64_t Entity::as_int() const {
  if (kind != KnobKind::kOther || is_string || values.size() != 1)
    throw Error(ErrorKind::kInstantiation, "knob '" + name + "' is not an int knob");
  return values[0];
}

const std::string& Entity::as_string() const {
  if (kind != KnobKind::kOther || !is_string)
    throw Error(ErrorKind::kInstantiation, "knob '" + name + "' is not a string knob");
  return str;
}

Annotation Entity::annotation(size_t axis) const {
  if (kind != KnobKind::kAnnotate || axis >= values.size())
    throw Error(ErrorKind::kInstantiation,
                "knob '" + name + "' has no annotation for axis " + std::to_string(axis));
  return static_cast<Annotation>(values[axis]);
}

nlohmann::json Entity::to_json() const {
  nlohmann::json value;
  switch (kind) {
    case KnobKind::kSplit:
    case KnobKind::kReorder:
      value = values;
      break;
    case KnobKind::kAnnotate:
      value = nlohmann::json::array();
      for (int64_t v : values) value.push_back(std::string(to_string(static_cast<Annotation>(v))));
      break;
    case KnobKind::kOther:
      if (is_string)
        value = str;
      else
        value = values.at(0);
      break;
  }
  return nlohmann::json::array({name, std::string(to_string(kind)), value});
}

Entity Entity::from_json(const nlohmann::json& j) {
  if (!j.is_array() || j.size() != 3 || !j[0].is_string() || !j[1].is_string())
    invalid_knob("config entity must be [name, kind, value], got " + j.dump());
  Entity e;
  e.name = j[0].get<std::string>();
  e.kind = knob_kind_from_string(j[1].get<std::string>());
  const auto& v = j[2];
  switch (e.kind) {
    case KnobKind::kSplit:
    case KnobKind::kReorder:
      if (!v.is_array() || v.empty())
        invalid_knob("entity '" + e.name + "' needs a non-empty list of integers");
      for (const auto& x : v) {
        if (!x.is_number_integer())
          invalid_knob("entity '" + e.name + "' has a non-integer value " + x.dump());
        e.values.push_back(x.get<int64_t>());
      }
      break;
    case KnobKind::kAnnotate:
      if (!v.is_array()) invalid_knob("entity '" + e.name + "' needs a list of annotations");
      for (const auto& x : v) {
        if (!x.is_string())
          invalid_knob("entity '" + e.name + "' has a non-string annotation " + x.dump());
        e.values.push_back(static_cast<int64_t>(annotation_from_string(x.get<std::string>())));
      }
      break;
    case KnobKind::kOther:
      if (v.is_string()) {
        e.is_string = true;
        e.str = v.get<std::string>();
      } else if (v.is_number_integer()) {
        e.values.push_back(v.get<int64_t>());
      } else {
        invalid_knob("entity '" + e.name + "' needs an integer or a string, got " + v.dump());
      }
      break;
  }
  return e;
}

// ---------------------------------------------------------------------------------------------
// Knob

Knob::Knob(std::string name, KnobKind kind, std::vector<Entity> entities, size_t feature_length)
    : name_(std::move(name)),
      kind_(kind),
      entities_(std::move(entities)),
      feature_length_(feature_length) {
  if (entities_.empty()) invalid_knob("knob '" + name_ + "' has no candidates");
  for (auto& e : entities_) {
    e.name = name_;
    e.kind = kind_;
  }
}

int64_t Knob::find(const Entity& e) const {
  for (size_t i = 0; i < entities_.size(); ++i)
    if (entities_[i].values == e.values && entities_[i].str == e.str &&
        entities_[i].is_string == e.is_string)
      return static_cast<int64_t>(i);
  return -1;
}

// ---------------------------------------------------------------------------------------------
// Split

namespace {

// Divisors of n up to cap, ascending; in pairs up to sqrt(n), so 2^62 takes microseconds.
std::vector<int64_t> divisors_at_most(int64_t n, int64_t cap) {
  std::vector<int64_t> out;
  for (int64_t f = 1; f <= n / f; ++f) {
    if (n % f != 0) continue;
    if (f <= cap) out.push_back(f);
    const int64_t g = n / f;
    if (g != f && g <= cap) out.push_back(g);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// 1, 2, 4, ... up to cap.
std::vector<int64_t> powers_of_two_at_most(int64_t cap) {
  std::vector<int64_t> out;
  for (int64_t f = 1; f <= cap; f *= 2) {
    out.push_back(f);
    if (f > cap / 2) break;  // the next doubling would pass cap (or overflow)
  }
  return out;
}

std::vector<Entity> split_entities(const std::string& name, const SplitParams& p) {
  if (p.extent <= 0)
    invalid_knob("split '" + name + "': extent must be positive, got " + std::to_string(p.extent));
  if (p.num_outputs < 2) invalid_knob("split '" + name + "': num_outputs must be >= 2");
  if (p.max_factor < 0) invalid_knob("split '" + name + "': max_factor must be >= 0");
  if (p.max_innermost < 0) invalid_knob("split '" + name + "': max_innermost must be >= 0");
  if (p.innermost_multiple <= 0)
    invalid_knob("split '" + name + "': innermost_multiple must be positive");
  const int inner_count = p.num_outputs - 1;
  std::vector<Entity> out;
  if (p.policy == SplitPolicy::kCandidates) {
    for (const auto& c : p.candidates) {
      if (static_cast<int>(c.size()) != inner_count)
        invalid_knob("split '" + name + "': candidate [" + join(c) + "] needs " +
                     std::to_string(inner_count) + " factors");
      int64_t prod = 1;
      for (int64_t f : c) {
        if (f <= 0)
          invalid_knob("split '" + name + "': candidate [" + join(c) +
                       "] has a non-positive factor");
        prod *= f;
      }
      if (!p.allow_tail && p.extent % prod != 0) continue;
      if (prod > p.extent) continue;
      Entity e;
      e.values.push_back(-1);
      e.values.insert(e.values.end(), c.begin(), c.end());
      out.push_back(std::move(e));
    }
    if (out.empty())
      invalid_knob("split '" + name + "': no candidate fits extent " + std::to_string(p.extent));
    return out;
  }
  const int64_t max_factor = p.max_factor == 0 ? p.extent : std::min(p.max_factor, p.extent);
  const int64_t multiple = std::min(p.innermost_multiple, p.extent);
  std::vector<int64_t> pool;
  bool allow_tail = p.allow_tail;
  if (p.policy == SplitPolicy::kFactors) {
    pool = divisors_at_most(p.extent, max_factor);
    if (!allow_tail && p.tail_when_few_divisors) {
      const std::vector<int64_t> pow2 = powers_of_two_at_most(max_factor);
      const int64_t top = p.max_innermost > 0 ? std::min(p.max_innermost, max_factor) : max_factor;
      auto eligible = [&](const std::vector<int64_t>& v) {
        return std::count_if(v.begin(), v.end(),
                             [&](int64_t f) { return f <= top && f % multiple == 0; });
      };
      if (eligible(pool) < eligible(pow2)) {
        pool.insert(pool.end(), pow2.begin(), pow2.end());
        std::sort(pool.begin(), pool.end());
        pool.erase(std::unique(pool.begin(), pool.end()), pool.end());
        allow_tail = true;
      }
    }
  } else {
    pool = powers_of_two_at_most(max_factor);
  }
  std::vector<int64_t> chosen;
  // Depth-first over tuples; the remaining length shrinks, so the walk is small.
  auto walk = [&](auto&& self, int64_t prod) -> void {
    if (static_cast<int>(chosen.size()) == inner_count) {
      if (chosen.back() % multiple != 0) return;
      if (p.max_innermost > 0 && chosen.back() > p.max_innermost) return;
      Entity e;
      e.values.push_back(-1);
      e.values.insert(e.values.end(), chosen.begin(), chosen.end());
      out.push_back(std::move(e));
      if (out.size() > kMaxKnobSize)
        invalid_knob("split '" + name + "' has too many candidates; set max_factor");
      return;
    }
    for (int64_t f : pool) {
      if (f > p.extent / prod) break;  // prod * f would pass the extent (or overflow)
      const int64_t next = prod * f;
      if (!allow_tail && p.extent % next != 0) continue;
      chosen.push_back(f);
      self(self, next);
      chosen.pop_back();
    }
  };
  walk(walk, 1);
  if (out.empty())
    invalid_knob("split '" + name + "': no factors of extent " + std::to_string(p.extent) +
                 " satisfy the policy");
  return out;
}

}  // namespace

SplitKnob::SplitKnob(std::string name, const SplitParams& params)
    : Knob(name, KnobKind::kSplit, split_entities(name, params),
           static_cast<size_t>(params.num_outputs)),
      params_(params) {}

void SplitKnob::append_features(uint64_t i, std::vector<float>& out) const {
  const auto f = entities_[i].split_factors(params_.extent);
  for (int64_t x : f) out.push_back(log2p(static_cast<double>(x)));
}

std::string SplitKnob::describe() const {
  static const char* kPolicy[] = {"factors", "power2", "candidates"};
  std::ostringstream os;
  os << "split extent=" << params_.extent << " outputs=" << params_.num_outputs
     << " policy=" << kPolicy[static_cast<int>(params_.policy)];
  if (params_.max_factor) os << " max_factor=" << params_.max_factor;
  if (params_.max_innermost) os << " max_innermost=" << params_.max_innermost;
  if (params_.innermost_multiple > 1) os << " innermost_multiple=" << params_.innermost_multiple;
  // Whether tuples leave tails: asked for, or taken because the extent has too few divisors.
  bool tail = params_.allow_tail;
  for (const auto& e : entities_) tail = tail || params_.extent % product_of_inner(e) != 0;
  os << (tail ? (params_.allow_tail ? " tail" : " tail(+power2)") : " no_tail")
     << " size=" << size();
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// Reorder

namespace {

std::vector<Entity> reorder_entities(const std::string& name, const ReorderParams& p) {
  if (p.num_axes < 1) invalid_knob("reorder '" + name + "': needs at least one axis");
  std::vector<Entity> out;
  if (p.candidates.empty()) {
    if (p.num_axes > 8)
      invalid_knob("reorder '" + name + "': all permutations of more than 8 axes; give candidates");
    std::vector<int64_t> perm(static_cast<size_t>(p.num_axes));
    std::iota(perm.begin(), perm.end(), 0);
    do {
      Entity e;
      e.values = perm;
      out.push_back(std::move(e));
    } while (std::next_permutation(perm.begin(), perm.end()));
    return out;
  }
  for (const auto& c : p.candidates) {
    std::vector<int64_t> sorted = c;
    std::sort(sorted.begin(), sorted.end());
    bool ok = static_cast<int>(c.size()) == p.num_axes;
    for (size_t i = 0; ok && i < sorted.size(); ++i) ok = sorted[i] == static_cast<int64_t>(i);
    if (!ok)
      invalid_knob("reorder '" + name + "': [" + join(c) + "] is not a permutation of " +
                   std::to_string(p.num_axes) + " axes");
    Entity e;
    e.values = c;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

ReorderKnob::ReorderKnob(std::string name, const ReorderParams& params)
    : Knob(name, KnobKind::kReorder, reorder_entities(name, params),
           static_cast<size_t>(params.num_axes)),
      params_(params) {}

void ReorderKnob::append_features(uint64_t i, std::vector<float>& out) const {
  for (int64_t v : entities_[i].values) out.push_back(static_cast<float>(v));
}

std::string ReorderKnob::describe() const {
  std::ostringstream os;
  os << "reorder axes=" << params_.num_axes
     << (params_.candidates.empty() ? " policy=all" : " policy=candidates") << " size=" << size();
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// Annotate

namespace {

std::vector<Entity> annotate_entities(const std::string& name, const AnnotateParams& p) {
  const size_t n = p.extents.size();
  if (n == 0) invalid_knob("annotate '" + name + "': needs at least one axis");
  if (n > 12) invalid_knob("annotate '" + name + "': at most 12 axes");
  std::vector<std::vector<int64_t>> options(n);
  for (size_t a = 0; a < n; ++a) {
    const int64_t ext = p.extents[a];
    options[a].push_back(static_cast<int64_t>(Annotation::kNone));
    if (p.allow_unroll && (p.max_unroll == 0 || ext == 0 || ext <= p.max_unroll))
      options[a].push_back(static_cast<int64_t>(Annotation::kUnroll));
    if (p.allow_vectorize && (!p.vectorize_innermost_only || a + 1 == n) &&
        (ext == 0 || ext <= p.max_vector_lanes))
      options[a].push_back(static_cast<int64_t>(Annotation::kVectorize));
  }
  std::vector<Entity> out;
  std::vector<int64_t> cur;
  auto walk = [&](auto&& self, size_t a, bool has_vec) -> void {
    if (a == n) {
      Entity e;
      e.values = cur;
      out.push_back(std::move(e));
      return;
    }
    for (int64_t o : options[a]) {
      const bool vec = o == static_cast<int64_t>(Annotation::kVectorize);
      if (vec && has_vec) continue;
      cur.push_back(o);
      self(self, a + 1, has_vec || vec);
      cur.pop_back();
    }
  };
  walk(walk, 0, false);
  return out;
}

}  // namespace

AnnotateKnob::AnnotateKnob(std::string name, const AnnotateParams& params)
    : Knob(name, KnobKind::kAnnotate, annotate_entities(name, params), 2 * params.extents.size()),
      params_(params) {}

void AnnotateKnob::append_features(uint64_t i, std::vector<float>& out) const {
  for (int64_t v : entities_[i].values) {
    out.push_back(v == static_cast<int64_t>(Annotation::kUnroll) ? 1.f : 0.f);
    out.push_back(v == static_cast<int64_t>(Annotation::kVectorize) ? 1.f : 0.f);
  }
}

std::string AnnotateKnob::describe() const {
  std::ostringstream os;
  os << "annotate axes=" << params_.extents.size() << " extents=[" << join(params_.extents) << "]"
     << " max_unroll=" << params_.max_unroll << " size=" << size();
  return os.str();
}

// ---------------------------------------------------------------------------------------------
// Other

namespace {

std::vector<Entity> int_entities(const std::string& name, const std::vector<int64_t>& values) {
  if (values.empty()) invalid_knob("knob '" + name + "' has no values");
  std::vector<Entity> out;
  for (int64_t v : values) {
    Entity e;
    e.values = {v};
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<Entity> string_entities(const std::string& name,
                                    const std::vector<std::string>& values) {
  if (values.empty()) invalid_knob("knob '" + name + "' has no values");
  std::vector<Entity> out;
  for (const auto& v : values) {
    Entity e;
    e.is_string = true;
    e.str = v;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

OtherKnob::OtherKnob(std::string name, const std::vector<int64_t>& values)
    : Knob(name, KnobKind::kOther, int_entities(name, values), 1) {}

OtherKnob::OtherKnob(std::string name, const std::vector<std::string>& values)
    : Knob(name, KnobKind::kOther, string_entities(name, values), 1) {}

void OtherKnob::append_features(uint64_t i, std::vector<float>& out) const {
  const Entity& e = entities_[i];
  // Strings have no order of their own: their position stands in.
  out.push_back(e.is_string ? static_cast<float>(i) : static_cast<float>(e.values[0]));
}

std::string OtherKnob::describe() const {
  std::ostringstream os;
  os << "other values=[";
  for (size_t i = 0; i < entities_.size(); ++i)
    os << (i ? "," : "")
       << (entities_[i].is_string ? entities_[i].str : std::to_string(entities_[i].values[0]));
  os << "] size=" << size();
  return os.str();
}

}  // namespace ktune::schedule_space
