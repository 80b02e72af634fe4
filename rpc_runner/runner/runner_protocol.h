// Defines the messages between the local runner and its ktune-runner child process, and their
// framing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "support/error.h"
#include "tuner/measure_options.h"

namespace ktune::rpc_runner {

// The version every request carries (rpc_runner/proto/runner.proto); a runner of another version
// refuses the request.
inline constexpr uint32_t kRunnerProtocolVersion = 1;

// Parent -> child. kReference: compute and cache the reference outputs of a task.
// kMeasure: check a candidate against a cached reference and time it.
enum class RequestType : uint32_t { kReference = 1, kMeasure = 2 };

struct Request {
  RequestType type = RequestType::kMeasure;
  std::string reference_key;      // names the task's reference in the child's cache
  std::vector<uint8_t> artifact;  // codegen::Artifact::serialize()
  // kReference uses data_seed and run_threads; kMeasure all but the timeouts (the parent's).
  tuner::MeasureOptions measure;
};

// Child -> parent. `error` nullopt = success.
struct Reply {
  std::optional<ErrorKind> error;
  std::string message;
  std::vector<double> costs;  // seconds per run, one per repeat (kMeasure success)
  std::string outputs;        // with MeasureOptions::return_outputs: the output buffers
};

std::vector<uint8_t> encode(const Request& request);
// Throws Error(kIo) for a malformed message.
Request decode_request(const std::vector<uint8_t>& bytes);
std::vector<uint8_t> encode(const Reply& reply);
// Throws Error(kIo) for a malformed message.
Reply decode_reply(const std::vector<uint8_t>& bytes);

// Writes one frame (u64 length + bytes) to fd; throws Error(kIo) when the peer is gone.
// Uses send(MSG_NOSIGNAL) on sockets so a dead child never raises SIGPIPE in the tuner.
void write_frame(int fd, const std::vector<uint8_t>& bytes);
// Reads one frame. Returns nullopt on a clean EOF before the frame, throws Error(kIo) on a
// partial frame or read error; with deadline_ms >= 0 throws Error(kRunTimeout) when the
// frame has not arrived within deadline_ms milliseconds.
std::optional<std::vector<uint8_t>> read_frame(int fd, double deadline_ms = -1);

}  // namespace ktune::rpc_runner
