// Runner requests and replies as protobuf messages (rpc_runner/proto/runner.proto), and
// length-prefixed framing over a socket.
#include "rpc_runner/runner/runner_protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "rpc_runner/runner/runner.pb.h"

namespace ktune::rpc_runner {
namespace {

constexpr uint64_t kMaxFrame = uint64_t{1} << 32;  // 4 GiB: far above any artifact

template <class Message>
std::vector<uint8_t> to_bytes(const Message& m) {
  std::vector<uint8_t> out(m.ByteSizeLong());
  if (!out.empty() && !m.SerializeToArray(out.data(), static_cast<int>(out.size())))
    throw Error(ErrorKind::kIo, "runner message: cannot serialize");
  return out;
}

template <class Message>
Message from_bytes(const std::vector<uint8_t>& bytes, const char* what) {
  Message m;
  if (bytes.size() > static_cast<size_t>(INT32_MAX) ||
      !m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    throw Error(ErrorKind::kIo, std::string("runner message: malformed ") + what);
  return m;
}

// The one converter of MeasureOptions to the runner child's form (runner.proto) and back. The
// timeouts stay with the parent, which enforces them.
void to_proto(const tuner::MeasureOptions& o, rpc::RunnerRequest* out) {
  out->set_data_seed(o.data_seed);
  rpc::RunnerTiming* timing = out->mutable_timing();
  timing->set_number(o.number);
  timing->set_repeat(o.repeat);
  timing->set_min_repeat_ms(o.min_repeat_ms);
  timing->set_cooldown_s(o.cooldown_s);
  timing->set_flush_cache(o.flush_cache);
  timing->set_check_correctness(o.check_correctness);
  timing->set_rtol(o.rtol);
  timing->set_atol(o.atol);
  timing->set_threads(o.run_threads);
  timing->set_return_outputs(o.return_outputs);
}

tuner::MeasureOptions from_proto(const rpc::RunnerRequest& in) {
  tuner::MeasureOptions o;
  const rpc::RunnerTiming& t = in.timing();
  o.number = t.number();
  o.repeat = t.repeat();
  o.min_repeat_ms = t.min_repeat_ms();
  o.cooldown_s = t.cooldown_s();
  o.flush_cache = t.flush_cache();
  o.check_correctness = t.check_correctness();
  o.rtol = t.rtol();
  o.atol = t.atol();
  o.run_threads = t.threads();
  o.return_outputs = t.return_outputs();
  o.data_seed = in.data_seed();
  return o;
}

}  // namespace

std::vector<uint8_t> encode(const Request& r) {
  rpc::RunnerRequest m;
  m.set_protocol_version(kRunnerProtocolVersion);
  m.set_type(r.type == RequestType::kReference ? rpc::RunnerRequest::REFERENCE
                                               : rpc::RunnerRequest::MEASURE);
  m.set_reference_key(r.reference_key);
  m.set_artifact(r.artifact.data(), r.artifact.size());
  to_proto(r.measure, &m);
  return to_bytes(m);
}

Request decode_request(const std::vector<uint8_t>& bytes) {
  const auto m = from_bytes<rpc::RunnerRequest>(bytes, "request");
  if (m.protocol_version() != kRunnerProtocolVersion)
    throw Error(ErrorKind::kIo,
                "runner message: protocol version " + std::to_string(m.protocol_version()) +
                    ", this runner speaks version " + std::to_string(kRunnerProtocolVersion));
  Request r;
  if (m.type() == rpc::RunnerRequest::REFERENCE)
    r.type = RequestType::kReference;
  else if (m.type() == rpc::RunnerRequest::MEASURE)
    r.type = RequestType::kMeasure;
  else
    throw Error(ErrorKind::kIo, "runner message: bad request type");
  r.reference_key = m.reference_key();
  r.artifact.assign(m.artifact().begin(), m.artifact().end());
  r.measure = from_proto(m);
  return r;
}

std::vector<uint8_t> encode(const Reply& r) {
  rpc::RunnerReply m;
  if (r.error) m.set_error_kind(std::string(to_string(*r.error)));
  m.set_message(r.message);
  for (double c : r.costs) m.add_costs(c);
  m.set_outputs(r.outputs);
  return to_bytes(m);
}

Reply decode_reply(const std::vector<uint8_t>& bytes) {
  const auto m = from_bytes<rpc::RunnerReply>(bytes, "reply");
  Reply r;
  if (!m.error_kind().empty()) {
    try {
      r.error = error_kind_from_string(m.error_kind());
    } catch (const Error&) {
      throw Error(ErrorKind::kIo, "runner message: bad error kind '" + m.error_kind() + "'");
    }
  }
  r.message = m.message();
  r.costs.assign(m.costs().begin(), m.costs().end());
  r.outputs = m.outputs();
  return r;
}

void write_frame(int fd, const std::vector<uint8_t>& bytes) {
  uint64_t n = bytes.size();
  auto put = [fd](const uint8_t* p, size_t len) {
    while (len > 0) {
      ssize_t k = ::send(fd, p, len, MSG_NOSIGNAL);
      if (k < 0 && errno == ENOTSOCK) k = ::write(fd, p, len);
      if (k < 0) {
        if (errno == EINTR) continue;
        throw Error(ErrorKind::kIo, std::string("runner pipe write: ") + std::strerror(errno));
      }
      p += k;
      len -= static_cast<size_t>(k);
    }
  };
  uint8_t prefix[8];  // the length, little-endian whatever the host
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<uint8_t>(n >> (8 * i));
  put(prefix, sizeof prefix);
  put(bytes.data(), bytes.size());
}

std::optional<std::vector<uint8_t>> read_frame(int fd, double deadline_ms) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Returns bytes read; 0 only on EOF.
  auto get = [&](uint8_t* p, size_t len) -> size_t {
    size_t got = 0;
    while (got < len) {
      if (deadline_ms >= 0) {
        double left =
            deadline_ms - std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        if (left <= 0) throw Error(ErrorKind::kRunTimeout, "runner reply timed out");
        pollfd pfd{fd, POLLIN, 0};
        int rc = ::poll(&pfd, 1, static_cast<int>(left) + 1);
        if (rc < 0 && errno != EINTR)
          throw Error(ErrorKind::kIo, std::string("runner pipe poll: ") + std::strerror(errno));
        if (rc <= 0) continue;
      }
      ssize_t k = ::read(fd, p + got, len - got);
      if (k < 0) {
        if (errno == EINTR) continue;
        throw Error(ErrorKind::kIo, std::string("runner pipe read: ") + std::strerror(errno));
      }
      if (k == 0) return got;
      got += static_cast<size_t>(k);
    }
    return got;
  };
  uint8_t prefix[8];
  size_t got = get(prefix, sizeof prefix);
  if (got == 0) return std::nullopt;
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{prefix[i]} << (8 * i);
  if (got < sizeof prefix || n > kMaxFrame)
    throw Error(ErrorKind::kIo, "runner pipe: broken frame");
  // Grown as the bytes arrive (1 MiB at a time): a corrupt length must not allocate and zero up to
  // 4 GiB before the first byte of the body is read (found by fuzz/runner_protocol_fuzz).
  constexpr uint64_t kChunk = uint64_t{1} << 20;
  std::vector<uint8_t> bytes;
  while (bytes.size() < n) {
    const size_t have = bytes.size();
    const auto want = static_cast<size_t>(std::min<uint64_t>(n - have, kChunk));
    bytes.resize(have + want);
    if (get(bytes.data() + have, want) < want)
      throw Error(ErrorKind::kIo, "runner pipe: truncated frame");
  }
  return bytes;
}

}  // namespace ktune::rpc_runner
