// What one LLVM session saves when several kernels are built together (`ktune build --manifest`):
// codegen::build_all (one context, one target machine) against codegen::build per kernel, on the
// fallback configs of a mix of workloads, interleaved round by round.
// Last line: `build_all_speedup <median of per-round (separate time / together time)>`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "codegen/codegen_llvm.h"
#include "codegen/target.h"
#include "schedule_space/task.h"
#include "te/lower.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main() {
  namespace ss = ktune::schedule_space;
  const ktune::codegen::Target target = ktune::codegen::Target::host();
  const auto traits =
      ss::make_target_traits(target.str(), target.triple(), target.vector_bits(), target.cores());
  // examples/consumer's three layers and five more shapes of other templates.
  const std::vector<std::pair<std::string, std::vector<std::string>>> workloads = {
      {"dense_bias_relu", {"M=32", "N=256", "K=128"}},
      {"dense_bias_relu", {"M=32", "N=128", "K=256"}},
      {"matmul", {"M=32", "N=16", "K=128"}},
      {"matmul", {"M=256", "N=256", "K=256"}},
      {"conv2d_nchwc", {"C=32", "H=14", "W=14", "K=32"}},
      {"depthwise_conv2d", {"C=32", "H=28", "W=28"}},
      {"batch_matmul", {"batch=4", "M=64", "N=64", "K=64"}},
      {"max_pool2d", {"C=16", "H=28", "W=28"}},
  };
  std::vector<ktune::te::LoweredFunc> funcs;
  for (size_t i = 0; i < workloads.size(); ++i) {
    const auto& [name, words] = workloads[i];
    const ss::Task task = ss::Task::create(name, ss::parse_workload_args(name, words), traits);
    const ss::Instantiated inst = task.instantiate(task.fallback_config());
    funcs.push_back(ktune::te::lower(inst.schedule, inst.args, "k" + std::to_string(i)));
  }
  (void)ktune::codegen::build_all(funcs, target);  // warm-up: LLVM's one-time initialization
  const int rounds = 9;
  std::vector<double> separate, together, ratios;
  std::printf("%d kernels, %d rounds (interleaved, alternating which goes first)\n",
              int(funcs.size()), rounds);
  std::printf("%-6s %14s %14s %8s\n", "round", "separate_ms", "together_ms", "ratio");
  for (int r = 0; r < rounds; ++r) {
    double s = 0, t = 0;
    for (int order = 0; order < 2; ++order) {
      if ((order == 0) == (r % 2 == 0)) {
        const auto t0 = Clock::now();
        for (const auto& f : funcs) (void)ktune::codegen::build(f, target);
        s = ms_since(t0);
      } else {
        const auto t0 = Clock::now();
        (void)ktune::codegen::build_all(funcs, target);
        t = ms_since(t0);
      }
    }
    separate.push_back(s);
    together.push_back(t);
    ratios.push_back(s / t);
    std::printf("%-6d %14.1f %14.1f %8.3f\n", r, s, t, s / t);
  }
  std::printf("median separate %.1f ms, together %.1f ms\n", median(separate), median(together));
  std::printf("build_all_speedup %.3f\n", median(ratios));
  return 0;
}
