// Prometheus' text exposition format, read line by line.
#include "rpc_runner/protocol/metrics_text.h"

#include <cctype>
#include <cstdlib>

#include "support/error.h"

namespace ktune::rpc_runner {
namespace {

// Reads one sample line; throws with `why` when it does not read.
MetricSample parse_sample(std::string_view line) {
  auto fail = [&](const std::string& why) {
    return Error(ErrorKind::kInvalidArgument,
                 "cannot read the metrics line '" + std::string(line) + "': " + why);
  };
  MetricSample s;
  size_t at = 0;
  while (at < line.size() &&
         (std::isalnum(static_cast<unsigned char>(line[at])) || line[at] == '_' || line[at] == ':'))
    ++at;
  if (at == 0) throw fail("no metric name");
  s.name = std::string(line.substr(0, at));
  if (at < line.size() && line[at] == '{') {
    ++at;
    for (;;) {
      while (at < line.size() && (line[at] == ' ' || line[at] == ',')) ++at;
      if (at < line.size() && line[at] == '}') {
        ++at;
        break;
      }
      const size_t eq = line.find('=', at);
      if (eq == std::string_view::npos || eq + 1 >= line.size() || line[eq + 1] != '"')
        throw fail("a label is not name=\"value\"");
      const std::string name(line.substr(at, eq - at));
      std::string value;
      at = eq + 2;
      for (; at < line.size() && line[at] != '"'; ++at) {
        if (line[at] != '\\') {
          value += line[at];
          continue;
        }
        if (++at == line.size()) break;
        value += line[at] == 'n' ? '\n' : line[at];  // \\ and \" stand for themselves
      }
      if (at == line.size()) throw fail("an unterminated label value");
      ++at;  // the closing quote
      s.labels[name] = std::move(value);
    }
  }
  while (at < line.size() && line[at] == ' ') ++at;
  const std::string rest(line.substr(at));
  if (rest.empty()) throw fail("no value");
  const std::string value = rest.substr(0, rest.find(' '));
  char* end = nullptr;
  s.value = std::strtod(value.c_str(), &end);  // reads NaN, +Inf and -Inf too
  if (end != value.c_str() + value.size()) throw fail("the value '" + value + "' is not a number");
  return s;
}

}  // namespace

std::vector<MetricSample> parse_metrics_text(std::string_view text) {
  std::vector<MetricSample> out;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    out.push_back(parse_sample(line));
  }
  return out;
}

double metric_sum(const std::vector<MetricSample>& samples, std::string_view name,
                  const std::map<std::string, std::string>& match) {
  double sum = 0;
  for (const MetricSample& s : samples) {
    if (s.name != name) continue;
    bool all = true;
    for (const auto& [k, v] : match) {
      auto it = s.labels.find(k);
      all = all && it != s.labels.end() && it->second == v;
    }
    if (all) sum += s.value;
  }
  return sum;
}

}  // namespace ktune::rpc_runner
