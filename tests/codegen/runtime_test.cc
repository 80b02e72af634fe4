// Tests ktune_parallel_for: coverage of the range, chunking, error codes, nesting, thread counts.
#include "codegen/runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "support/error.h"

namespace ktune::codegen {
namespace {

struct Hits {
  std::vector<std::atomic<int>> count;
  std::mutex mu;
  std::set<std::thread::id> threads;
  explicit Hits(int64_t n) : count(n) {}
};

int32_t mark(int64_t begin, int64_t end, void* closure) {
  auto* h = static_cast<Hits*>(closure);
  for (int64_t i = begin; i < end; ++i) h->count[i]++;
  std::lock_guard<std::mutex> lock(h->mu);
  h->threads.insert(std::this_thread::get_id());
  return 0;
}

TEST(RuntimeTest, EveryIterationRunsExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    set_num_threads(threads);
    EXPECT_EQ(num_threads(), threads);
    for (int64_t n : {1, 2, 7, 64, 1001}) {
      Hits h(n);
      ASSERT_EQ(ktune_parallel_for(n, mark, &h), 0);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(h.count[i].load(), 1) << "threads " << threads << " n " << n;
      EXPECT_LE(h.threads.size(), static_cast<size_t>(std::min<int64_t>(threads, n)));
    }
  }
}

// A body that waits (up to 2 s) until every chunk of the loop has started: it returns only if
// the loop's chunks really run at the same time, on as many threads as there are chunks.
struct Rendezvous {
  std::atomic<int> arrived{0};
  int expected = 0;
};

int32_t meet(int64_t, int64_t, void* closure) {
  auto* r = static_cast<Rendezvous*>(closure);
  r->arrived++;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (r->arrived.load() < r->expected) {
    if (std::chrono::steady_clock::now() > deadline) return 9;
  }
  return 0;
}

TEST(RuntimeTest, TwoThreadsRunTwoChunksAtOnce) {
  set_num_threads(2);
  Rendezvous r;
  r.expected = 2;
  EXPECT_EQ(ktune_parallel_for(2, meet, &r), 0) << "the two chunks did not run at the same time";
  // One thread runs them one after the other: the first waits for a second that cannot start.
  set_num_threads(1);
  Rendezvous alone;
  alone.expected = 2;
  EXPECT_EQ(ktune_parallel_for(2, meet, &alone), 9);
  set_num_threads(2);
}

int32_t fail_in_upper_half(int64_t begin, int64_t end, void*) {
  return end > 50 && begin < 100 ? 7 : 0;
}

// Workspaces: 64-byte aligned, writable, and a released block is handed out again (the most
// recent that fits) instead of a new allocation; a request larger than every cached block gets a
// new one; another thread has its own blocks.
TEST(RuntimeTest, WorkspacesAreAlignedAndReused) {
  void* a = ktune_workspace_alloc(1 << 20);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  std::memset(a, 1, 1 << 20);
  ktune_workspace_free(a);
  void* b = ktune_workspace_alloc(1000);  // fits in a's block
  EXPECT_EQ(b, a);
  void* c = ktune_workspace_alloc(2 << 20);  // no cached block fits
  ASSERT_NE(c, nullptr);
  EXPECT_NE(c, a);
  std::memset(c, 2, 2 << 20);
  void* elsewhere = nullptr;
  std::thread([&] {
    elsewhere = ktune_workspace_alloc(1000);
    ktune_workspace_free(elsewhere);
  }).join();
  ktune_workspace_free(b);
  ktune_workspace_free(c);
  void* d = ktune_workspace_alloc(1500 << 10);
  EXPECT_EQ(d, c);  // the most recent one that fits
  void* e = ktune_workspace_alloc(10);
  EXPECT_EQ(e, a);
  ktune_workspace_free(d);
  ktune_workspace_free(e);
  EXPECT_NE(elsewhere, a);
  EXPECT_NE(elsewhere, c);
  void* zero = ktune_workspace_alloc(0);
  EXPECT_NE(zero, nullptr);
  ktune_workspace_free(zero);
  ktune_workspace_free(nullptr);
}

TEST(RuntimeTest, FirstErrorCodeIsReturned) {
  set_num_threads(2);
  EXPECT_EQ(ktune_parallel_for(100, fail_in_upper_half, nullptr), 7);
  EXPECT_EQ(ktune_parallel_for(0, fail_in_upper_half, nullptr), 0);
}

int32_t nested(int64_t begin, int64_t end, void* closure) {
  auto* h = static_cast<Hits*>(closure);
  for (int64_t i = begin; i < end; ++i) {
    Hits inner(10);
    if (int32_t rc = ktune_parallel_for(10, mark, &inner)) return rc;
    for (int j = 0; j < 10; ++j) {
      if (inner.count[j] != 1) return 3;
    }
    if (inner.threads.size() != 1) return 4;  // a nested loop runs serially on the caller
    h->count[i]++;
  }
  return 0;
}

// Marks like `mark`, slowly (100 us per iteration): long enough for every idle worker to come
// looking for chunks.
int32_t mark_slowly(int64_t begin, int64_t end, void* closure) {
  std::this_thread::sleep_for(std::chrono::microseconds(100 * (end - begin)));
  return mark(begin, end, closure);
}

TEST(RuntimeTest, WorkersBeyondTheThreadCountSitOut) {
  set_num_threads(8);
  Hits wide(64);
  ASSERT_EQ(ktune_parallel_for(64, mark_slowly, &wide), 0);  // starts 7 workers
  set_num_threads(2);
  for (int r = 0; r < 3; ++r) {
    Hits h(64);
    ASSERT_EQ(ktune_parallel_for(64, mark_slowly, &h), 0);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(h.count[i].load(), 1);
    EXPECT_LE(h.threads.size(), 2u) << "round " << r;
  }
}

TEST(RuntimeTest, NestedLoopsRunSerially) {
  set_num_threads(2);
  Hits h(16);
  EXPECT_EQ(ktune_parallel_for(16, nested, &h), 0);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(h.count[i].load(), 1);
}

TEST(RuntimeTest, ConcurrentCallersTakeTurns) {
  set_num_threads(2);
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int r = 0; r < 200; ++r) {
        Hits h(33);
        if (ktune_parallel_for(33, mark, &h) != 0) failures++;
        for (int i = 0; i < 33; ++i) {
          if (h.count[i] != 1) failures++;
        }
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(RuntimeTest, BadThreadCountIsInvalid) {
  try {
    set_num_threads(0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
  }
}

}  // namespace
}  // namespace ktune::codegen
