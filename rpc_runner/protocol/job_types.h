// Defines the plain data of the service's tuning jobs: JobSpec (what a client submits), JobStatus,
// JobEvent, of its devices: WorkerInfo, DeviceInfo, and of the server: ServerStatus.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rpc_runner/protocol/metrics_text.h"
#include "tuner/measure.h"
#include "tuner/tuning_session.h"
#include "tuning_db/job_store.h"

namespace ktune::rpc_runner {

// Limits a job must respect (checked by validate()).
inline constexpr uint64_t kMaxJobTrials = 10'000'000;
inline constexpr int kMaxJobPriority = 100;
// Every string of a spec is printable (no control character: nothing a client sends can forge a
// log line or a terminal's escape code) and at most this long: names, keys, the owner, the
// tuner, the target, each workload argument.
inline constexpr size_t kMaxJobText = 256;
// A model job: at most this many tasks, this many layer names in all, each string of its task
// list at most kMaxModelText (ONNX node names run long).
inline constexpr size_t kMaxModelTasks = 4096;
inline constexpr size_t kMaxModelLayers = 65536;
inline constexpr size_t kMaxModelText = 4096;
// What JobInfo carries of a job's message (why it waits or failed) and owner, written before the
// limits held included: a reply of a page of jobs stays far below gRPC's message size.
inline constexpr size_t kMaxJobMessage = 2048;
// Jobs in one reply of ListJobs (a client pages through the rest).
inline constexpr size_t kMaxJobsPage = 200;

// A tuning job: the workload or the model, the devices to measure on, the search and how to
// measure.
struct JobSpec {
  std::string template_name;
  std::map<std::string, std::string> args;  // key=value, as on the command line
  // A model job: the model's tasks as frontend::to_json(ModelTasks) (the server rebuilds them
  // for its devices' target), tuned under one budget of session.trials, session.batch_size
  // trials per allocation. null: a one-workload job (template_name, args).
  nlohmann::json model;
  std::string strategy = "gradient";  // model jobs: the task scheduler (gradient or round_robin)
  std::string target = "host";        // "host" = the devices' own target
  // The search. session.device_key is the key of the devices to measure on (and is stored in
  // every record). What a job carries of it: trials, tuner, seed, batch_size, early_stopping,
  // xgb_features, transfer and device_key; the server sets the rest (run id, emulated, stop).
  tuner::SessionOptions session;
  tuner::MeasureOptions measure;  // run_threads 0: the device's default
  int priority = 1;               // share of the key's devices relative to other jobs
  std::string owner;

  bool is_model() const { return !model.is_null(); }
  // "model NAME (N tasks)" for a model job, else the workload key (template(args...)), or the
  // template name when this build does not know it.
  std::string label() const;

  // Returns the spec as JSON (what the log's jobs table keeps).
  nlohmann::json to_json() const;
  // Inverse of to_json. Throws Error(kInvalidArgument) naming the bad field.
  static JobSpec from_json(const nlohmann::json& j);
  // Throws Error(kInvalidArgument), one clear line, for an unknown template or argument, a bad
  // tuner, trials outside 1..kMaxJobTrials, priority outside 1..kMaxJobPriority, an empty
  // device key, non-finite or non-positive timeouts, a string past kMaxJobText or with a control
  // character (named by field, the value not repeated); for a model job, a task list that does
  // not read (frontend::tasks_from_json), past kMaxModelTasks, kMaxModelLayers or kMaxModelText,
  // no task today's templates take, a bad strategy.
  void validate() const;
};

// A job as `ktune jobs` shows it.
struct JobStatus {
  uint64_t id = 0;
  tuning_db::JobState state = tuning_db::JobState::kQueued;
  std::string workload;  // workload key (template(args...)), or "model NAME (N tasks)"
  std::string device_key;
  std::string target;  // resolved once a device of the key was seen; else the spec's
  uint64_t trials = 0;
  uint64_t done = 0;  // measured so far, across server restarts
  double best_gflops = 0;
  int devices = 0;    // workers of the key attached
  int measuring = 0;  // this job's candidates on devices now
  int priority = 1;
  std::string owner;
  std::string client;   // the client it belongs to (token file name); "" = none
  std::string message;  // why it waits, or why it failed
  std::string tuner;
  double created_at = 0;
  bool model = false;  // a model job (its events carry model reports)

  bool finished() const { return tuning_db::is_terminal(state); }
};

// What a watcher of a job receives: the status, plus progress after a batch, plus the run's
// summary (tuner::summary_json; a model job's tuner::model_summary_json) once the job is done.
// A model job's events carry its latest tuner::to_json(ModelTuningReport) after the first
// allocation (model_report_json), so a watcher redraws the per-task table.
struct JobEvent {
  JobStatus job;
  std::optional<tuner::ProgressSnapshot> progress;
  std::string summary_json;
  std::string model_report_json;
};

// One attached worker as the pool knows it (what its hello said, plus the server's view).
struct WorkerInfo {
  std::string worker_id;  // assigned at attach, e.g. "w3"
  std::string key;
  std::string target;
  int cores = 1;
  int vector_bits = 0;
  int slots = 1;  // candidates it takes at once
  bool can_build = true;
  bool emulated = false;   // under emulation (qemu): its timings are marked, never served as real
  double peak_gflops = 0;  // stated f32 peak (informational); 0 = unknown
  std::string description;
  std::string peer;
  // Filled by workers(): the pool's view.
  int in_flight = 0;
  uint64_t served = 0;
  uint64_t refused = 0;  // results the server refused
  std::string flagged;   // why it refused the last one ("" = none)
  // Its calibration at attach (the fma_peak kernel, timed by the device): fp32 GFLOP/s on one
  // thread and on all its threads (0 = not calibrated yet), and what the server found odd in it.
  double core_gflops = 0, all_gflops = 0;
  std::string calibration_note;
};

// One attached worker, as `ktune server devices` shows it.
struct DeviceInfo {
  std::string worker_id;  // assigned by the server at attach time, e.g. "w3"
  std::string key;        // device key the worker registered with
  std::string target;     // the device's codegen::Target string
  int cores = 0;
  std::string description;
  std::string peer;       // the worker's network address as the server saw it
  int slots = 0;          // candidates it takes at once
  int in_flight = 0;      // candidates it measures now
  uint64_t served = 0;    // results it returned
  bool emulated = false;  // runs under emulation (qemu): its timings are marked as such
  uint64_t refused = 0;   // results the server refused (not finite, out of range, implausible)
  std::string flagged;    // why it refused the last one ("" = none)
  // Its calibration at attach: fp32 GFLOP/s on one thread and on all (0 = calibrating), and what
  // the server found odd in it ("" = nothing).
  double core_gflops = 0, all_gflops = 0;
  std::string calibration_note;
};

// The server at a glance, as `ktune server status` shows it: its metrics (those its metrics port
// serves, rpc_runner/server/server_metrics.h) and its devices.
struct ServerStatus {
  std::string server_version;
  uint32_t protocol_version = 0;
  double uptime_s = 0;
  std::vector<MetricSample> metrics;
  std::vector<DeviceInfo> devices;
  // The target of the newest record of the device key status() was asked about in the server's
  // log ("" = none, or not asked).
  std::string recorded_target;
};

}  // namespace ktune::rpc_runner
