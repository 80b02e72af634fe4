// Defines where ktune puts a buffer in memory: a large one on a 2 MiB boundary, advised to
// transparent huge pages before its first touch.
#pragma once

#include <cstdint>
#include <memory>

namespace ktune {

// A buffer of at least this size starts on a 2 MiB boundary and is advised to transparent huge
// pages (madvise MADV_HUGEPAGE). Over 4 KiB pages a kernel streaming tens of MB (a model's
// weights, a Winograd layer's transformed weights) misses the TLB, and how much depends on the
// pages one process happens to get: ResNet-18's layers ran 3% faster on huge pages and moved by 2%
// across processes instead of 5%; a Winograd 7x7 C512 kernel and oneDNN's convolution beside it
// ran about 10% faster each, and the kernel's speed moved by 8% from one process to the next on
// 4 KiB pages. So every buffer a kernel is timed or shipped with is placed by this one rule.
inline constexpr int64_t kHugePageBytes = int64_t{2} << 20;

// madvise's MADV_HUGEPAGE on Linux (x86-64 and AArch64 alike).
inline constexpr int kMadvHugePage = 14;

// How a buffer of `bytes` is placed: huge buffers as above, others on `min_align` (a power of
// two: 64 for the kernel ABI, a page for a model's arena and weights).
struct BufferPlacement {
  int64_t align = 64;  // where it starts
  int64_t size = 64;   // what is allocated: a whole number of align, at least one
  bool huge = false;   // advised to huge pages
};
BufferPlacement buffer_placement(int64_t bytes, int64_t min_align);

// An uninitialised buffer of `bytes`, placed and advised as buffer_placement says (before anything
// touches it); free() it. Throws Error(kIo) when out of memory.
void* allocate_placed(int64_t bytes, int64_t min_align);

// An owning pointer to such a buffer.
struct FreePlaced {
  void operator()(void* p) const;
};
using PlacedBuffer = std::unique_ptr<void, FreePlaced>;
inline PlacedBuffer make_placed(int64_t bytes, int64_t min_align = 64) {
  return PlacedBuffer(allocate_placed(bytes, min_align));
}

}  // namespace ktune
