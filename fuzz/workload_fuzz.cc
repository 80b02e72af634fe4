// libFuzzer target: a workload as the command line names it ("matmul M=64 N=64 K=64", one word
// per whitespace-separated token): parsed as `ktune tune/space/lower/best/build` parse it, then the
// task is created (space defined) and its fallback config instantiated.
#include <sstream>

#include "fuzz/fuzz_util.h"
#include "schedule_space/template_registry.h"
#include "support/error.h"

using namespace ktune;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(fuzz::as_text(data, size));
  std::string template_name;
  in >> template_name;
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  try {
    const auto args = schedule_space::parse_workload_args(template_name, words);
    const schedule_space::Task task =
        schedule_space::Task::create(template_name, args, fuzz::small_traits());
    fuzz::require(task.flop() >= 0, "a task's FLOP count is not negative");
    fuzz::require(task.space().size() >= 1, "a created task has a non-empty space");
    const schedule_space::Instantiated inst = task.instantiate(task.fallback_config());
    fuzz::require(!inst.args.empty(), "an instantiated task has kernel arguments");
  } catch (const Error&) {
  }
  return 0;
}
