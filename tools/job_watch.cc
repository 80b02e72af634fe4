// Following a job: state lines, the progress display, the summary.
#include "tools/job_watch.h"

#include <cstdio>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "support/error.h"
#include "tools/model_table.h"
#include "tools/progress_display.h"
#include "tools/service_flags.h"
#include "tools/tune_summary.h"

namespace ktune::tools {

namespace {

// One line per state or message change (waiting for devices, running, ...); the end is said
// once, by the summary or the error line of the caller.
class StateLines {
 public:
  StateLines(uint64_t id, bool quiet) : id_(id), quiet_(quiet) {}
  void show(const rpc_runner::JobEvent& e) {
    const std::string note = std::string(tuning_db::to_string(e.job.state)) +
                             (e.job.message.empty() ? "" : ": " + e.job.message);
    if (!quiet_ && note != last_ && !e.progress && !e.job.finished()) {
      std::fprintf(stderr, "job %llu %s\n", static_cast<unsigned long long>(id_), note.c_str());
      last_ = note;
    }
  }

 private:
  uint64_t id_;
  bool quiet_;
  std::string last_;
};

void watch_model_job(rpc_runner::ServiceClient& client, uint64_t id, bool json, size_t budget) {
  ModelProgress progress(budget, json);
  const rpc_runner::JobEvent last = follow_model_job(
      client, id, json, [&](const tuner::ModelTuningReport& r) { progress.show(r); });
  progress.finish();
  nlohmann::json summary = nlohmann::json::parse(last.summary_json);
  summary["job"] = id;
  if (json) {
    std::cout << summary.dump(2) << "\n";
    return;
  }
  std::fflush(stdout);
  print_model_summary(stdout, tuner::model_report_from_json(summary), summary, budget, nullptr, "");
  std::printf("job: %llu (%s) on key %s\n", static_cast<unsigned long long>(id),
              std::string(tuning_db::to_string(last.job.state)).c_str(),
              last.job.device_key.c_str());
}

}  // namespace

rpc_runner::JobEvent follow_model_job(
    rpc_runner::ServiceClient& client, uint64_t id, bool quiet,
    const std::function<void(const tuner::ModelTuningReport&)>& on_report) {
  StateLines lines(id, quiet);
  std::string drawn;
  const rpc_runner::JobEvent last = client.watch(id, [&](const rpc_runner::JobEvent& e) {
    lines.show(e);
    // Every event carries the latest report: redraw only when it changed.
    if (on_report && !e.model_report_json.empty() && e.model_report_json != drawn) {
      drawn = e.model_report_json;
      on_report(tuner::model_report_from_json(nlohmann::json::parse(drawn)));
    }
  });
  const rpc_runner::JobStatus& job = last.job;
  if (job.state != tuning_db::JobState::kDone || last.summary_json.empty())
    throw Error(ErrorKind::kRun, "job " + std::to_string(job.id) + " " +
                                     std::string(tuning_db::to_string(job.state)) +
                                     (job.message.empty() ? "" : ": " + job.message));
  return last;
}

std::optional<uint64_t> submit_job(rpc_runner::ServiceClient& client, rpc_runner::JobSpec job,
                                   bool detach) {
  job.owner = job_owner();
  job.validate();
  const rpc_runner::JobStatus submitted = client.submit(job);
  if (!detach) return submitted.id;
  std::cout << "job " << submitted.id << " submitted\n";
  return std::nullopt;
}

void watch_job(rpc_runner::ServiceClient& client, uint64_t id, bool json) {
  if (const rpc_runner::JobStatus status = client.job(id); status.model)
    return watch_model_job(client, id, json, status.trials);
  std::optional<ProgressDisplay> display;
  if (!json) display.emplace(stderr);
  StateLines lines(id, json);
  const rpc_runner::JobEvent last = client.watch(id, [&](const rpc_runner::JobEvent& e) {
    lines.show(e);
    if (display && e.progress) display->show(*e.progress);
  });
  if (display) display->finish();
  const rpc_runner::JobStatus& job = last.job;
  if (!last.summary_json.empty()) {
    const auto summary = nlohmann::json::parse(last.summary_json);
    if (json) {
      nlohmann::json out = summary;
      out["job"] = job.id;
      out["state"] = tuning_db::to_string(job.state);
      std::cout << out.dump(2) << "\n";
    } else {
      print_tune_summary(summary, std::cout);
      std::cout << "job:      " << job.id << " (" << job.state << ") on key " << job.device_key
                << "\n";
    }
  }
  if (job.state != tuning_db::JobState::kDone || last.summary_json.empty())
    throw Error(ErrorKind::kRun, "job " + std::to_string(job.id) + " " +
                                     std::string(tuning_db::to_string(job.state)) +
                                     (job.message.empty() ? "" : ": " + job.message));
  if (!nlohmann::json::parse(last.summary_json).contains("best"))
    throw Error(ErrorKind::kRun, "job " + std::to_string(job.id) +
                                     ": no config succeeded; every result is in the server's log");
}

}  // namespace ktune::tools
