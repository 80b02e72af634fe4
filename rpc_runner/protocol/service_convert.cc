// Plain service types <-> protobuf messages.
#include "rpc_runner/protocol/service_convert.h"

#include "rpc_runner/protocol/peer_checks.h"
#include "schedule_space/task.h"
#include "support/error.h"
#include "support/json_input.h"

namespace ktune::rpc_runner {

void to_proto(const schedule_space::Task& task, rpc::TaskSpec* out) {
  out->set_template_name(task.template_name());
  out->set_args_json(task.args_json().dump());
  const schedule_space::TargetTraits& t = task.target();
  out->set_target(t.key);
  out->set_vector_bits(t.vector_bits);
  out->set_cores(t.cores);
  out->set_arch(t.arch);
}

schedule_space::Task from_proto(const rpc::TaskSpec& spec) {
  const auto args = parse_json_input(spec.args_json(), "task arguments");
  if (!args.is_object())
    throw Error(ErrorKind::kInvalidArgument, "task arguments are not a JSON object");
  std::map<std::string, std::string> given;
  for (const auto& [k, v] : args.items())
    given[k] = v.is_string() ? v.get<std::string>() : v.dump();
  schedule_space::TargetTraits traits;
  traits.key = spec.target();
  traits.vector_bits = spec.vector_bits();
  traits.cores = spec.cores();
  traits.arch = spec.arch();
  return schedule_space::Task::create(spec.template_name(), given, traits);
}

tuner::MeasureResult from_proto(const rpc::CandidateResult& r) {
  if (r.error_kind().empty())
    return tuner::make_ok_result({r.costs().begin(), r.costs().end()}, r.build_s(), r.run_s());
  ErrorKind kind = ErrorKind::kUnknown;
  try {
    kind = error_kind_from_string(r.error_kind());
  } catch (const Error&) {
  }
  return tuner::make_error_result(kind, r.error_message(), r.build_s(), r.run_s());
}

void to_proto(const JobSpec& spec, rpc::JobSpec* out) {
  out->set_protocol_version(kProtocolVersion);
  out->set_template_name(spec.template_name);
  out->set_args_json(nlohmann::json(spec.args).dump());
  out->set_target(spec.target);
  const tuner::SessionOptions& session = spec.session;
  out->set_device_key(session.device_key);
  out->set_trials(session.trials);
  out->set_tuner(session.tuner);
  out->set_seed(session.seed);
  out->set_batch_size(session.batch_size);
  out->set_early_stopping(session.early_stopping);
  out->set_xgb_features(session.xgb_features);
  out->set_transfer(session.transfer);
  to_proto(spec.measure, out->mutable_measure());
  out->set_priority(spec.priority);
  out->set_owner(spec.owner);
  if (spec.is_model()) out->set_model_json(spec.model.dump());
  out->set_strategy(spec.strategy);
}

JobSpec from_proto(const rpc::JobSpec& in) {
  JobSpec spec;
  spec.template_name = in.template_name();
  const auto args = parse_json_input(in.args_json(), "job spec args_json");
  if (!args.is_object())
    throw Error(ErrorKind::kInvalidArgument, "job spec: args_json is not a JSON object");
  for (const auto& [k, v] : args.items()) {
    if (v.is_string())
      spec.args[k] = v.get<std::string>();
    else if (v.is_number_integer())
      spec.args[k] = std::to_string(v.get<int64_t>());
    else
      throw Error(ErrorKind::kInvalidArgument,
                  "job spec: argument '" + k + "' is neither a string nor an integer");
  }
  spec.target = in.target().empty() ? "host" : in.target();
  tuner::SessionOptions& session = spec.session;
  session.device_key = in.device_key();
  session.trials = in.trials();
  session.tuner = in.tuner();
  session.seed = in.seed();
  session.batch_size = in.batch_size();
  session.early_stopping = in.early_stopping();
  session.xgb_features = in.xgb_features();
  session.transfer = in.transfer();
  spec.measure = from_proto(in.measure());
  spec.priority = in.priority();
  spec.owner = in.owner();
  if (!in.model_json().empty())
    spec.model = parse_json_input(in.model_json(), "job spec model_json");
  if (!in.strategy().empty()) spec.strategy = in.strategy();
  return spec;
}

void to_proto(const JobStatus& s, rpc::JobInfo* out) {
  // Bounded as validate() bounds what a client sends now (a log may hold jobs from before): cut
  // on a character boundary, control characters blanked.
  const auto bounded = [](const std::string& text, size_t max) { return clean_text(text, max); };
  out->set_id(s.id);
  out->set_state(std::string(tuning_db::to_string(s.state)));
  out->set_workload(bounded(s.workload, kMaxJobMessage));
  out->set_device_key(bounded(s.device_key, kMaxJobText));
  out->set_target(bounded(s.target, kMaxJobText));
  out->set_trials(s.trials);
  out->set_done(s.done);
  out->set_best_gflops(s.best_gflops);
  out->set_devices(s.devices);
  out->set_measuring(s.measuring);
  out->set_priority(s.priority);
  out->set_owner(bounded(s.owner, kMaxJobText));
  out->set_client(s.client);
  out->set_message(bounded(s.message, kMaxJobMessage));
  out->set_tuner(bounded(s.tuner, kMaxJobText));
  out->set_created_at(s.created_at);
  out->set_model(s.model);
}

JobStatus from_proto(const rpc::JobInfo& in) {
  JobStatus s;
  s.id = in.id();
  s.state = tuning_db::job_state_from_string(in.state());
  s.workload = in.workload();
  s.device_key = in.device_key();
  s.target = in.target();
  s.trials = in.trials();
  s.done = in.done();
  s.best_gflops = in.best_gflops();
  s.devices = in.devices();
  s.measuring = in.measuring();
  s.priority = in.priority();
  s.owner = in.owner();
  s.client = in.client();
  s.message = in.message();
  s.tuner = in.tuner();
  s.created_at = in.created_at();
  s.model = in.model();
  return s;
}

void to_proto(const tuner::ProgressSnapshot& p, rpc::Progress* out) {
  out->set_done(p.done);
  out->set_total(p.total);
  out->set_ok(p.ok);
  for (const auto& [kind, n] : p.errors) (*out->mutable_errors())[std::string(to_string(kind))] = n;
  out->set_best_gflops(p.best_gflops);
  out->set_elapsed_s(p.elapsed_s);
  out->set_eta_s(p.eta_s);
  out->set_has_rank_correlation(p.rank_correlation.has_value());
  out->set_rank_correlation(p.rank_correlation.value_or(0));
}

tuner::ProgressSnapshot from_proto(const rpc::Progress& in) {
  tuner::ProgressSnapshot p;
  p.done = in.done();
  p.total = in.total();
  p.ok = in.ok();
  for (const auto& [name, n] : in.errors()) {
    ErrorKind kind = ErrorKind::kUnknown;
    try {
      kind = error_kind_from_string(name);
    } catch (const Error&) {
    }
    p.errors[kind] += n;
  }
  p.best_gflops = in.best_gflops();
  p.elapsed_s = in.elapsed_s();
  p.eta_s = in.eta_s();
  if (in.has_rank_correlation()) p.rank_correlation = in.rank_correlation();
  return p;
}

void to_proto(const JobEvent& e, rpc::JobEvent* out) {
  to_proto(e.job, out->mutable_job());
  if (e.progress) to_proto(*e.progress, out->mutable_progress());
  out->set_summary_json(e.summary_json);
  out->set_model_report_json(e.model_report_json);
}

JobEvent from_proto(const rpc::JobEvent& in) {
  JobEvent e;
  e.job = from_proto(in.job());
  if (in.has_progress()) e.progress = from_proto(in.progress());
  e.summary_json = in.summary_json();
  e.model_report_json = in.model_report_json();
  return e;
}

void to_proto(const WorkerInfo& w, rpc::Device* out) {
  out->set_worker_id(w.worker_id);
  out->set_key(w.key);
  out->set_target(w.target);
  out->set_cores(w.cores);
  out->set_description(w.description);
  out->set_peer(w.peer);
  out->set_slots(w.slots);
  out->set_in_flight(w.in_flight);
  out->set_served(w.served);
  out->set_emulated(w.emulated);
  out->set_refused(w.refused);
  out->set_flagged(w.flagged);
  out->set_core_gflops(w.core_gflops);
  out->set_all_gflops(w.all_gflops);
  out->set_calibration_note(w.calibration_note);
}

DeviceInfo from_proto(const rpc::Device& d) {
  DeviceInfo out;
  out.worker_id = d.worker_id();
  out.key = d.key();
  out.target = d.target();
  out.cores = d.cores();
  out.emulated = d.emulated();
  out.description = d.description();
  out.peer = d.peer();
  out.slots = d.slots();
  out.in_flight = d.in_flight();
  out.served = d.served();
  out.refused = d.refused();
  out.flagged = d.flagged();
  out.core_gflops = d.core_gflops();
  out.all_gflops = d.all_gflops();
  out.calibration_note = d.calibration_note();
  return out;
}

ServerStatus from_proto(const rpc::StatusReply& reply) {
  ServerStatus out;
  out.server_version = reply.server_version();
  out.protocol_version = reply.protocol_version();
  out.uptime_s = reply.uptime_s();
  out.metrics = parse_metrics_text(reply.metrics());
  for (const auto& d : reply.devices()) out.devices.push_back(from_proto(d));
  out.recorded_target = reply.recorded_target();
  return out;
}

}  // namespace ktune::rpc_runner
