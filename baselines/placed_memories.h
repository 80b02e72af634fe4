// Defines PlacedMemories: oneDNN memories over buffers placed as every buffer ktune times.
#pragma once

#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "support/placed_buffer.h"

namespace ktune::baselines {

// Makes oneDNN memories whose buffers it owns, placed by support/placed_buffer.h (a large one on
// huge pages): in a race the library and a tuned kernel then read the same kind of pages, and
// neither's speed depends on which 4 KiB pages it happened to get. Keep it alive as long as the
// memories.
class PlacedMemories {
 public:
  dnnl::memory make(const dnnl::memory::desc& desc, const dnnl::engine& eng) {
    buffers_.push_back(make_placed(static_cast<int64_t>(desc.get_size())));
    return dnnl::memory(desc, eng, buffers_.back().get());
  }

 private:
  std::vector<PlacedBuffer> buffers_;
};

}  // namespace ktune::baselines
