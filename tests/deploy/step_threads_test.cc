// Tests of per-step thread counts in model builds: a capped step runs on the caller alone (a
// plugged parallel-for counts the loops that reach it) and the outputs stay bit for bit those of
// the uncapped model; measure_step_threads' choice; a choice stored in the log applied by
// build_model and shipped by `ktune build --model` (the header, and a C program linked with the
// standalone runtime giving the uncapped outputs); the one line that says what a choice holds.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "codegen/runtime.h"
#include "deploy/model_build.h"
#include "deploy/model_timing.h"
#include "support/error.h"
#include "tests/deploy/build_test_util.h"
#include "tests/frontend/test_models.h"
#include "tuning_db/database.h"
#include "tuning_db/step_threads_store.h"

extern "C" {
typedef int32_t (*ktune_parallel_for_fn)(int64_t extent, ktune_parallel_body body, void* closure);
void ktune_set_parallel_for(ktune_parallel_for_fn fn);
}

namespace ktune::deploy {
namespace {

using testing_cli::quote;
using testing_models::model;
using tools::build_test::compile_and_run;
using tools::build_test::read_file;
using tools::build_test::TempDir;

std::atomic<long> plugged_loops{0};

// An application's parallel-for: counts the loops that reach it and runs them on the caller.
int32_t counting_plug(int64_t extent, ktune_parallel_body body, void* closure) {
  ++plugged_loops;
  return extent > 0 ? body(0, extent, closure) : 0;
}

// Loops that reached the pool (the plug) while `f` ran.
template <typename F>
long loops_reaching_the_pool(F f) {
  ktune_set_parallel_for(counting_plug);
  const long before = plugged_loops.load();
  f();
  ktune_set_parallel_for(nullptr);
  return plugged_loops.load() - before;
}

ModelRequest request(const HistorySource& history) {
  ModelRequest r;
  r.model_path = model("small_mobile.onnx");
  r.name = "mobile";
  r.plan.history = history;
  return r;
}

std::string outputs_of(const BuiltModel& m, uint64_t seed) {
  ModelRunner runner(m);
  ModelBuffers buffers(m.plan, seed);
  runner.run(buffers.inputs(), buffers.outputs());
  return buffers.output_bytes();
}

class StepThreads : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { codegen::set_num_threads(2); }
  TempDir dir_;
  // No log: every task takes its fallback config.
  static HistorySource no_log() { return HistorySource::untuned(); }
};

TEST_F(StepThreads, ACappedStepRunsOnTheCallerAndTheOutputsStayTheSame) {
  const BuiltModel m = build_model(request(no_log()));
  ASSERT_EQ(m.step_threads_at, 0);
  ASSERT_FALSE(m.model_key.empty());
  ModelRunner runner(m);
  ModelBuffers buffers(m.plan, 3);
  // Which steps have parallel loops.
  std::vector<long> loops(m.plan.steps.size());
  for (size_t k = 0; k < m.plan.steps.size(); ++k) {
    const auto args = runner.step_buffers(k, buffers.inputs(), buffers.outputs());
    loops[k] = loops_reaching_the_pool([&] { runner.run_step(k, args); });
  }
  std::vector<int> caps(m.plan.steps.size(), 0);
  size_t first_parallel = caps.size();
  for (size_t k = 0; k < caps.size(); ++k)
    if (loops[k] > 0 && first_parallel == caps.size()) first_parallel = k;
  ASSERT_LT(first_parallel, caps.size()) << "no step of the model has a parallel loop";
  caps[first_parallel] = 1;

  // The step capped: its loops run on the caller; the other steps' still reach the pool.
  const BuiltModel one = with_step_threads(m, caps, 2);
  EXPECT_EQ(one.step_threads_at, 2);
  ModelRunner one_runner(one);
  long total = 0;
  for (size_t k = 0; k < caps.size(); ++k) {
    const auto args = one_runner.step_buffers(k, buffers.inputs(), buffers.outputs());
    const long n = loops_reaching_the_pool([&] { one_runner.run_step(k, args); });
    EXPECT_EQ(n, k == first_parallel ? 0 : loops[k]) << "step " << k;
    total += loops[k];
  }
  // The shipped entry point (the driver sets the cap around the call) does the same.
  long whole =
      loops_reaching_the_pool([&] { one_runner.run(buffers.inputs(), buffers.outputs()); });
  EXPECT_EQ(whole, total - loops[first_parallel]);
  const BuiltModel all = with_step_threads(m, std::vector<int>(caps.size(), 1), 2);
  ModelRunner all_runner(all);
  whole = loops_reaching_the_pool([&] { all_runner.run(buffers.inputs(), buffers.outputs()); });
  EXPECT_EQ(whole, 0);

  // On the pool at two threads, the outputs bit for bit those of the uncapped model.
  const std::string uncapped = outputs_of(m, 3);
  EXPECT_EQ(outputs_of(one, 3), uncapped);
  EXPECT_EQ(outputs_of(all, 3), uncapped);

  // The header says which steps run on one thread and at which count they were measured.
  const std::string h = model_header(one, "mobile.h");
  EXPECT_NE(h.find("#define mobile_STEP_THREADS_MEASURED_AT 2"), std::string::npos) << h;
  EXPECT_NE(h.find(m.plan.steps[first_parallel].symbol + ": " + m.plan.steps[first_parallel].layer),
            std::string::npos);
  size_t marks = 0;
  // A capped step's line ends with the mark.
  for (size_t at = h.find("[1 thread]\n"); at != std::string::npos;
       at = h.find("[1 thread]\n", at + 1))
    ++marks;
  EXPECT_EQ(marks, 1u) << h;
  const std::string plain = model_header(m, "mobile.h");
  EXPECT_EQ(plain.find("[1 thread]"), std::string::npos);
  EXPECT_EQ(plain.find("STEP_THREADS"), std::string::npos);

  EXPECT_THROW(with_step_threads(m, {1}, 2), Error);
}

TEST_F(StepThreads, TheMeasuredChoiceCoversEveryStepInOrder) {
  const BuiltModel m = build_model(request(no_log()));
  ModelBuffers buffers(m.plan, 5);
  StepThreadsOptions o;
  o.rounds = 3;
  o.runs = 2;
  const tuning_db::StepThreadsRow row = measure_step_threads(m, buffers, o);
  EXPECT_EQ(row.model_key, m.model_key);
  EXPECT_EQ(row.target, m.driver.target);
  EXPECT_EQ(row.threads, 2);
  ASSERT_EQ(row.steps.size(), m.plan.steps.size());
  int capped = 0;
  for (size_t k = 0; k < row.steps.size(); ++k) {
    EXPECT_EQ(row.steps[k].layer, m.plan.steps[k].layer);
    EXPECT_GT(row.steps[k].all_s, 0);
    EXPECT_GT(row.steps[k].one_s, 0);
    EXPECT_TRUE(row.steps[k].max_threads == 0 || row.steps[k].max_threads == 1);
    // Capped only when clearly faster on one thread.
    if (row.steps[k].max_threads == 1) {
      EXPECT_LT(row.steps[k].one_s, 0.9 * row.steps[k].all_s);
      ++capped;
    }
  }
  if (capped > 0) {
    EXPECT_LE(row.capped_s, row.uncapped_s);
  }
  EXPECT_EQ(codegen::num_threads(), 2);
  for (StepThreadsOptions bad : {StepThreadsOptions{1, 3, 2, 0.1}, StepThreadsOptions{2, 0, 2, 0.1},
                                 StepThreadsOptions{2, 3, 2, 1.0}}) {
    try {
      measure_step_threads(m, buffers, bad);
      FAIL() << "measured at " << bad.threads << " threads, " << bad.rounds << " rounds";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    }
  }
}

// The one line every command prints for a choice: its thread count, the steps on one thread and
// what they gain end to end (a ratio of the medians), or why every step stays on every thread.
TEST(StepThreadsSummary, SaysWhatTheRowHolds) {
  tuning_db::StepThreadsRow row;
  row.threads = 4;
  row.steps = {{"a", 1, 2e-5, 1e-5}, {"b", 0, 1e-5, 2e-5}, {"c", 1, 3e-5, 1e-5}};
  row.capped_s = 1.25e-3;
  row.uncapped_s = 1.5e-3;
  EXPECT_EQ(step_threads_summary(row),
            "at 4 threads: 2 steps on one thread: the model 16.7% faster end to end than all at 4 "
            "threads");
  // The caps undone: measured end to end, slower.
  tuning_db::StepThreadsRow slower = row;
  for (auto& s : slower.steps) s.max_threads = 0;
  slower.capped_s = 1.75e-3;
  EXPECT_EQ(step_threads_summary(slower),
            "at 4 threads: the steps faster on one thread made the model 16.7% slower end to end; "
            "every step on every thread");
  // No step capped: no end to end timing.
  tuning_db::StepThreadsRow none = slower;
  none.threads = 2;
  none.capped_s = none.uncapped_s = 0;
  EXPECT_EQ(step_threads_summary(none),
            "at 2 threads: no step clearly faster on one thread; every step on every thread");
}

TEST_F(StepThreads, AStoredChoiceIsAppliedByBuildModelAndShippedByBuildModelCli) {
  const BuiltModel m = build_model(request(no_log()));
  const std::string log = dir_.file("steps.db");
  // Every other step on one thread, measured at 2; and another choice at 3 with none.
  tuning_db::StepThreadsRow row;
  row.model_key = m.model_key;
  row.target = m.driver.target;
  row.threads = 2;
  for (size_t k = 0; k < m.plan.steps.size(); ++k)
    row.steps.push_back({m.plan.steps[k].layer, k % 2 == 0 ? 1 : 0, 2e-5, 1e-5});
  {
    tuning_db::Database db = tuning_db::Database::open(log);
    tuning_db::StepThreadsStore store(db);
    store.save(row);
    tuning_db::StepThreadsRow none = row;
    none.threads = 3;
    for (auto& s : none.steps) s.max_threads = 0;
    store.save(none);
  }
  ModelRequest r = request(HistorySource::log(log));
  r.step_threads = 2;
  const BuiltModel capped = build_model(r);
  EXPECT_EQ(capped.step_threads_at, 2);
  for (size_t k = 0; k < capped.plan.steps.size(); ++k)
    EXPECT_EQ(capped.plan.steps[k].max_threads, k % 2 == 0 ? 1 : 0) << k;
  // At a count with no choice of its own, the one measured at the most threads (3: none).
  r.step_threads = 4;
  EXPECT_EQ(build_model(r).step_threads_at, 0);
  r.step_threads = -1;
  EXPECT_EQ(build_model(r).step_threads_at, 0);
  const std::string uncapped_out = outputs_of(m, 9);
  EXPECT_EQ(outputs_of(capped, 9), uncapped_out);

  // `ktune build --model --threads 2` ships them: the header, and a C program linked with the
  // standalone runtime gives the uncapped model's outputs.
  const std::string lib = dir_.file("libmobile.a"), header = dir_.file("mobile.h"),
                    runtime = dir_.file("runtime.c");
  const auto built =
      testing_cli::ktune("build --model " + quote(model("small_mobile.onnx")) + " --db " +
                             quote(log) + " --threads 2 --name mobile -o " + quote(lib) +
                             " --header " + quote(header) + " --runtime " + quote(runtime),
                         true);
  ASSERT_EQ(built.status, 0) << built.out << built.err;
  const std::string h = read_file(header);
  EXPECT_NE(h.find("#define mobile_STEP_THREADS_MEASURED_AT 2"), std::string::npos) << h;
  size_t marks = 0;
  // A capped step's line ends with the mark.
  for (size_t at = h.find("[1 thread]\n"); at != std::string::npos;
       at = h.find("[1 thread]\n", at + 1))
    ++marks;
  EXPECT_EQ(marks, (m.plan.steps.size() + 1) / 2) << h;

  ModelBuffers buffers(m.plan, 9);
  std::ofstream(dir_.file("in.bin"), std::ios::binary) << buffers.input_bytes();
  const auto printed = compile_and_run(
      dir_, R"(#include <stdio.h>
#include <stdlib.h>
#include "mobile.h"
int main(int argc, char** argv) {
  if (argc != 3) return 2;
  ktune_set_num_threads(2);
  float* in = aligned_alloc(64, (mobile_INPUT0_ELEMENTS * 4 + 63) / 64 * 64);
  float* out = aligned_alloc(64, (mobile_OUTPUT0_ELEMENTS * 4 + 63) / 64 * 64);
  FILE* f = fopen(argv[1], "rb");
  if (!f || fread(in, 4, mobile_INPUT0_ELEMENTS, f) != mobile_INPUT0_ELEMENTS) return 3;
  fclose(f);
  void* ctx = mobile_create();
  if (!ctx || mobile_run(ctx, in, out) != 0) return 4;
  f = fopen(argv[2], "wb");
  fwrite(out, 4, mobile_OUTPUT0_ELEMENTS, f);
  fclose(f);
  mobile_destroy(ctx);
  printf("ran\n");
  return 0;
}
)",
      lib, runtime, "cc", "", quote(dir_.file("in.bin")) + " " + quote(dir_.file("out.bin")));
  ASSERT_EQ(printed, std::optional<std::string>("ran\n"));
  EXPECT_EQ(read_file(dir_.file("out.bin")), uncapped_out);
}

}  // namespace
}  // namespace ktune::deploy
