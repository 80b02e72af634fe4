// Implements buffer_placement and allocate_placed.
#include "support/placed_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "support/error.h"

namespace ktune {

BufferPlacement buffer_placement(int64_t bytes, int64_t min_align) {
  BufferPlacement p;
  p.huge = bytes >= kHugePageBytes;
  p.align = p.huge ? kHugePageBytes : min_align;
  p.size = std::max<int64_t>(p.align, (bytes + p.align - 1) / p.align * p.align);
  return p;
}

void* allocate_placed(int64_t bytes, int64_t min_align) {
  const BufferPlacement p = buffer_placement(bytes, min_align);
  void* b = std::aligned_alloc(static_cast<size_t>(p.align), static_cast<size_t>(p.size));
  if (!b)
    throw Error(ErrorKind::kIo,
                "out of memory for a buffer of " + std::to_string(bytes) + " bytes");
  // Advice only: a kernel without transparent huge pages refuses it, and the buffer still works.
  if (p.huge) (void)madvise(b, static_cast<size_t>(p.size), kMadvHugePage);
  return b;
}

void FreePlaced::operator()(void* p) const { std::free(p); }

}  // namespace ktune
