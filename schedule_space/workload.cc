// Workload arguments: validation against a template's specs and the canonical workload key.
#include "schedule_space/workload.h"

#include <algorithm>
#include <charconv>
#include <iterator>

#include "support/error.h"

namespace ktune::schedule_space {
namespace {

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorKind::kInvalidArgument, message);
}

// The value of option `-name=` in a target string ("" when absent).
std::string target_option(const std::string& key, const std::string& name) {
  const std::string tag = " -" + name + "=";
  const size_t at = key.find(tag);
  if (at == std::string::npos) return "";
  const size_t from = at + tag.size();
  return key.substr(from, key.find(' ', from) - from);
}

// Whether an x86-64 target string has the AVX-512 extension `feature`: its -mcpu is one of
// `cpus` (those whose LLVM 19 defaults include it; Target::str() lists only the attributes that
// differ from the CPU's defaults), or -mattr adds it, and -mattr removes neither it nor avx512f.
template <size_t N>
bool has_avx512_feature(const std::string& key, const std::string& arch, const std::string& feature,
                        const char* const (&cpus)[N]) {
  if (arch != "x86_64") return false;
  const std::string cpu = target_option(key, "mcpu");
  bool on = std::any_of(std::begin(cpus), std::end(cpus), [&](const char* c) { return cpu == c; });
  const std::string attrs = "," + target_option(key, "mattr") + ",";
  if (attrs.find(",+" + feature + ",") != std::string::npos) on = true;
  if (attrs.find(",-" + feature + ",") != std::string::npos ||
      attrs.find(",-avx512f,") != std::string::npos)
    on = false;
  return on;
}

const char* const kVnniCpus[] = {
    "cascadelake",   "cooperlake",     "icelake-client", "icelake-server", "tigerlake",
    "rocketlake",    "sapphirerapids", "emeraldrapids",  "graniterapids",  "graniterapids-d",
    "diamondrapids", "znver4",         "znver5"};
const char* const kBf16Cpus[] = {"cooperlake",    "sapphirerapids",  "emeraldrapids",
                                 "graniterapids", "graniterapids-d", "diamondrapids",
                                 "znver4",        "znver5"};

}  // namespace

TargetTraits make_target_traits(const std::string& key, const std::string& triple, int vector_bits,
                                int cores) {
  if (vector_bits <= 0 || cores <= 0)
    invalid("target '" + key + "': vector_bits and cores must be positive");
  TargetTraits t;
  t.key = key;
  t.vector_bits = vector_bits;
  t.cores = cores;
  t.arch = triple.substr(0, triple.find('-'));
  if (t.arch == "arm64") t.arch = "aarch64";
  t.int8_dot = has_avx512_feature(key, t.arch, "avx512vnni", kVnniCpus);
  t.bf16_dot = has_avx512_feature(key, t.arch, "avx512bf16", kBf16Cpus);
  return t;
}

WorkloadArgs::WorkloadArgs(const std::string& template_name, const std::vector<ArgSpec>& specs,
                           const std::map<std::string, std::string>& given) {
  for (const auto& [name, value] : given) {
    const bool known =
        std::any_of(specs.begin(), specs.end(), [&](const ArgSpec& s) { return s.name == name; });
    if (!known) {
      std::string names;
      for (const auto& s : specs) names += (names.empty() ? "" : ", ") + s.name;
      invalid(template_name + ": unknown argument '" + name + "' (arguments: " + names + ")");
    }
  }
  for (const auto& spec : specs) {
    auto it = given.find(spec.name);
    std::string text = it != given.end() ? it->second : spec.default_value;
    if (text.empty())
      invalid(template_name + ": missing argument '" + spec.name + "' (" + spec.doc + ")");
    if (spec.type == ArgSpec::Type::kInt) {
      int64_t v = 0;
      const char* end = text.data() + text.size();
      auto [ptr, ec] = std::from_chars(text.data(), end, v);
      if (ec != std::errc() || ptr != end)
        invalid(template_name + ": argument " + spec.name + "=" + text + " is not an integer");
      if (v < spec.min_value)
        invalid(template_name + ": argument " + spec.name + "=" + text +
                " must be >= " + std::to_string(spec.min_value));
      if (v > spec.max_value)
        invalid(template_name + ": argument " + spec.name + "=" + text +
                " must be <= " + std::to_string(spec.max_value));
      text = std::to_string(v);
    } else if (!spec.choices.empty() &&
               std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end()) {
      std::string choices;
      for (const auto& c : spec.choices) choices += (choices.empty() ? "" : ", ") + c;
      invalid(template_name + ": argument " + spec.name + "=" + text + " is not one of " + choices);
    }
    values_.emplace_back(spec.name, text);
    is_int_.push_back(spec.type == ArgSpec::Type::kInt);
    omitted_.push_back(spec.key_omits_default && text == spec.default_value);
    omitted_default_.push_back(
        spec.key_omits_default ? std::optional<std::string>(spec.default_value) : std::nullopt);
  }
}

const std::string& WorkloadArgs::get(const std::string& name) const {
  for (const auto& [k, v] : values_)
    if (k == name) return v;
  invalid("workload has no argument '" + name + "'");
}

int64_t WorkloadArgs::get_int(const std::string& name) const {
  for (size_t i = 0; i < values_.size(); ++i)
    if (values_[i].first == name) {
      if (!is_int_[i]) invalid("workload argument '" + name + "' is not an integer");
      return std::stoll(values_[i].second);
    }
  invalid("workload has no argument '" + name + "'");
}

void WorkloadArgs::set_int(const std::string& name, int64_t value) {
  for (size_t i = 0; i < values_.size(); ++i)
    if (values_[i].first == name) {
      if (!is_int_[i]) invalid("workload argument '" + name + "' is not an integer");
      values_[i].second = std::to_string(value);
      return;
    }
  invalid("workload has no argument '" + name + "'");
}

void WorkloadArgs::set_string(const std::string& name, const std::string& value) {
  for (size_t i = 0; i < values_.size(); ++i)
    if (values_[i].first == name) {
      if (is_int_[i]) invalid("workload argument '" + name + "' is an integer");
      values_[i].second = value;
      omitted_[i] = omitted_default_[i] && *omitted_default_[i] == value;
      return;
    }
  invalid("workload has no argument '" + name + "'");
}

std::map<std::string, std::string> WorkloadArgs::to_map() const {
  return {values_.begin(), values_.end()};
}

nlohmann::json WorkloadArgs::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < values_.size(); ++i) {
    if (omitted_[i]) continue;  // as in the key
    if (is_int_[i])
      j[values_[i].first] = std::stoll(values_[i].second);
    else
      j[values_[i].first] = values_[i].second;
  }
  return j;
}

std::string WorkloadArgs::key(const std::string& template_name) const {
  std::string out = template_name + "(";
  bool first = true;
  for (size_t i = 0; i < values_.size(); ++i) {
    if (omitted_[i]) continue;
    out += (first ? "" : ",") + values_[i].first + "=" + values_[i].second;
    first = false;
  }
  return out + ")";
}

std::map<std::string, std::string> split_key_values(const std::vector<std::string>& words) {
  std::map<std::string, std::string> out;
  for (const auto& w : words) {
    const auto eq = w.find('=');
    if (eq == std::string::npos || eq == 0)
      invalid("argument '" + w + "' is not of the form key=value");
    const std::string key = w.substr(0, eq);
    if (!out.emplace(key, w.substr(eq + 1)).second) invalid("argument '" + key + "' given twice");
  }
  return out;
}

}  // namespace ktune::schedule_space
