// Declares the flags of the commands that build from a tuning log (--db, --server, --untuned) and
// the HistorySource they name.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "deploy/config_choice.h"
#include "deploy/model_plan.h"
#include "rpc_runner/client/service_client.h"

namespace ktune::tools {

// Where a build's configs come from, as the command line says.
struct HistoryFlags {
  std::string db = "ktune.db";
  rpc_runner::ServiceClientOptions server;
  std::string device_key;
  bool untuned = false;
};

// Adds --db, --server (with its client flags), --device-key and --untuned to `cmd`, stored in
// `flags` (which must outlive the parse). `device_key_help` says what the key selects.
void add_history_flags(CLI::App* cmd, HistoryFlags& flags, const std::string& device_key_help);

// The source the flags name: untuned, the server, else the log at --db (choose_config refuses one
// that does not exist).
HistorySource history_source(const HistoryFlags& flags);

// Warns on stderr when most of a model's tasks run untuned configs (fallback, nearest shape, or a
// best record that is the fallback config) though a log or server was asked: the build works,
// but not at the speed tuning gives. The tune-model command it suggests repeats the model and its
// --input shapes (NAME=SHAPE, as given).
void warn_if_mostly_untuned(const deploy::StepSources& n, const HistorySource& from,
                            const std::string& model, const std::vector<std::string>& inputs);

}  // namespace ktune::tools
