// The client side of the tuning service: unary calls with a deadline, watch with reconnection.
#include "rpc_runner/client/service_client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <ostream>
#include <thread>

#include <spdlog/spdlog.h>

#include "rpc_runner/protocol/credentials.h"
#include "rpc_runner/protocol/ktune.grpc.pb.h"
#include "rpc_runner/protocol/service_convert.h"
#include "support/error.h"

namespace ktune::rpc_runner {

struct ServiceClient::Impl {
  ServiceClientOptions options;
  ClientSecurity security;
  std::unique_ptr<rpc::Tuning::Stub> stub;

  std::unique_ptr<grpc::ClientContext> context(bool deadline = true) const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (deadline)
      ctx->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(options.timeout_s * 1e3)));
    attach_token(*ctx, security);
    return ctx;
  }

  void check(const grpc::Status& status, std::string_view what) const {
    if (!status.ok()) throw status_error(status, options.server, what);
  }
};

ServiceClient::ServiceClient(const ServiceClientOptions& options)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  if (!(options.timeout_s > 0))
    throw Error(ErrorKind::kInvalidArgument, "the call timeout must be above 0");
  impl_->security = load_client_security(options.token_file, options.tls_ca_file, Role::kClient,
                                         options.allow_readable_token);
  impl_->stub = rpc::Tuning::NewStub(make_channel(options.server, impl_->security));
}

ServiceClient::~ServiceClient() = default;

JobStatus ServiceClient::submit(const JobSpec& spec) {
  rpc::JobSpec request;
  to_proto(spec, &request);
  rpc::JobInfo reply;
  auto ctx = impl_->context();
  impl_->check(impl_->stub->SubmitJob(ctx.get(), request, &reply), "submit the job");
  return from_proto(reply);
}

std::vector<JobStatus> ServiceClient::jobs(bool all) {
  std::vector<JobStatus> out;
  // Page after page (the server sends at most kMaxJobsPage a reply), by id.
  for (uint64_t after = 0;;) {
    rpc::ListJobsRequest request;
    request.set_all(all);
    request.set_after_id(after);
    rpc::ListJobsReply reply;
    auto ctx = impl_->context();
    impl_->check(impl_->stub->ListJobs(ctx.get(), request, &reply), "list the jobs");
    for (const auto& j : reply.jobs()) out.push_back(from_proto(j));
    if (!reply.more() || reply.jobs().empty()) return out;
    after = reply.jobs().rbegin()->id();
  }
}

JobStatus ServiceClient::cancel(uint64_t id) {
  rpc::JobRef request;
  request.set_id(id);
  rpc::JobInfo reply;
  auto ctx = impl_->context();
  impl_->check(impl_->stub->CancelJob(ctx.get(), request, &reply), "cancel the job");
  return from_proto(reply);
}

JobStatus ServiceClient::job(uint64_t id) {
  // The first event of a WatchJob (the job's state now), not a search of the caller's list: the
  // server then decides who may see the job, and logs a refusal of another client's.
  rpc::JobRef request;
  request.set_id(id);
  auto ctx = impl_->context();
  auto reader = impl_->stub->WatchJob(ctx.get(), request);
  rpc::JobEvent event;
  const bool got = reader->Read(&event);
  if (got) ctx->TryCancel();
  const grpc::Status status = reader->Finish();
  if (got) return from_proto(event).job;
  // A stream that ends without an event has no job to tell of either.
  throw status_error(status.ok()
                         ? grpc::Status(grpc::StatusCode::NOT_FOUND, "no job " + std::to_string(id))
                         : status,
                     impl_->options.server, "read the job");
}

