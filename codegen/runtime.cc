// ktune's parallel runtime: a persistent thread pool behind ktune_parallel_for.
//
// Why a pool of our own rather than libgomp: the entry is a three-argument C function that a
// device worker (or a static AArch64 test binary) can supply in a dozen lines, so kernels do
// not depend on GCC's GOMP_* ABI or on libgomp being present on the device; the thread count
// is an explicit API call (tuning measures 1 and N threads in one process), not the
// OMP_NUM_THREADS environment; and the workers persist and are woken per loop, so the
// per-kernel-call overhead is a condition-variable round trip, not thread creation.
#include "codegen/runtime.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "support/error.h"

namespace ktune::codegen {
namespace {

thread_local bool t_inside_parallel = false;

class ThreadPool {
 public:
  ThreadPool() : wanted_(static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))) {}
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
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
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = Job{extent, n, body, closure};
      pending_ = static_cast<int>(n) - 1;
      result_.store(0);
      ++generation_;
    }
    wake_.notify_all();
    t_inside_parallel = true;
    record(run_chunk(0));
    t_inside_parallel = false;
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [&] { return pending_ == 0; });
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

  void ensure_workers(int n) {
    while (static_cast<int>(workers_.size()) < n) {
      const int index = static_cast<int>(workers_.size()) + 1;  // chunk index; 0 is the caller
      workers_.emplace_back([this, index] { worker_loop(index); });
    }
  }

  void worker_loop(int index) {
    t_inside_parallel = true;
    uint64_t seen = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen = generation_;
      // A worker created for the current job must still take part in it.
      if (pending_ > 0 && index < job_.chunks) seen = generation_ - 1;
    }
    for (;;) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= job_.chunks) continue;
      lock.unlock();
      record(run_chunk(index));
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::atomic<int> wanted_;
  std::mutex run_mu_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  Job job_;
  int pending_ = 0;
  uint64_t generation_ = 0;
  std::atomic<int32_t> result_{0};
  bool stop_ = false;
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
