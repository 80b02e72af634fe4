// ktune's parallel runtime: a persistent thread pool behind ktune_parallel_for.
//
// Why a pool of our own rather than libgomp: the entry is a three-argument C function that a
// device worker (or a static AArch64 test binary) can supply in a dozen lines, so kernels do
// not depend on GCC's GOMP_* ABI or on libgomp being present on the device; the thread count
// is an explicit API call (tuning measures 1 and N threads in one process), not the
// OMP_NUM_THREADS environment; and the workers persist, polling briefly between loops before
// they sleep (as TVM's and OpenMP's pools do), so back-to-back calls pay neither thread
// creation nor a futex wake-up (matmul 256^3 on 2 threads: fastest call 265 vs 252 GFLOP/s).
#include "codegen/runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "support/error.h"

namespace ktune::codegen {
namespace {

thread_local bool t_inside_parallel = false;

// How long an idle worker polls for the next loop before it sleeps, and how long the caller
// polls for the workers to finish before it sleeps: kernels are called back to back when
// they are timed, and a futex wake-up per call costs tens of microseconds on a VM.
constexpr auto kSpin = std::chrono::microseconds(200);

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `done` for up to kSpin; returns whether it became true.
template <typename Pred>
bool spin_until(Pred done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (done()) return true;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return false;
  }
}

class ThreadPool {
 public:
  ThreadPool() : wanted_(static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {}
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_.store(true);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  void set_threads(int n) { wanted_.store(n); }
  int threads() const { return wanted_.load(); }

  int32_t run(int64_t extent, ktune_parallel_body body, void* closure) {
    if (extent <= 0) return 0;
    const int64_t n = std::min<int64_t>(wanted_.load(), extent);
    if (n <= 1 || t_inside_parallel) return body(0, extent, closure);
    // One loop at a time: kernels from several host threads take turns on the pool.
    std::lock_guard<std::mutex> serial(run_mu_);
    ensure_workers(static_cast<int>(n) - 1);
    // Every worker checks in, chunk or not, so that none still reads job_ when the next
    // loop overwrites it.
    job_ = Job{extent, n, body, closure};
    result_.store(0);
    pending_.store(static_cast<int>(workers_.size()));
    {
      std::lock_guard<std::mutex> lock(mu_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    t_inside_parallel = true;
    record(run_chunk(0));
    t_inside_parallel = false;
    if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(mu_);
      done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
    return result_.load();
  }

 private:
  struct Job {
    int64_t extent = 0;
    int64_t chunks = 0;
    ktune_parallel_body body = nullptr;
    void* closure = nullptr;
  };

  int32_t run_chunk(int64_t c) {
    const int64_t per = job_.extent / job_.chunks, extra = job_.extent % job_.chunks;
    const int64_t begin = c * per + std::min(c, extra);
    const int64_t end = begin + per + (c < extra ? 1 : 0);
    return begin < end ? job_.body(begin, end, job_.closure) : 0;
  }

  void record(int32_t code) {
    int32_t zero = 0;
    if (code != 0) result_.compare_exchange_strong(zero, code);
  }

  // Called with run_mu_ held and no loop in flight, so a new worker starts at the current
  // generation and waits for the next one.
  void ensure_workers(int n) {
    while (static_cast<int>(workers_.size()) < n) {
      const int index = static_cast<int>(workers_.size()) + 1;  // chunk index; 0 is the caller
      const uint64_t seen = generation_.load();
      workers_.emplace_back([this, index, seen] { worker_loop(index, seen); });
    }
  }

  void worker_loop(int index, uint64_t seen) {
    t_inside_parallel = true;
    for (;;) {
      auto next = [&] { return stop_.load() || generation_.load(std::memory_order_acquire) != seen; };
      if (!spin_until(next)) {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, next);
      }
      if (stop_.load()) return;
      seen = generation_.load(std::memory_order_acquire);
      if (index < job_.chunks) record(run_chunk(index));
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);
        done_.notify_one();
      }
    }
  }

  std::atomic<int> wanted_;
  std::mutex run_mu_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  Job job_;
  std::atomic<int> pending_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int32_t> result_{0};
  std::atomic<bool> stop_{false};
};

ThreadPool& pool() {
  static ThreadPool p;
  return p;
}

}  // namespace

void set_num_threads(int n) {
  if (n < 1) throw Error(ErrorKind::kInvalidArgument, "thread count must be >= 1, got " + std::to_string(n));
  pool().set_threads(n);
}

int num_threads() { return pool().threads(); }

}  // namespace ktune::codegen

extern "C" int32_t ktune_parallel_for(int64_t extent, ktune_parallel_body body, void* closure) {
  return ktune::codegen::pool().run(extent, body, closure);
}