JobEvent ServiceClient::watch(uint64_t id, const std::function<void(const JobEvent&)>& on_event) {
  using Clock = std::chrono::steady_clock;
  std::optional<JobEvent> last;
  double backoff = 0.25;
  auto lost_since = Clock::now();
  bool lost = false;
  for (;;) {
    rpc::JobRef request;
    request.set_id(id);
    auto ctx = impl_->context(false);
    auto reader = impl_->stub->WatchJob(ctx.get(), request);
    rpc::JobEvent event;
    bool got_any = false;
    while (reader->Read(&event)) {
      got_any = true;
      lost = false;
      backoff = 0.25;
      last = from_proto(event);
      if (on_event) on_event(*last);
    }
    grpc::Status status = reader->Finish();
    if (last && last->job.finished()) return *last;
    const grpc::StatusCode code = status.error_code();
    if (status.ok() ||
        (code != grpc::StatusCode::UNAVAILABLE && code != grpc::StatusCode::CANCELLED))
      impl_->check(status.ok() ? grpc::Status(grpc::StatusCode::INTERNAL,
                                              "the stream ended before the job did")
                               : status,
                   "watch the job");
    // Never reached (a wrong address, no server): nothing to resume, say so now.
    if (!last) impl_->check(status, "watch the job");
    // The server went away (restart): try again with backoff, for a while.
    if (!lost || got_any) {
      lost = true;
      lost_since = Clock::now();
      spdlog::warn("lost the tuning server at {} ({}); reconnecting", impl_->options.server,
                   status.error_message());
    }
    if (std::chrono::duration<double>(Clock::now() - lost_since).count() >
        impl_->options.reconnect_for_s)
      impl_->check(status, "watch the job");
    std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
    backoff = std::min(backoff * 2, 5.0);
  }
}

std::vector<tuning_db::Record> ServiceClient::best(const std::string& workload_key,
                                                   const std::string& target,
                                                   const std::string& device_key, int64_t k,
                                                   bool include_emulated) {
  rpc::BestRequest request;
  request.set_include_emulated(include_emulated);
  request.set_workload_key(workload_key);
  request.set_target(target);
  request.set_device_key(device_key);
  request.set_k(k);
  rpc::RecordLines reply;
  auto ctx = impl_->context();
  impl_->check(impl_->stub->QueryBest(ctx.get(), request, &reply), "look up the best records");
  std::vector<tuning_db::Record> out;
  for (const auto& line : reply.lines()) out.push_back(tuning_db::from_json_line(line));
  return out;
}

int64_t ServiceClient::export_log(std::ostream& out, const std::string& workload_key) {
  rpc::ExportRequest request;
  request.set_workload_key(workload_key);
  auto ctx = impl_->context(false);
  auto reader = impl_->stub->ExportLog(ctx.get(), request);
  rpc::RecordLines chunk;
  int64_t n = 0;
  while (reader->Read(&chunk)) {
    for (const auto& line : chunk.lines()) {
      out << line << '\n';
      ++n;
    }
    if (!out) throw Error(ErrorKind::kIo, "cannot write the exported records");
  }
  impl_->check(reader->Finish(), "export the log");
  return n;
}

std::vector<DeviceInfo> ServiceClient::devices() {
  rpc::ListDevicesRequest request;
  rpc::ListDevicesReply reply;
  auto ctx = impl_->context();
  impl_->check(impl_->stub->ListDevices(ctx.get(), request, &reply), "list the devices");
  std::vector<DeviceInfo> out;
  for (const auto& d : reply.devices()) out.push_back(from_proto(d));
  return out;
}

ServerStatus ServiceClient::status(const std::string& device_key) {
  rpc::StatusRequest request;
  request.set_device_key(device_key);
  rpc::StatusReply reply;
  auto ctx = impl_->context();
  const grpc::Status status = impl_->stub->Status(ctx.get(), request, &reply);
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED)
    throw Error(ErrorKind::kUnsupported, "the tuning server at " + impl_->options.server +
                                             " does not report its status (an older ktune)");
  impl_->check(status, "report its status");
  return from_proto(reply);
}

}  // namespace ktune::rpc_runner
