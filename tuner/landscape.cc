// Landscape files: reading, writing, restricting a task to them, and replaying them.
#include "tuner/landscape.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace ktune::tuner {

schedule_space::Task Landscape::space_task() const {
  std::map<std::string, std::string> args;
  for (const auto& [name, value] : header.at("args").items())
    args[name] = value.is_string() ? value.get<std::string>() : value.dump();
  schedule_space::TargetTraits traits;
  traits.key = header.at("target");
  traits.vector_bits = header.at("vector_bits");
  traits.cores = header.at("cores");
  traits.arch = header.at("arch");
  auto task = schedule_space::Task::create(header.at("template"), args, traits);
  if (task.space().size() != header.at("space_size").get<uint64_t>() ||
      task.workload_key() != header.at("workload").get<std::string>()) {
    throw Error(ErrorKind::kInvalidArgument,
                "the landscape of " + header.at("workload").get<std::string>() +
                    " was recorded with another version of its template; record it again");
  }
  return task;
}

schedule_space::Task Landscape::task() const {
  // The predicate reads the map directly: the landscape outlives the task in tuner_replay.
  const auto* recorded = &points;
  return space_task().with_constraint("config is in the recorded landscape",
                                      [recorded](const schedule_space::EntityView& config) {
                                        return recorded->count(config.index()) > 0;
                                      });
}

double Landscape::best_gflops() const {
  double best = 0;
  for (const auto& [index, point] : points) best = std::max(best, point.gflops);
  return best;
}

size_t Landscape::count_within(double fraction) const {
  const double threshold = fraction * best_gflops();
  return static_cast<size_t>(std::count_if(
      points.begin(), points.end(), [&](const auto& p) { return p.second.gflops >= threshold; }));
}

Landscape read_landscape(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::kIo, "cannot read landscape " + path);
  Landscape landscape;
  std::string line;
  std::getline(in, line);
  try {
    landscape.header = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kInvalidArgument, path + ":1: bad header: " + e.what());
  }
  for (size_t number = 2; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    std::istringstream fields(line);
    uint64_t index = 0;
    LandscapePoint point;
    std::string kind;
    if (!(fields >> index >> point.gflops))
      throw Error(ErrorKind::kInvalidArgument,
                  path + ":" + std::to_string(number) + ": expected '<index> <gflops>'");
    if (fields >> kind) point.error = error_kind_from_string(kind);
    landscape.points[index] = point;
  }
  return landscape;
}

void write_landscape(const std::string& path, const schedule_space::Task& task,
                     const std::vector<PastMeasurement>& past, const std::string& note) {
  nlohmann::json header = {{"template", task.template_name()},
                           {"args", task.args_json()},
                           {"workload", task.workload_key()},
                           {"target", task.target().key},
                           {"vector_bits", task.target().vector_bits},
                           {"cores", task.target().cores},
                           {"arch", task.target().arch},
                           {"space_size", task.space().size()},
                           {"measured", note}};
  std::vector<const PastMeasurement*> sorted;
  for (const auto& p : past) sorted.push_back(&p);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->config.index() < b->config.index(); });
  std::ofstream out(path);
  if (!out) throw Error(ErrorKind::kIo, "cannot write landscape " + path);
  out << header.dump() << "\n";
  char gflops[32];
  for (const auto* p : sorted) {
    out << p->config.index();
    if (p->result.ok()) {
      std::snprintf(gflops, sizeof gflops, " %.2f", task.flop() / p->result.mean_cost() / 1e9);
      out << gflops << "\n";
    } else {
      out << " 0 " << to_string(*p->result.error) << "\n";
    }
  }
  if (!out) throw Error(ErrorKind::kIo, "cannot write landscape " + path);
}

std::vector<MeasureResult> ReplayMeasurer::measure(const std::vector<MeasureInput>& inputs) {
  std::vector<MeasureResult> results;
  for (const auto& input : inputs) {
    auto it = landscape_.points.find(input.config.index());
    if (it == landscape_.points.end()) {
      results.push_back(make_error_result(ErrorKind::kUnknown, "not in the landscape"));
    } else if (it->second.error) {
      results.push_back(make_error_result(*it->second.error, "failed when recorded"));
    } else {
      results.push_back(make_ok_result({flop_ / (it->second.gflops * 1e9)}));
    }
  }
  return results;
}

}  // namespace ktune::tuner
