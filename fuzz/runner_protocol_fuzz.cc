// libFuzzer target: the local runner's protocol. The first byte picks what the rest is:
//   0: a request frame body (decode_request, then the artifact it carries),
//   1: a reply frame body (decode_reply),
//   2: an artifact blob whose checksum this target appends (so the fuzzer reaches the signature),
//      then sized as the runner child sizes its buffers,
//   3: raw bytes on the runner pipe (read_frame until EOF or a typed error).
#include <fcntl.h>
#include <unistd.h>

#include "codegen/artifact.h"
#include "fuzz/fuzz_util.h"
#include "rpc_runner/runner/runner_protocol.h"
#include "support/error.h"

using namespace ktune;

namespace {

// The artifact format's trailing checksum (FNV-1a 64 over the body, little-endian): appended here
// so that mutations exercise the fields rather than all failing the checksum.
std::vector<uint8_t> with_checksum(std::vector<uint8_t> body) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : body) h = (h ^ b) * 1099511628211ull;
  for (int i = 0; i < 8; ++i) body.push_back(static_cast<uint8_t>(h >> (8 * i)));
  return body;
}

void check_artifact(const std::vector<uint8_t>& blob) {
  const codegen::Artifact a = codegen::Artifact::deserialize(blob);
  for (const codegen::ArgSpec& s : a.signature) {
    const int64_t bytes = s.num_elements() * s.element_bytes();  // what the runner allocates
    fuzz::require(bytes >= 0, "an accepted artifact's buffer size is not negative");
  }
  fuzz::require(codegen::Artifact::deserialize(a.serialize()) == a, "artifact round trip");
}

void read_pipe(const std::vector<uint8_t>& bytes) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  // A pipe holds 64 KiB; libFuzzer's default inputs are far smaller.
  const size_t n = std::min<size_t>(bytes.size(), 60000);
  if (n > 0 && ::write(fds[1], bytes.data(), n) != static_cast<ssize_t>(n))
    fuzz::require(false, "pipe write");
  ::close(fds[1]);
  try {
    while (auto frame = rpc_runner::read_frame(fds[0], 1000)) {
      try {
        (void)rpc_runner::decode_reply(*frame);
      } catch (const Error&) {
      }
    }
  } catch (const Error&) {
  }
  ::close(fds[0]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::vector<uint8_t> rest(data + 1, data + size);
  try {
    switch (data[0] % 4) {
      case 0: {
        const rpc_runner::Request r = rpc_runner::decode_request(rest);
        fuzz::require(rpc_runner::decode_request(rpc_runner::encode(r)).artifact == r.artifact,
                      "request round trip");
        if (!r.artifact.empty()) check_artifact(r.artifact);
        break;
      }
      case 1: {
        const rpc_runner::Reply r = rpc_runner::decode_reply(rest);
        fuzz::require(
            rpc_runner::decode_reply(rpc_runner::encode(r)).costs.size() == r.costs.size(),
            "reply round trip");
        break;
      }
      case 2:
        check_artifact(with_checksum(rest));
        break;
      case 3:
        read_pipe(rest);
        break;
    }
  } catch (const Error&) {
  }
  return 0;
}
