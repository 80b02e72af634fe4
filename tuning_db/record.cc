// Record: mean cost, GFLOP/s and the JSON-lines form.
#include "tuning_db/record.h"

#include "support/json_input.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace ktune::tuning_db {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& what) {
  throw Error(ErrorKind::kInvalidArgument, "bad record: " + what);
}

const json& field(const json& object, const char* name, const char* where) {
  auto it = object.find(name);
  if (it == object.end()) bad(std::string("missing \"") + name + "\" in " + where);
  return *it;
}

std::string string_of(const json& value, const std::string& what) {
  if (!value.is_string()) bad(what + " must be a string");
  return value.get<std::string>();
}

double number_of(const json& value, const std::string& what) {
  if (!value.is_number()) bad(what + " must be a number");
  double x = value.get<double>();
  if (!std::isfinite(x)) bad(what + " must be finite");
  return x;
}

bool bool_of(const json& value, const std::string& what) {
  if (!value.is_boolean()) bad(what + " must be true or false");
  return value.get<bool>();
}

int64_t integer_of(const json& value, const std::string& what) {
  if (!value.is_number_integer()) bad(what + " must be an integer");
  return value.get<int64_t>();
}

}  // namespace

double spread(const std::vector<double>& timings) {
  if (timings.size() < 2) return 0;
  const auto [lo, hi] = std::minmax_element(timings.begin(), timings.end());
  const double mid = median(timings);
  return mid > 0 ? (*hi - *lo) / mid : 0;
}

double median(std::vector<double> timings) {
  if (timings.empty()) return std::numeric_limits<double>::infinity();
  std::sort(timings.begin(), timings.end());
  const size_t n = timings.size();
  return n % 2 == 1 ? timings[n / 2] : (timings[n / 2 - 1] + timings[n / 2]) / 2;
}

double Record::mean_cost() const {
  if (costs.empty()) return std::numeric_limits<double>::infinity();
  return std::accumulate(costs.begin(), costs.end(), 0.0) / static_cast<double>(costs.size());
}

double Record::cost() const {
  if (!ok()) return std::numeric_limits<double>::infinity();
  return retimed_costs.empty() ? mean_cost() : median(retimed_costs);
}

bool Record::noisy() const {
  return ok() && spread(retimed_costs.empty() ? costs : retimed_costs) > kNoisySpread;
}

double Record::gflops() const {
  const double figure = cost();
  if (!ok() || flop <= 0 || !(figure > 0) || !std::isfinite(figure)) return 0;
  return flop / figure / 1e9;
}

json to_json(const Record& r) {
  json meta = {{"template", r.template_name},
               {"llvm", r.target.llvm_version},
               {"device", r.device_key},
               {"flop", r.flop},
               {"error_msg", r.error_message},
               {"tuner", r.tuner},
               {"batch", r.batch},
               {"ktune", r.ktune_version}};
  if (r.emulated) meta["emulated"] = true;
  if (!r.client.empty()) meta["client"] = r.client;
  if (!r.worker.empty()) meta["worker"] = r.worker;
  if (!r.retimed_costs.empty()) meta["retimed"] = r.retimed_costs;
  if (r.noisy()) meta["noisy"] = true;
  if (r.disputed) meta["disputed"] = true;
  std::string error = r.error ? std::string(to_string(*r.error)) : std::string();
  return json{{"input", json::array({r.target.target, r.workload_key, r.args})},
              {"config", r.config},
              {"result", json::array({r.costs, error, r.all_cost, r.timestamp})},
              {"version", r.emulated ? 2 : 1},
              {"meta", meta}};
}

std::string to_json_line(const Record& record) { return to_json(record).dump(); }

nlohmann::json to_report_json(const Record& r) {
  nlohmann::json j = to_json(r);
  // A record served over the wire carries no id: the server's log numbers it, not this one.
  if (r.id > 0) j["id"] = r.id;
  j["mean_cost_s"] = r.cost();
  j["gflops"] = r.gflops();
  j["emulated"] = r.emulated;
  j["retimed"] = !r.retimed_costs.empty();
  j["noisy"] = r.noisy();
  j["disputed"] = r.disputed;
  return j;
}

