// `ktune jobs`: list a tuning server's jobs; `jobs watch ID` re-attaches to one; `jobs cancel ID`
// stops one.
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include <nlohmann/json.hpp>

#include "rpc_runner/client/service_client.h"
#include "tools/commands.h"
#include "tools/job_watch.h"
#include "tools/option_checks.h"
#include "tools/service_flags.h"

namespace ktune::tools {
namespace {

struct JobsOptions {
  rpc_runner::ServiceClientOptions client;
  bool all = false;
  bool json = false;
  uint64_t id = 0;
};

void run_list(const JobsOptions& o) {
  rpc_runner::ServiceClient client(o.client);
  const auto jobs = client.jobs(o.all);
  if (o.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& s : jobs) j.push_back(to_json(s));
    std::cout << j.dump(2) << "\n";
    return;
  }
  if (jobs.empty()) {
    std::cout << (o.all ? "no jobs on " : "no queued or running jobs on ") << o.client.server
              << "\n";
    return;
  }
  print_jobs(std::cout, jobs);
}

void run_cancel(const JobsOptions& o) {
  rpc_runner::ServiceClient client(o.client);
  rpc_runner::JobStatus s = client.cancel(o.id);
  // The job stops between candidates; wait a little so the answer is its final state.
  for (int i = 0; i < 100 && !s.finished(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s = client.job(o.id);
  }
  if (o.json) {
    std::cout << to_json(s).dump(2) << "\n";
    return;
  }
  std::cout << "job " << s.id << ": " << s.state << " (" << s.done << "/" << s.trials
            << " trials measured)\n";
}

void add_jobs(CLI::App& app) {
  auto o = std::make_shared<JobsOptions>();
  auto* cmd = app.add_subcommand("jobs", "List, watch or cancel the tuning jobs of a server");
  add_client_flags(cmd, o->client, false);
  cmd->add_flag("--all", o->all, "Finished jobs too");
  cmd->add_flag("--json", o->json, "Print JSON");
  auto* watch = cmd->add_subcommand(
      "watch", "Follow a job's progress until it ends (reconnects if the server restarts)");
  watch->add_option("id", o->id, "Job id")->required()->check(finite_in(1, 18446744073709551615.0));
  add_client_flags(watch, o->client, false);
  watch->add_flag("--json", o->json, "Print the summary as JSON");
  auto* cancel = cmd->add_subcommand("cancel", "Stop a queued or running job");
  cancel->add_option("id", o->id, "Job id")
      ->required()
      ->check(finite_in(1, 18446744073709551615.0));
  add_client_flags(cancel, o->client, false);
  cancel->add_flag("--json", o->json, "Print JSON");
  auto need_server = [o] {
    if (o->client.server.empty()) throw CLI::RequiredError("--server");
  };
  watch->callback([o, need_server] {
    need_server();
    rpc_runner::ServiceClient client(o->client);
    watch_job(client, o->id, o->json);
  });
  cancel->callback([o, need_server] {
    need_server();
    run_cancel(*o);
  });
  cmd->callback([o, watch, cancel, need_server] {
    if (watch->parsed() || cancel->parsed()) return;
    need_server();
    run_list(*o);
  });
}

}  // namespace

KTUNE_REGISTER_COMMAND(jobs, add_jobs);

}  // namespace ktune::tools
