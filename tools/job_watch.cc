// Following a job: state lines, the progress display, the summary.
#include "tools/job_watch.h"

#include <cstdio>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "support/error.h"
#include "tools/progress_display.h"
#include "tools/tune_summary.h"

namespace ktune::tools {

void watch_job(rpc_runner::ServiceClient& client, uint64_t id, bool json) {
  std::optional<ProgressDisplay> display;
  if (!json) display.emplace(stderr);
  std::string last_note;
  const rpc_runner::JobEvent last = client.watch(id, [&](const rpc_runner::JobEvent& e) {
    // A state or message change is one line (waiting for devices, running, ...).
    const std::string note = e.job.state + (e.job.message.empty() ? "" : ": " + e.job.message);
    // The end is said once, by the summary or the error line below.
    if (!json && note != last_note && !e.progress && !e.job.finished()) {
      std::fprintf(stderr, "job %llu %s\n", static_cast<unsigned long long>(id), note.c_str());
      last_note = note;
    }
    if (display && e.progress) display->show(*e.progress);
  });
  if (display) display->finish();
  const rpc_runner::JobStatus& job = last.job;
  if (!last.summary_json.empty()) {
    const auto summary = nlohmann::json::parse(last.summary_json);
    if (json) {
      nlohmann::json out = summary;
      out["job"] = job.id;
      out["state"] = job.state;
      std::cout << out.dump(2) << "\n";
    } else {
      print_tune_summary(summary, std::cout);
      std::cout << "job:      " << job.id << " (" << job.state << ") on key " << job.device_key << "\n";
    }
  }
  if (job.state != "done" || last.summary_json.empty())
    throw Error(ErrorKind::kRun, "job " + std::to_string(job.id) + " " + job.state +
                                     (job.message.empty() ? "" : ": " + job.message));
  if (!nlohmann::json::parse(last.summary_json).contains("best"))
    throw Error(ErrorKind::kRun, "job " + std::to_string(job.id) + ": no config succeeded; every result is in the server's log");
}

}  // namespace ktune::tools