Record from_json(const json& line) {
  if (!line.is_object()) bad("a record line must be a JSON object");
  Record r;
  int64_t version = integer_of(field(line, "version", "record"), "\"version\"");
  if (version < 1 || version > kRecordLineVersion) {
    bad("unsupported record version " + std::to_string(version));
  }

  const json& input = field(line, "input", "record");
  if (!input.is_array() || input.size() != 3) bad("\"input\" must be [target, workload, args]");
  r.target.target = string_of(input[0], "input[0] (target)");
  r.workload_key = string_of(input[1], "input[1] (workload)");
  if (r.target.target.empty() || r.workload_key.empty()) bad("empty target or workload");
  if (!input[2].is_object() && !input[2].is_array()) bad("input[2] (args) must be an object");
  r.args = input[2];

  r.config = field(line, "config", "record");
  if (!r.config.is_object()) bad("\"config\" must be an object");
  r.config_index = integer_of(field(r.config, "index", "config"), "config.index");
  if (!field(r.config, "entity", "config").is_array()) bad("config.entity must be an array");

  const json& result = field(line, "result", "record");
  if (!result.is_array() || result.size() != 4) {
    bad("\"result\" must be [costs, error, all_cost, timestamp]");
  }
  if (!result[0].is_array()) bad("result[0] (costs) must be an array");
  for (const json& c : result[0]) {
    double cost = number_of(c, "a cost");
    if (cost < 0) bad("a cost must not be negative");
    r.costs.push_back(cost);
  }
  std::string error = string_of(result[1], "result[1] (error)");
  if (!error.empty()) {
    try {
      r.error = error_kind_from_string(error);
    } catch (const Error&) {
      bad("unknown error kind \"" + error + "\"");
    }
  }
  if (r.ok() && r.costs.empty()) bad("a successful record needs at least one cost");
  r.all_cost = number_of(result[2], "result[2] (all_cost)");
  r.timestamp = number_of(result[3], "result[3] (timestamp)");

  const json& meta = field(line, "meta", "record");
  if (!meta.is_object()) bad("\"meta\" must be an object");
  r.template_name = string_of(field(meta, "template", "meta"), "meta.template");
  if (r.template_name.empty()) bad("empty meta.template");
  r.target.llvm_version = string_of(meta.value("llvm", json("")), "meta.llvm");
  r.device_key = string_of(meta.value("device", json("")), "meta.device");
  r.flop = number_of(meta.value("flop", json(0.0)), "meta.flop");
  r.error_message = string_of(meta.value("error_msg", json("")), "meta.error_msg");
  r.tuner = string_of(meta.value("tuner", json("")), "meta.tuner");
  r.batch = integer_of(meta.value("batch", json(0)), "meta.batch");
  r.ktune_version = string_of(meta.value("ktune", json("")), "meta.ktune");
  r.emulated = bool_of(meta.value("emulated", json(false)), "meta.emulated");
  r.client = string_of(meta.value("client", json("")), "meta.client");
  r.worker = string_of(meta.value("worker", json("")), "meta.worker");
  if (auto it = meta.find("retimed"); it != meta.end()) {
    if (!it->is_array()) bad("meta.retimed must be an array");
    for (const json& c : *it) {
      const double cost = number_of(c, "a re-timed cost");
      if (cost < 0) bad("a re-timed cost must not be negative");
      r.retimed_costs.push_back(cost);
    }
    if (!r.ok() && !r.retimed_costs.empty()) bad("a failed record cannot be re-timed");
  }
  r.disputed = bool_of(meta.value("disputed", json(false)), "meta.disputed");
  return r;
}

Record from_json_line(const std::string& line) {
  return from_json(parse_json_input(line, "record"));
}

}  // namespace ktune::tuning_db
