// Defines what the libFuzzer targets share: the small tasks configs are instantiated against, and
// input helpers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "schedule_space/task.h"

namespace ktune::fuzz {

// The fuzzer's bytes as text.
inline std::string as_text(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// A 128-bit, 2-core x86-64 target: small spaces with several vector widths (no LLVM needed).
inline schedule_space::TargetTraits small_traits() {
  return schedule_space::make_target_traits("fuzz-128", "x86_64-linux-gnu", 128, 2);
}

// One small task per built-in template (created once; Task is thread-safe and immutable), so
// a fuzzed config meets the template it names.
const std::vector<schedule_space::Task>& small_tasks();
// The small task of `template_name`, or the matmul one when there is none.
const schedule_space::Task& small_task(std::string_view template_name);

// Aborts (a crash libFuzzer reports) with `what` when `ok` is false: an invariant of ktune broke.
void require(bool ok, const char* what);

}  // namespace ktune::fuzz
