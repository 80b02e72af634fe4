// Benchmark: the per-call overhead of a parallel kernel, i.e. of one parallel loop of extent 2
// whose bodies do almost nothing, through (a) ktune's runtime (codegen/parallel_runtime.c: what
// the tuning runner times kernels with and `ktune build --runtime` ships) and (b) OpenMP
// (`#pragma omp parallel for`, libgomp), at 1 and 2 threads. Each round times `calls` back-to-back
// loops per runtime, the runtimes interleaved, with a pause between them so that the previous
// runtime's workers have stopped spinning; the median ns/call over the rounds is printed. A
// first table uses bodies of about 2 us, where two threads must really share the work.
// Last line: `ktune_over_openmp <x>` (2 threads, trivial bodies).
//
// Usage: runtime_overhead [--calls N] [--rounds R]
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "codegen/runtime.h"

namespace {

using Clock = std::chrono::steady_clock;

// The loop body: each iteration bumps its own counter (one cache line each, no false sharing).
struct alignas(64) Slot {
  int64_t count = 0;
};

// Busy-loop steps per iteration: 0 (trivial bodies), or about 2 us of work, so that a runtime
// whose caller runs both chunks itself shows it (twice the time of two threads).
int g_work = 0;

int32_t bump(int64_t begin, int64_t end, void* closure) {
  Slot* slots = static_cast<Slot*>(closure);
  for (int64_t i = begin; i < end; ++i) {
    ++slots[i].count;
    for (int k = 0; k < g_work; ++k) asm volatile("" ::: "memory");  // not optimized away
  }
  return 0;
}

constexpr int64_t kExtent = 2;

void omp_loop(Slot* slots, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < kExtent; ++i) bump(i, i + 1, slots);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The first line of /proc/loadavg: other processes on a 2-CPU machine decide these numbers.
std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string line;
  std::getline(in, line);
  return line + "\n";
}

struct Runtime {
  std::string name;
  std::function<void(int threads)> set_threads;
  std::function<void(Slot*, int threads)> loop;
};

}  // namespace

int main(int argc, char** argv) {
  int calls = 2000, rounds = 31;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--calls")
      calls = std::stoi(argv[i + 1]);
    else if (a == "--rounds")
      rounds = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "runtime_overhead: unknown option %s\n", a.c_str());
      return 1;
    }
  }
  if (argc % 2 == 0 || calls < 1 || rounds < 1) {
    std::fprintf(stderr, "usage: runtime_overhead [--calls N >= 1] [--rounds R >= 1]\n");
    return 1;
  }
  const std::vector<Runtime> runtimes = {
      {"ktune (codegen/parallel_runtime.c)", [](int t) { ktune::codegen::set_num_threads(t); },
       [](Slot* s, int) { ktune_parallel_for(kExtent, bump, s); }},
      {"OpenMP (libgomp)", [](int) {}, [](Slot* s, int t) { omp_loop(s, t); }},
  };
  const std::vector<int> thread_counts = {1, 2};
  Slot slots[kExtent];
  int64_t expected = 0;
  // Returns the median and the fastest round's ns/call per runtime and thread count.
  auto measure = [&] {
    std::vector<std::vector<double>> ns(runtimes.size(), std::vector<double>(thread_counts.size()));
    std::vector<std::vector<double>> fastest = ns;
    for (size_t t = 0; t < thread_counts.size(); ++t) {
      const int threads = thread_counts[t];
      std::vector<std::vector<double>> samples(runtimes.size());
      for (int r = 0; r <= rounds; ++r) {  // round 0 warms up (creates the pools)
        for (size_t k = 0; k < runtimes.size(); ++k) {
          std::this_thread::sleep_for(
              std::chrono::milliseconds(20));  // the other pools go to sleep
          runtimes[k].set_threads(threads);
          const auto start = Clock::now();
          for (int c = 0; c < calls; ++c) runtimes[k].loop(slots, threads);
          const double s = std::chrono::duration<double>(Clock::now() - start).count();
          if (r > 0) samples[k].push_back(s / calls * 1e9);
          expected += calls;
        }
      }
      for (size_t k = 0; k < runtimes.size(); ++k) {
        ns[k][t] = median(samples[k]);
        fastest[k][t] = *std::min_element(samples[k].begin(), samples[k].end());
      }
    }
    return std::pair(ns, fastest);
  };
  auto print = [&](const std::vector<std::vector<double>>& ns,
                   const std::vector<std::vector<double>>& fastest) {
    std::printf("%-36s %12s %12s %16s\n", "runtime", "1 thread", "2 threads", "2 thr. fastest");
    for (size_t k = 0; k < runtimes.size(); ++k)
      std::printf("%-36s %12.0f %12.0f %16.0f\n", runtimes[k].name.c_str(), ns[k][0], ns[k][1],
                  fastest[k][1]);
  };
  std::printf("parallel loop of extent %lld: median ns/call over %d rounds of %d calls, %u CPUs\n",
              static_cast<long long>(kExtent), rounds, calls, std::thread::hardware_concurrency());
  std::printf("load average %s", load_average().c_str());
  // Bodies of about 2 us: calibrated on this thread.
  g_work = 1000;
  const auto start = Clock::now();
  for (int c = 0; c < 1000; ++c) bump(0, 1, slots);
  const double body_ns = std::chrono::duration<double>(Clock::now() - start).count() / 1000 * 1e9;
  g_work = std::max(1, static_cast<int>(1000 * 2000 / body_ns));
  slots[0].count -= 1000;  // the calibration's calls are not the runtimes'
  const auto [busy_ns, busy_fastest] = measure();
  std::printf(
      "\nbodies of ~2 us each (%d steps): two threads at work take ~2000 ns a call, one alone "
      "~4000\n",
      g_work);
  print(busy_ns, busy_fastest);
  g_work = 0;
  const auto [ns, fastest] = measure();
  std::printf("\ntrivial bodies (one increment): the overhead itself\n");
  print(ns, fastest);
  for (const Slot& s : slots) {
    if (s.count != expected) {
      std::fprintf(stderr, "runtime_overhead: an iteration ran %lld times, want %lld\n",
                   static_cast<long long>(s.count), static_cast<long long>(expected));
      return 1;
    }
  }
  std::printf("ktune_over_openmp %.3f\n", ns[0][1] / ns[1][1]);
  return 0;
}
