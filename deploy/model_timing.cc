// ModelBuffers and time_model().
#include "deploy/model_timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "support/error.h"

namespace ktune::deploy {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

void ModelBuffers::Free::operator()(float* p) const { std::free(p); }

ModelBuffers::ModelBuffers(const ModelPlan& plan, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const auto allocate = [&](int64_t id) {
    const int64_t count =
        plan.tensors[static_cast<size_t>(id)].bytes() / static_cast<int64_t>(sizeof(float));
    float* p = static_cast<float*>(
        std::aligned_alloc(64, static_cast<size_t>((count * 4 + 63) / 64 * 64)));
    if (!p) throw Error(ErrorKind::kIo, "out of memory for a model buffer");
    storage_.emplace_back(p);
    return std::make_pair(p, count);
  };
  for (int64_t id : plan.inputs) {
    auto [p, n] = allocate(id);
    for (int64_t i = 0; i < n; ++i) p[i] = uniform(rng);
    in_ptrs_.push_back(p);
    in_counts_.push_back(n);
  }
  for (int64_t id : plan.outputs) {
    auto [p, n] = allocate(id);
    std::fill(p, p + n, NAN);
    out_ptrs_.push_back(p);
    out_counts_.push_back(n);
  }
}

void ModelBuffers::set_inputs(const std::string& bytes) {
  int64_t total = 0;
  for (int64_t n : in_counts_) total += n * 4;
  if (static_cast<int64_t>(bytes.size()) != total)
    throw Error(ErrorKind::kInvalidArgument, "the inputs take " + std::to_string(total) +
                                                 " bytes, not " + std::to_string(bytes.size()));
  size_t at = 0;
  for (size_t i = 0; i < in_ptrs_.size(); ++i) {
    std::memcpy(const_cast<float*>(in_ptrs_[i]), bytes.data() + at,
                static_cast<size_t>(in_counts_[i]) * 4);
    at += static_cast<size_t>(in_counts_[i]) * 4;
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
    bytes.append(reinterpret_cast<const char*>(in_ptrs_[i]),
                 static_cast<size_t>(in_counts_[i]) * 4);
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
  std::vector<double> seconds;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    runner.run(buffers.inputs(), buffers.outputs());
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::vector<std::vector<double>> per_step(plan.steps.size());
  for (int i = 0; i < runs; ++i) {
    const std::vector<double> s = runner.run_layers(buffers.inputs(), buffers.outputs());
    for (size_t k = 0; k < s.size(); ++k) per_step[k].push_back(s[k]);
  }
  for (auto& v : per_step) t.step_s.push_back(median(v));
  std::sort(seconds.begin(), seconds.end());
  t.median_s = median(seconds);
  t.min_s = seconds.front();
  t.max_s = seconds.back();
  return t;
}

}  // namespace ktune::deploy
