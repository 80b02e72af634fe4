// Google Benchmark program: what one candidate costs before it runs, on matmul 1024^3 —
// picking a config from the space, instantiating the template, lowering, and the LLVM build.
// Last line: `build_ms <median LLVM build time of one candidate, in ms>`.
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "codegen/codegen_llvm.h"
#include "codegen/target.h"
#include "schedule_space/task.h"
#include "te/lower.h"

namespace {

using ktune::schedule_space::Task;

const ktune::codegen::Target& host() {
  static const ktune::codegen::Target target = ktune::codegen::Target::host();
  return target;
}

const Task& matmul_task() {
  static const Task task =
      Task::create("matmul", {{"M", "1024"}, {"N", "1024"}, {"K", "1024"}},
                   ktune::schedule_space::make_target_traits(host().str(), host().triple(),
                                                             host().vector_bits(), host().cores()));
  return task;
}

// Valid configs drawn once, so every benchmark walks the same candidates.
const std::vector<uint64_t>& candidates() {
  static const std::vector<uint64_t> indices = [] {
    std::mt19937_64 rng(7);
    return matmul_task().space().sample(64, rng);
  }();
  return indices;
}

void BM_SpaceGet(benchmark::State& state) {
  const auto& space = matmul_task().space();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(space.get(candidates()[i++ % candidates().size()]));
  }
}
BENCHMARK(BM_SpaceGet);

void BM_SpaceNeighbour(benchmark::State& state) {
  const auto& space = matmul_task().space();
  std::mt19937_64 rng(3);
  uint64_t index = candidates().front();
  for (auto _ : state) {
    index = space.neighbour(index, rng);
    benchmark::DoNotOptimize(index);
  }
}
BENCHMARK(BM_SpaceNeighbour);

void BM_InstantiateAndLower(benchmark::State& state) {
  const Task& task = matmul_task();
  size_t i = 0;
  for (auto _ : state) {
    auto inst = task.instantiate(task.space().get(candidates()[i++ % candidates().size()]));
    benchmark::DoNotOptimize(ktune::te::lower(inst.schedule, inst.args, "matmul"));
  }
  state.SetLabel("per config");
}
BENCHMARK(BM_InstantiateAndLower)->Unit(benchmark::kMillisecond);

void BM_LlvmBuild(benchmark::State& state) {
  const Task& task = matmul_task();
  std::vector<ktune::te::LoweredFunc> funcs;
  for (size_t i = 0; i < 8; ++i) {
    auto inst = task.instantiate(task.space().get(candidates()[i]));
    funcs.push_back(ktune::te::lower(inst.schedule, inst.args, "matmul"));
  }
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(ktune::codegen::build(funcs[i++ % funcs.size()], host()));
  }
  state.SetLabel("LLVM O3 + object emission per kernel");
}
BENCHMARK(BM_LlvmBuild)->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly(true);

// Keeps what the console reporter shows and remembers the LLVM build median.
class HeadlineReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name == "median" &&
          run.run_name.function_name == "BM_LlvmBuild") {
        build_ms = run.GetAdjustedRealTime();  // in the benchmark's unit: milliseconds
        build_cpu_ms = run.GetAdjustedCPUTime();
      }
    }
  }
  double build_ms = -1;
  double build_cpu_ms = -1;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  HeadlineReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  std::printf("median LLVM build of one candidate: %.2f ms wall, %.2f ms CPU\n", reporter.build_ms,
              reporter.build_cpu_ms);
  std::printf("build_ms %.2f\n", reporter.build_ms);
  return reporter.build_ms < 0 ? 1 : 0;
}
