// libFuzzer target: what the tuning server reads from the network and its own log. The first byte
// picks what the rest is:
//   0: a SubmitJob request (rpc::JobSpec bytes): converted and validated as the server does,
//   1: a worker's stream message (rpc::WorkerMessage): a result converted as the server does,
//   2: a job spec as the server's log keeps it (JSON), restored and validated,
//   3: a QueryBest request / job event as a client converts them.
#include "fuzz/fuzz_util.h"
#include "rpc_runner/protocol/job_types.h"
#include "rpc_runner/protocol/ktune.pb.h"
#include "rpc_runner/protocol/service_convert.h"
#include "rpc_runner/server/fleet_measurer.h"
#include "support/error.h"
#include "support/json_input.h"

using namespace ktune;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t* body = data + 1;
  const int n = static_cast<int>(size - 1);
  try {
    switch (data[0] % 4) {
      case 0: {
        rpc::JobSpec m;
        if (!m.ParseFromArray(body, n)) return 0;
        rpc_runner::JobSpec spec = rpc_runner::from_proto(m);
        spec.validate();
        // A spec the server accepted is stored as JSON and must come back the same on restart.
        const auto again = rpc_runner::JobSpec::from_json(spec.to_json());
        fuzz::require(again.to_json() == spec.to_json(), "job spec JSON round trip");
        again.validate();
        break;
      }
      case 1: {
        rpc::WorkerMessage m;
        if (!m.ParseFromArray(body, n)) return 0;
        if (m.has_result()) {
          const tuner::MeasureResult r = rpc_runner::from_proto(m.result());
          fuzz::require(m.result().error_kind().empty() || !r.ok(),
                        "a result with an error kind is an error");
        }
        break;
      }
      case 2: {
        const auto j =
            parse_json_input(std::string_view(reinterpret_cast<const char*>(body), n), "job spec");
        rpc_runner::JobSpec::from_json(j).validate();
        break;
      }
      case 3: {
        rpc::JobEvent m;
        if (!m.ParseFromArray(body, n)) return 0;
        (void)rpc_runner::from_proto(m);
        break;
      }
    }
  } catch (const Error&) {
  }
  return 0;
}
