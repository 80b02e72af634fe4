// Declares the flags every client of a tuning server shares (--server, --token-file, --tls-ca) and
// the job table printer.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "rpc_runner/client/service_client.h"
#include "rpc_runner/protocol/job_types.h"

namespace ktune::tools {

// Adds --server HOST:PORT (required when `required`), --token-file and --tls-ca to `cmd`,
// stored in `options` (which must outlive the parse).
CLI::Option* add_client_flags(CLI::App* cmd, rpc_runner::ServiceClientOptions& options,
                              bool required);

// Returns "user@host" (the owner column of the jobs table).
std::string job_owner();

// Prints jobs as a table: id, state, trials done/budget, best GFLOP/s, devices, key, workload,
// and the message of a waiting or failed job.
void print_jobs(std::ostream& out, const std::vector<rpc_runner::JobStatus>& jobs);

// The status as JSON (for --json).
nlohmann::json to_json(const rpc_runner::JobStatus& status);

}  // namespace ktune::tools
