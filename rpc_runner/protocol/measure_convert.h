// Declares the one conversion between tuner::MeasureOptions and the service's MeasureSpec message.
#pragma once

#include "rpc_runner/protocol/ktune.pb.h"
#include "tuner/measure_options.h"

namespace ktune::rpc_runner {

// Apart from service_convert.h because a device without LLVM (ktune-device) reads MeasureSpec
// too, and links only the protocol's core.
void to_proto(const tuner::MeasureOptions& options, rpc::MeasureSpec* out);
tuner::MeasureOptions from_proto(const rpc::MeasureSpec& spec);

}  // namespace ktune::rpc_runner
