// Binary encoding of runner requests and replies (little-endian host layout: both ends are the
// same binary build on the same machine), and length-prefixed framing over a socket.
#include "rpc_runner/runner_protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace ktune::rpc_runner {
namespace {

constexpr uint64_t kMaxFrame = uint64_t{1} << 32;  // 4 GiB: far above any artifact

class Writer {
 public:
  template <typename T>
  void pod(const T& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void bytes(const void* data, size_t n) {
    pod<uint64_t>(n);
    const auto* p = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), p, p + n);
  }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& in) : in_(in) {}
  template <typename T>
  T pod() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::vector<uint8_t> bytes() {
    uint64_t n = pod<uint64_t>();
    need(n);
    std::vector<uint8_t> v(in_.begin() + pos_, in_.begin() + pos_ + n);
    pos_ += n;
    return v;
  }
  std::string str() {
    auto b = bytes();
    return std::string(b.begin(), b.end());
  }
  void finish() const {
    if (pos_ != in_.size()) throw Error(ErrorKind::kIo, "runner message: trailing bytes");
  }

 private:
  void need(uint64_t n) const {
    if (n > in_.size() - pos_) throw Error(ErrorKind::kIo, "runner message: truncated");
  }
  const std::vector<uint8_t>& in_;
  size_t pos_ = 0;
};

constexpr int32_t kNoError = -1;

}  // namespace

std::vector<uint8_t> encode(const Request& r) {
  Writer w;
  w.pod(static_cast<uint32_t>(r.type));
  w.bytes(r.reference_key.data(), r.reference_key.size());
  w.bytes(r.artifact.data(), r.artifact.size());
  w.pod(r.data_seed);
  const TimingOptions& t = r.timing;
  w.pod(t.number);
  w.pod(t.repeat);
  w.pod(t.min_repeat_ms);
  w.pod(t.cooldown_s);
  w.pod(static_cast<uint8_t>(t.flush_cache));
  w.pod(static_cast<uint8_t>(t.check_correctness));
  w.pod(t.rtol);
  w.pod(t.atol);
  w.pod(t.threads);
  return w.take();
}

Request decode_request(const std::vector<uint8_t>& bytes) {
  Reader rd(bytes);
  Request r;
  uint32_t type = rd.pod<uint32_t>();
  if (type != 1 && type != 2) throw Error(ErrorKind::kIo, "runner message: bad request type");
  r.type = static_cast<RequestType>(type);
  r.reference_key = rd.str();
  r.artifact = rd.bytes();
  r.data_seed = rd.pod<uint64_t>();
  TimingOptions& t = r.timing;
  t.number = rd.pod<int32_t>();
  t.repeat = rd.pod<int32_t>();
  t.min_repeat_ms = rd.pod<double>();
  t.cooldown_s = rd.pod<double>();
  t.flush_cache = rd.pod<uint8_t>() != 0;
  t.check_correctness = rd.pod<uint8_t>() != 0;
  t.rtol = rd.pod<double>();
  t.atol = rd.pod<double>();
  t.threads = rd.pod<int32_t>();
  rd.finish();
  return r;
}

std::vector<uint8_t> encode(const Reply& r) {
  Writer w;
  w.pod<int32_t>(r.error ? static_cast<int32_t>(*r.error) : kNoError);
  w.bytes(r.message.data(), r.message.size());
  w.bytes(r.costs.data(), r.costs.size() * sizeof(double));
  return w.take();
}

Reply decode_reply(const std::vector<uint8_t>& bytes) {
  Reader rd(bytes);
  Reply r;
  int32_t kind = rd.pod<int32_t>();
  if (kind != kNoError) {
    if (kind < 0 || kind > static_cast<int32_t>(ErrorKind::kUnknown))
      throw Error(ErrorKind::kIo, "runner message: bad error kind");
    r.error = static_cast<ErrorKind>(kind);
  }
  r.message = rd.str();
  auto raw = rd.bytes();
  if (raw.size() % sizeof(double)) throw Error(ErrorKind::kIo, "runner message: bad costs");
  r.costs.resize(raw.size() / sizeof(double));
  if (!raw.empty()) std::memcpy(r.costs.data(), raw.data(), raw.size());
  rd.finish();
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
  put(reinterpret_cast<const uint8_t*>(&n), sizeof n);
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
        double left = deadline_ms - std::chrono::duration<double, std::milli>(Clock::now() - start).count();
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
  uint64_t n = 0;
  size_t got = get(reinterpret_cast<uint8_t*>(&n), sizeof n);
  if (got == 0) return std::nullopt;
  if (got < sizeof n || n > kMaxFrame) throw Error(ErrorKind::kIo, "runner pipe: broken frame");
  std::vector<uint8_t> bytes(n);
  if (get(bytes.data(), n) < n) throw Error(ErrorKind::kIo, "runner pipe: truncated frame");
  return bytes;
}

}  // namespace ktune::rpc_runner
