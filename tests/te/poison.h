// Defines poison(): fills a kernel's output buffer with NaN so that an element it never writes
// fails the check.
#pragma once

#include <cstring>

#include "te/host_buffer.h"

namespace ktune::te::testing {

// Every byte 0xFF: NaN for float outputs (max_relative_error counts a NaN against a number as an
// infinite error), -1 for integer ones. HostBuffer starts zeroed, which a kernel that skips an
// element of a zero-valued output (a ReLU, a padded border) would pass unnoticed.
inline void poison(HostBuffer& b) { std::memset(b.data(), 0xFF, b.bytes()); }

}  // namespace ktune::te::testing
