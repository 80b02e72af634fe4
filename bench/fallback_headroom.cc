// Benchmark: the room a workload's fallback config leaves for tuning, timed in this process —
// one core's FMA peak, the fallback's throughput, and how much of a uniform random sample of
// the config space beats it (so the chance that the best of 64 random trials does). Last line:
//   fallback_over_peak <fallback GFLOP/s / (threads x one core's measured FMA peak)>
// Usage: fallback_headroom [--threads T] [--samples N] [--seed S] [template k=v...]
//   default: matmul M=256 N=256 K=256 on 1 thread, 256 samples (the end-to-end test's workload)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/fma_peak.h"
#include "codegen/codegen_llvm.h"
#include "codegen/kernel.h"
#include "codegen/runtime.h"
#include "codegen/target.h"
#include "schedule_space/task.h"
#include "support/thread_pool.h"
#include "te/lower.h"

namespace {

using namespace ktune;
using Clock = std::chrono::steady_clock;

constexpr double kBeyondNoise = 1.02;  // "beats" means faster by more than 2%
constexpr int kFinalists = 8;
constexpr int kRounds = 5;
constexpr double kMinTimingS = 0.02;

struct Buffers {
  std::vector<void*> args;
  ~Buffers() {
    for (void* p : args) std::free(p);
  }
};

void allocate(const std::vector<codegen::ArgSpec>& signature, Buffers& buffers) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const auto& arg : signature) {
    const size_t bytes = static_cast<size_t>(arg.num_elements() * arg.element_bytes());
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (arg.dtype == "float32")
      for (size_t i = 0; i < bytes / 4; ++i) static_cast<float*>(p)[i] = dist(rng);
    else
      std::fill_n(static_cast<char*>(p), bytes, 0);
    buffers.args.push_back(p);
  }
}

// Fastest call of a kernel over about kMinTimingS: load on the VM only ever slows a call down.
double fastest_call(const codegen::Kernel& kernel, const std::vector<void*>& args) {
  kernel.run(args);
  double fastest = 1e30, total = 0;
  for (int calls = 0; calls < 10 || total < kMinTimingS; ++calls) {
    const auto start = Clock::now();
    kernel.run(args);
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    fastest = std::min(fastest, s);
    total += s;
  }
  return fastest;
}

struct Candidate {
  std::unique_ptr<codegen::Kernel> kernel;
  double seconds = 0;
};

std::vector<std::unique_ptr<codegen::Kernel>> build_all(
    const schedule_space::Task& task, const std::vector<schedule_space::Config>& configs) {
  ThreadPool pool(0);
  std::vector<std::future<codegen::Artifact>> builds;
  for (const auto& config : configs)
    builds.push_back(pool.submit([&task, config] {
      auto inst = task.instantiate(config);
      return codegen::build(te::lower(inst.schedule, inst.args, task.template_name()),
                            codegen::Target::host());
    }));
  std::vector<std::unique_ptr<codegen::Kernel>> kernels;
  for (auto& b : builds)
    kernels.push_back(std::make_unique<codegen::Kernel>(codegen::Kernel::load(b.get())));
  return kernels;
}

int run(int argc, char** argv) {
  int threads = 1, samples = 256;
  uint64_t seed = 1;
  std::string template_name = "matmul";
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc)
      threads = std::atoi(argv[++i]);
    else if (a == "--samples" && i + 1 < argc)
      samples = std::atoi(argv[++i]);
    else if (a == "--seed" && i + 1 < argc)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a.find('=') == std::string::npos)
      template_name = a;
    else
      args.push_back(a);
  }
  if (template_name == "matmul" && args.empty()) args = {"M=256", "N=256", "K=256"};
  if (threads < 1 || samples < 1) {
    std::fprintf(stderr, "fallback_headroom: --threads and --samples must be >= 1\n");
    return 1;
  }

  const codegen::Target host = codegen::Target::host();
  const auto task = schedule_space::Task::create(
      template_name, schedule_space::parse_workload_args(template_name, args),
      schedule_space::make_target_traits(host.str(), host.triple(), host.vector_bits(), threads));
  codegen::set_num_threads(threads);
  const double peak = bench::fma_peak_gflops(1.0) * threads;
  std::printf("%s on %d thread(s), space of %llu configs\n", task.workload_key().c_str(), threads,
              static_cast<unsigned long long>(task.space().size()));
  std::printf("FMA peak: %.1f GFLOP/s (one core measured, x %d)\n", peak, threads);

  std::mt19937_64 rng(seed);
  const uint64_t fallback_index = task.space().index_of(task.fallback_config());
  std::vector<schedule_space::Config> configs{task.fallback_config()};
  for (uint64_t index : task.space().sample(static_cast<size_t>(samples), rng, {fallback_index}))
    configs.push_back(task.space().get(index));
  auto kernels = build_all(task, configs);
  Buffers buffers;
  allocate(kernels[0]->signature(), buffers);

  std::vector<Candidate> candidates;
  for (size_t i = 0; i < kernels.size(); ++i) candidates.push_back({std::move(kernels[i]), 0});
  for (auto& c : candidates) c.seconds = fastest_call(*c.kernel, buffers.args);
  // The sample's fastest few and the fallback, timed again side by side, fastest of kRounds.
  std::sort(candidates.begin() + 1, candidates.end(),
            [](const Candidate& a, const Candidate& b) { return a.seconds < b.seconds; });
  const size_t finalists = std::min<size_t>(candidates.size(), kFinalists + 1);
  for (int r = 0; r < kRounds; ++r)
    for (size_t i = 0; i < finalists; ++i)
      candidates[i].seconds =
          std::min(candidates[i].seconds, fastest_call(*candidates[i].kernel, buffers.args));

  const double flop = task.flop();
  const double fallback_gflops = flop / candidates[0].seconds * 1e-9;
  size_t beats = 0;
  double best_sample = 0;
  for (size_t i = 1; i < candidates.size(); ++i) {
    const double g = flop / candidates[i].seconds * 1e-9;
    best_sample = std::max(best_sample, g);
    if (g > fallback_gflops * kBeyondNoise) ++beats;
  }
  const size_t sampled = candidates.size() - 1;
  const double share = static_cast<double>(beats) / static_cast<double>(sampled);
  std::printf("fallback: %.1f GFLOP/s (%.3f of peak)  %s\n", fallback_gflops,
              fallback_gflops / peak, task.fallback_config().to_json_string().c_str());
  std::printf("random sample: %zu configs, best %.1f GFLOP/s (%.3f of peak, %.3f x fallback)\n",
              sampled, best_sample, best_sample / peak, best_sample / fallback_gflops);
  std::printf(
      "faster than the fallback by > %.0f%%: %zu of %zu (%.1f%%); chance that the best of 64 "
      "random "
      "trials is: %.2f\n",
      (kBeyondNoise - 1) * 100, beats, sampled, share * 100, 1 - std::pow(1 - share, 64));
  std::printf("fallback_over_peak %.3f\n", fallback_gflops / peak);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fallback_headroom: %s\n", e.what());
    return 1;
  }
}
