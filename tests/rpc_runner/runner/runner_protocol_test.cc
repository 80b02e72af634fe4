// Tests of the runner protocol: protobuf round trips of every field, refusal of malformed bytes and
// of another protocol version, and framing over a socket pair.
#include "rpc_runner/runner/runner_protocol.h"

#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "rpc_runner/runner/runner.pb.h"

namespace ktune::rpc_runner {
namespace {

Request full_request() {
  Request r;
  r.type = RequestType::kReference;
  r.reference_key = "matmul(M=64,N=64,K=64)|llvm -mtriple=x86_64-linux-gnu";
  r.artifact = {0, 1, 2, 255, 0, 42};
  r.measure.data_seed = 0xDEADBEEFCAFEull;
  r.measure.number = 7;
  r.measure.repeat = 5;
  r.measure.min_repeat_ms = 12.5;
  r.measure.cooldown_s = 0.25;
  r.measure.flush_cache = true;
  r.measure.check_correctness = false;
  r.measure.rtol = 3e-3;
  r.measure.atol = 2e-6;
  r.measure.run_threads = 3;
  return r;
}

TEST(RunnerProtocol, ARequestSurvivesTheRoundTripFieldByField) {
  const Request in = full_request();
  const Request out = decode_request(encode(in));
  EXPECT_EQ(out.type, RequestType::kReference);
  EXPECT_EQ(out.reference_key, in.reference_key);
  EXPECT_EQ(out.artifact, in.artifact);
  EXPECT_EQ(out.measure.data_seed, in.measure.data_seed);
  EXPECT_EQ(out.measure.number, 7);
  EXPECT_EQ(out.measure.repeat, 5);
  EXPECT_DOUBLE_EQ(out.measure.min_repeat_ms, 12.5);
  EXPECT_DOUBLE_EQ(out.measure.cooldown_s, 0.25);
  EXPECT_TRUE(out.measure.flush_cache);
  EXPECT_FALSE(out.measure.check_correctness);
  EXPECT_DOUBLE_EQ(out.measure.rtol, 3e-3);
  EXPECT_DOUBLE_EQ(out.measure.atol, 2e-6);
  EXPECT_EQ(out.measure.run_threads, 3);
  Request measure = in;
  measure.type = RequestType::kMeasure;
  EXPECT_EQ(decode_request(encode(measure)).type, RequestType::kMeasure);
}

TEST(RunnerProtocol, RepliesKeepTheirErrorKindAndCosts) {
  Reply ok;
  ok.costs = {1.5e-3, 1.25e-3, 1.75e-3};
  const Reply back = decode_reply(encode(ok));
  EXPECT_FALSE(back.error.has_value());
  EXPECT_EQ(back.costs, ok.costs);
  for (ErrorKind kind : {ErrorKind::kBuild, ErrorKind::kRun, ErrorKind::kRunTimeout,
                         ErrorKind::kWrongAnswer, ErrorKind::kUnknown}) {
    Reply failed;
    failed.error = kind;
    failed.message = "element 3: 1.0 vs 2.0";
    const Reply r = decode_reply(encode(failed));
    ASSERT_TRUE(r.error.has_value());
    EXPECT_EQ(*r.error, kind);
    EXPECT_EQ(r.message, failed.message);
    EXPECT_TRUE(r.costs.empty());
  }
}

TEST(RunnerProtocol, MalformedBytesAndAnotherVersionAreRefused) {
  const std::vector<uint8_t> garbage = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x01};
  try {
    decode_request(garbage);
    ADD_FAILURE() << "garbage decoded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
  }
  EXPECT_THROW(decode_reply(garbage), Error);
  rpc::RunnerRequest old;
  old.set_protocol_version(kRunnerProtocolVersion + 7);
  old.set_type(rpc::RunnerRequest::MEASURE);
  const std::string bytes = old.SerializeAsString();
  try {
    decode_request(std::vector<uint8_t>(bytes.begin(), bytes.end()));
    ADD_FAILURE() << "another version decoded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    const std::string message = e.what();
    EXPECT_NE(message.find(std::to_string(kRunnerProtocolVersion + 7)), std::string::npos)
        << message;
    EXPECT_NE(message.find("version " + std::to_string(kRunnerProtocolVersion)), std::string::npos)
        << message;
  }
  rpc::RunnerReply bad_kind;
  bad_kind.set_error_kind("exploded");
  const std::string reply = bad_kind.SerializeAsString();
  EXPECT_THROW(decode_reply(std::vector<uint8_t>(reply.begin(), reply.end())), Error);
}

TEST(RunnerProtocol, FramesCrossASocketPairIntact) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  const std::vector<uint8_t> encoded = encode(full_request());
  write_frame(fds[0], encoded);
  write_frame(fds[0], {});
  auto first = read_frame(fds[1], 1000);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(decode_request(*first).reference_key, full_request().reference_key);
  auto empty = read_frame(fds[1], 1000);
  ASSERT_TRUE(empty.has_value());
  EXPECT_TRUE(empty->empty());
  ::close(fds[0]);
  EXPECT_FALSE(read_frame(fds[1], 1000).has_value());  // clean EOF
  ::close(fds[1]);
}

// Peak resident memory of this process in KiB (VmHWM).
long peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

// Found by fuzz/runner_protocol_fuzz: a frame whose length says 4 GiB made read_frame allocate and
// zero 4 GiB before reading a byte of it. Now the truncated frame is refused with little memory.
TEST(RunnerProtocol, AHugeFrameLengthAllocatesOnlyWhatArrives) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  const uint64_t claimed = (uint64_t{1} << 32) - 4096;
  uint8_t prefix[8 + 3];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<uint8_t>(claimed >> (8 * i));
  prefix[8] = prefix[9] = prefix[10] = 7;
  ASSERT_EQ(::write(fds[0], prefix, sizeof prefix), static_cast<ssize_t>(sizeof prefix));
  ::close(fds[0]);
  const long before = peak_rss_kib();
  try {
    read_frame(fds[1], 5000);
    ADD_FAILURE() << "a truncated frame was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(std::string(e.what()).find("truncated frame"), std::string::npos) << e.what();
  }
  ::close(fds[1]);
  EXPECT_LT(peak_rss_kib() - before, 64 * 1024)
      << "KiB of peak memory grew reading an 11-byte stream";
}

}  // namespace
}  // namespace ktune::rpc_runner
