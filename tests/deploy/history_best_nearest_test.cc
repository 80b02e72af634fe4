// On a shape nobody tuned, the kernel apply_history_best builds from the nearest
// tuned workload runs faster than the template's fallback. A real tuning run (`ktune tune`) of one
// max_pool2d shape, then its untuned neighbour's nearest kernel and fallback kernel timed in turns.
#include <gtest/gtest.h>

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "codegen/codegen_llvm.h"
#include "codegen/target.h"
#include "deploy/history_best.h"
#include "te/lower.h"
#include "tests/rpc_runner/server/service_test_util.h"
#include "tests/schedule_space/template_cases.h"

#define KTUNE_BINARY KTUNE_BIN
#include "tests/cli_util.h"

namespace ktune {
namespace {

// CPU seconds of this process (every thread) per call of the kernel: calls repeated until 10 ms
// of CPU time have passed, averaged. CPU time, not wall time: on this shared machine (load 10+
// on 2 cores) a wall-clock window counts the time the scheduler gave to others, which swamps the
// kernel's own. A parallel kernel's workers count too, so a parallel config is not favoured.
double cpu_seconds_per_call(const codegen::Kernel& kernel, const std::vector<void*>& args) {
  auto now = [] {
    timespec t{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  int64_t calls = 0;
  const double start = now();
  double elapsed = 0;
  do {
    kernel.run(args);
    ++calls;
    elapsed = now() - start;
  } while (elapsed < 0.01);
  return elapsed / static_cast<double>(calls);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// max_pool2d's fallback leaves the most room of the templates (bench/fallback_headroom max_pool2d
// C=64 H=56 W=56: a random sample's best 6.9x the fallback). The untuned shape differs in channels
// only (distance 0.42), and the tuned tiles carry over. Six runs of this test at load 9.3-9.6 on
// 2 cores gave 5.65x to 7.07x; the 2x asserted is far inside that.
TEST(HistoryBestNearest, TheNearestTunedConfigBeatsTheFallbackOnAnUntunedShape) {
  rpc_runner::testing::TempDir dir;
  const std::string log = dir.file("pool.db");
  // One core: on this shared machine a parallel config's timing is a lottery (the tuning run
  // picked a 2-thread config that runs at the fallback's speed in 2 of 5 runs), and a JIT user
  // who runs kernels on one thread asks for exactly this target.
  const std::string target = codegen::Target::host().str() + " -num-cores=1";
  const auto tuned = testing_cli::ktune(
      "tune max_pool2d C=64 H=56 W=56 --tuner random --trials 24 --seed 1 --db " +
          testing_cli::quote(log) + " --target " + testing_cli::quote(target),
      true);
  ASSERT_EQ(tuned.status, 0) << tuned.out << tuned.err;

  const schedule_space::Task task =
      make_task("max_pool2d", {{"C", "48"}, {"H", "56"}, {"W", "56"}}, target);
  const AppliedKernel nearest = apply_history_best(HistorySource::log(log), task);
  ASSERT_EQ(nearest.source, AppliedKernel::Source::kNearest) << nearest.note;
  const auto tuned_task = make_task("max_pool2d", {{"C", "64"}, {"H", "56"}, {"W", "56"}}, target);
  EXPECT_EQ(nearest.record->workload_key, tuned_task.workload_key());
  ASSERT_NE(nearest.config.index(), task.fallback_config().index())
      << "the tuned config is the fallback's";

  const schedule_space::Instantiated inst = task.instantiate(task.fallback_config());
  const codegen::Kernel fallback = codegen::Kernel::load(codegen::build(
      te::lower(inst.schedule, inst.args, "fallback"), codegen::Target::parse(target)));

  // Both compute the reference (outputs pre-filled with NaN); then the same buffers are timed.
  const schedule_space::testing::Oracle oracle(task, 3);
  EXPECT_LT(oracle.check([&](const std::vector<void*>& a) { EXPECT_EQ(fallback.run(a), 0); }),
            1e-6);
  EXPECT_LT(oracle.check([&](const std::vector<void*>& a) { EXPECT_EQ(nearest.kernel.run(a), 0); }),
            1e-6);

  const schedule_space::ComputeDef def = task.template_def().compute(task.args());
  std::vector<te::HostBuffer> bufs;
  for (size_t i = 0; i < def.args.size(); ++i) {
    bufs.emplace_back(def.args[i].shape(), def.args[i].dtype());
    bufs.back().fill_random(40 + i);
  }
  std::vector<void*> ptrs;
  for (auto& b : bufs) ptrs.push_back(b.data());
  // Interleaved rounds, so that load from other processes falls on both alike; medians.
  std::vector<double> t_nearest, t_fallback;
  for (int round = 0; round < 9; ++round) {
    t_nearest.push_back(cpu_seconds_per_call(nearest.kernel, ptrs));
    t_fallback.push_back(cpu_seconds_per_call(fallback, ptrs));
  }
  const double ratio = median(t_fallback) / median(t_nearest);
  std::printf(
      "max_pool2d C=48 H=56 W=56: nearest %.2f us, fallback %.2f us of CPU per call (medians of "
      "9): %.2fx\n"
      "  nearest config %s\n",
      median(t_nearest) * 1e6, median(t_fallback) * 1e6, ratio,
      nearest.config.to_json_string().c_str());
  RecordProperty("nearest_over_fallback", std::to_string(ratio));
  EXPECT_GT(ratio, 2.0);
}

}  // namespace
}  // namespace ktune
