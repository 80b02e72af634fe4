// Defines kProtocolVersion, the version of the tuning service's wire contract (proto/ktune.proto).
#pragma once

#include <cstdint>

namespace ktune::rpc_runner {

// Workers and clients of another version are refused with a message naming both.
// 3: workers say whether they are emulated; the server canonicalizes a worker's target and
//    sends devices that cannot build linked shared objects (not relocatable objects).
inline constexpr uint32_t kProtocolVersion = 3;

}  // namespace ktune::rpc_runner
