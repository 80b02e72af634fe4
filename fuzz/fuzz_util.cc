// The small tasks of the fuzz targets and their invariant check.
#include "fuzz/fuzz_util.h"

#include <cstdio>
#include <cstdlib>

namespace ktune::fuzz {

const std::vector<schedule_space::Task>& small_tasks() {
  static const std::vector<schedule_space::Task> tasks = [] {
    const auto t = small_traits();
    return std::vector<schedule_space::Task>{
        schedule_space::Task::create("matmul", {{"M", "8"}, {"N", "16"}, {"K", "8"}}, t),
        schedule_space::Task::create("dense_bias_relu", {{"M", "4"}, {"N", "16"}, {"K", "8"}}, t),
        schedule_space::Task::create("batch_matmul",
                                     {{"batch", "3"}, {"M", "4"}, {"N", "8"}, {"K", "6"}}, t),
        schedule_space::Task::create(
            "conv2d", {{"C", "2"}, {"H", "9"}, {"W", "9"}, {"K", "2"}, {"pad", "1"}}, t),
        schedule_space::Task::create("depthwise_conv2d",
                                     {{"C", "4"}, {"H", "8"}, {"W", "8"}, {"pad", "1"}}, t),
        schedule_space::Task::create(
            "max_pool2d", {{"C", "4"}, {"H", "9"}, {"W", "9"}, {"R", "3"}, {"S", "3"}}, t),
        schedule_space::Task::create("conv2d_nchwc",
                                     {{"C", "4"},
                                      {"H", "2"},
                                      {"W", "4"},
                                      {"K", "8"},
                                      {"pad", "1"},
                                      {"ic_block", "4"},
                                      {"oc_block", "8"}},
                                     t),
    };
  }();
  return tasks;
}

const schedule_space::Task& small_task(std::string_view template_name) {
  for (const auto& task : small_tasks())
    if (task.template_name() == template_name) return task;
  return small_tasks().front();
}

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

}  // namespace ktune::fuzz
