// ModelBuffers, time_model(), measure_step_threads(), step_threads_summary() and
// measure_step_threads_here().
#include "deploy/model_timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "codegen/model_driver.h"
#include "codegen/runtime.h"
#include "codegen/target.h"
#include "support/error.h"
#include "tuning_db/record.h"

namespace ktune::deploy {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

void ModelBuffers::Free::operator()(void* p) const { std::free(p); }

ModelBuffers::ModelBuffers(const ModelPlan& plan, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  // Placed as the driver places its arena (codegen::model_buffer_placement).
  const auto allocate = [&](const PlanTensor& t) {
    void* p = codegen::allocate_model_buffer(t.bytes());
    storage_.emplace_back(p);
    return p;
  };
  for (int64_t id : plan.inputs) {
    const PlanTensor& t = plan.tensors[static_cast<size_t>(id)];
    void* p = allocate(t);
    const int64_t n = t.elements();
    if (t.dtype == te::Float(32)) {
      for (int64_t i = 0; i < n; ++i) static_cast<float*>(p)[i] = uniform(rng);
    } else {
      // Indices: every one a row of the tables the input indexes.
      std::uniform_int_distribution<int64_t> row(0, std::max<int64_t>(t.values_below, 2) - 1);
      for (int64_t i = 0; i < n; ++i) {
        if (t.dtype == te::Int(64))
          static_cast<int64_t*>(p)[i] = row(rng);
        else if (t.dtype == te::Int(32))
          static_cast<int32_t*>(p)[i] = static_cast<int32_t>(row(rng));
        else
          throw Error(ErrorKind::kUnsupported,
                      "graph input '" + t.name + "' of type " + t.dtype.str());
      }
    }
    in_ptrs_.push_back(p);
    in_bytes_.push_back(t.bytes());
  }
  for (int64_t id : plan.outputs) {
    const PlanTensor& t = plan.tensors[static_cast<size_t>(id)];
    auto* p = static_cast<float*>(allocate(t));
    const int64_t n = t.bytes() / static_cast<int64_t>(sizeof(float));
    std::fill(p, p + n, NAN);
    out_ptrs_.push_back(p);
    out_counts_.push_back(n);
  }
}

void ModelBuffers::set_inputs(const std::string& bytes) {
  int64_t total = 0;
  for (int64_t n : in_bytes_) total += n;
  if (static_cast<int64_t>(bytes.size()) != total)
    throw Error(ErrorKind::kInvalidArgument, "the inputs take " + std::to_string(total) +
                                                 " bytes, not " + std::to_string(bytes.size()));
  size_t at = 0;
  for (size_t i = 0; i < in_ptrs_.size(); ++i) {
    std::memcpy(const_cast<void*>(in_ptrs_[i]), bytes.data() + at,
                static_cast<size_t>(in_bytes_[i]));
    at += static_cast<size_t>(in_bytes_[i]);
  }
}

std::string ModelBuffers::output_bytes() const {
  std::string bytes;
  for (size_t i = 0; i < out_ptrs_.size(); ++i)
    bytes.append(reinterpret_cast<const char*>(out_ptrs_[i]),
                 static_cast<size_t>(out_counts_[i]) * 4);
  return bytes;
}

std::string ModelBuffers::input_bytes() const {
  std::string bytes;
  for (size_t i = 0; i < in_ptrs_.size(); ++i)
    bytes.append(static_cast<const char*>(in_ptrs_[i]), static_cast<size_t>(in_bytes_[i]));
  return bytes;
}

double ModelTiming::task_s() const {
  double s = 0;
  for (size_t k = 0; k < step_s.size(); ++k) s += plan->steps[k].kind == "task" ? step_s[k] : 0;
  return s;
}

double ModelTiming::other_s() const {
  double s = 0;
  for (size_t k = 0; k < step_s.size(); ++k) s += plan->steps[k].kind == "task" ? 0 : step_s[k];
  return s;
}

ModelTiming time_model(ModelRunner& runner, const ModelPlan& plan, const ModelBuffers& buffers,
                       int warmup, int runs) {
  if (runs < 1 || warmup < 0)
    throw Error(ErrorKind::kInvalidArgument, "runs must be >= 1 and the warm-up >= 0");
  for (int i = 0; i < warmup; ++i) runner.run(buffers.inputs(), buffers.outputs());
  ModelTiming t;
  t.runs = runs;
  t.plan = &plan;
  // End to end, then one step at a time, each in a block of its own: the steps run on the runner's
  // copy of the weights, not on the library's, and runs in turns would read two copies (a BERT
  // layer's 28 MB each) and find neither in cache, where a model run back to back finds its own.
  std::vector<double> seconds;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    runner.run(buffers.inputs(), buffers.outputs());
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::vector<std::vector<double>> per_step(plan.steps.size());
  runner.run_layers(buffers.inputs(), buffers.outputs());  // its copy of the weights warmed
  for (int i = 0; i < runs; ++i) {
    const std::vector<double> s = runner.run_layers(buffers.inputs(), buffers.outputs());
    for (size_t k = 0; k < s.size(); ++k) per_step[k].push_back(s[k]);
  }
  for (auto& v : per_step) t.step_s.push_back(median(v));
  std::sort(seconds.begin(), seconds.end());
  t.median_s = median(seconds);
  t.min_s = seconds.front();
  t.max_s = seconds.back();
  t.q1_s = seconds[seconds.size() / 4];
  t.q3_s = seconds[(3 * seconds.size()) / 4];  // below size() for any size >= 1
  return t;
}

bool ModelTiming::noisy() const {
  return median_s > 0 && (q3_s - q1_s) / median_s > tuning_db::kNoisySpread;
}

bool ModelTiming::apart() const {
  const double layers = std::accumulate(step_s.begin(), step_s.end(), 0.0);
  if (!(median_s > 0) || !(layers > 0)) return false;
  return median_s > kApartRatio * layers || layers > kApartRatio * median_s;
}

tuning_db::StepThreadsRow measure_step_threads(const BuiltModel& model, const ModelBuffers& buffers,
                                               const StepThreadsOptions& o) {
  if (o.threads < 2 || o.rounds < 1 || o.runs < 1 || !(o.margin >= 0 && o.margin < 1))
    throw Error(ErrorKind::kInvalidArgument,
                "step threads need threads >= 2, rounds and runs >= 1, a margin in [0, 1)");
  const size_t steps = model.plan.steps.size();
  const BuiltModel uncapped = with_step_threads(model, std::vector<int>(steps, 0), 0);
  ModelRunner runner(uncapped);
  const std::vector<const void*>& in = buffers.inputs();
  const std::vector<float*>& out = buffers.outputs();

  // Per step, in the model's order: a pass at `threads`, a pass at one, in turns. Each pass
  // starts after the other one, so both see the caches a run of the model leaves.
  const int counts[2] = {o.threads, 1};
  std::vector<std::vector<double>> at[2] = {std::vector<std::vector<double>>(steps),
                                            std::vector<std::vector<double>>(steps)};
  for (int warm = 0; warm < 2; ++warm)
    for (int c : counts) {
      codegen::set_num_threads(c);
      runner.run_layers(in, out);
    }
  for (int r = 0; r < o.rounds; ++r)
    for (int i = 0; i < 2; ++i) {
      const int which = (r + i) % 2;
      codegen::set_num_threads(counts[which]);
      const std::vector<double> s = runner.run_layers(in, out);
      for (size_t k = 0; k < steps; ++k) at[which][k].push_back(s[k]);
    }
  codegen::set_num_threads(o.threads);

  tuning_db::StepThreadsRow row;
  row.model_key = model.model_key;
  row.target = model.driver.target;
  row.threads = o.threads;
  std::vector<int> caps(steps, 0);
  for (size_t k = 0; k < steps; ++k) {
    const double all = median(at[0][k]), one = median(at[1][k]);
    caps[k] = one < (1 - o.margin) * all ? 1 : 0;
    row.steps.push_back({model.plan.steps[k].layer, caps[k], all, one});
  }
  if (std::count(caps.begin(), caps.end(), 1) == 0) return row;

  // End to end, the capped model and the uncapped one in turns.
  const BuiltModel capped = with_step_threads(model, caps, o.threads);
  ModelRunner capped_runner(capped);
  ModelRunner* runners[2] = {&runner, &capped_runner};
  std::vector<double> seconds[2];
  for (ModelRunner* m : runners) m->run(in, out);
  for (int r = 0; r < o.rounds; ++r)
    for (int i = 0; i < 2; ++i) {
      const int which = (r + i) % 2;
      for (int n = 0; n < o.runs; ++n) {
        const auto start = std::chrono::steady_clock::now();
        runners[which]->run(in, out);
        seconds[which].push_back(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      }
    }
  row.uncapped_s = median(seconds[0]);
  row.capped_s = median(seconds[1]);
  if (row.capped_s > row.uncapped_s)
    for (tuning_db::StepThreadsStep& s : row.steps) s.max_threads = 0;
  return row;
}

std::string step_threads_summary(const tuning_db::StepThreadsRow& row) {
  const auto one =
      std::count_if(row.steps.begin(), row.steps.end(),
                    [](const tuning_db::StepThreadsStep& s) { return s.max_threads == 1; });
  const std::string at = fmt::format("at {} threads: ", row.threads);
  // measure_step_threads times the model end to end only when some step was capped.
  if (row.capped_s == 0)
    return at + "no step clearly faster on one thread; every step on every thread";
  // A ratio, not two more latencies: the model's own figure is the one a command leads with.
  if (one == 0)
    return at + fmt::format(
                    "the steps faster on one thread made the model {:.1f}% slower end to end; "
                    "every step on every thread",
                    100 * (row.capped_s / row.uncapped_s - 1));
  return at + fmt::format(
                  "{} step{} on one thread: the model {:.1f}% faster end to end than all at "
                  "{} threads",
                  one, one == 1 ? "" : "s", 100 * (1 - row.capped_s / row.uncapped_s), row.threads);
}

StepThreadsMeasured measure_step_threads_here(const BuiltModel& model,
                                              const StepThreadsOptions& options, uint64_t seed) {
  const codegen::Target target = codegen::Target::parse(model.driver.target);
  if (!target.is_host_compatible())
    throw Error(ErrorKind::kUnsupported,
                "the steps' threads are measured by running the model here, and its target '" +
                    target.str() +
                    "' cannot run on this machine: build on a machine of the target");
  const ModelBuffers buffers(model.plan, seed);
  StepThreadsMeasured out;
  out.choice = measure_step_threads(model, buffers, options);
  out.model = with_step_threads(model, out.choice);
  return out;
}

}  // namespace ktune::deploy
