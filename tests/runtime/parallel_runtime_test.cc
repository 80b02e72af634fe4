// Tests of codegen/parallel_runtime.c through tests/runtime/runtime_stress.c: 10,000 parallel
// loops at 1..4 threads and from two application threads (every iteration exactly once, every
// sum right, error codes and nested loops), a plugged parallel-for, thread caps (the chunks a
// capped loop runs in, per calling thread), ThreadSanitizer on the same program, and the default
// thread count following the affinity mask, and workers bound to CPUs of their own.
#include <gtest/gtest.h>

#include <sched.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/cli_util.h"

namespace {

using ktune::testing_cli::quote;
using ktune::testing_cli::shell;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Checks the stress program's report: the expected checks, each with 0 wrong loops, then PASS.
// Under TSan the fork check is not run (TSan does not support a multi-threaded fork's child).
void expect_all_right(const ktune::testing_cli::Output& out, long loops, bool tsan = false) {
  EXPECT_EQ(out.status, 0) << out.out << out.err;
  const auto lines = lines_of(out.out);
  const std::vector<std::string> want = {
      "threads 1: " + std::to_string(loops) + " loops, 0 wrong",
      "threads 2: " + std::to_string(loops) + " loops, 0 wrong",
      "threads 3: " + std::to_string(loops) + " loops, 0 wrong",
      "threads 4: " + std::to_string(loops) + " loops, 0 wrong",
      "two application threads, threads 2: " + std::to_string(2 * loops) + " loops, 0 wrong",
      "two application threads, threads 3: " + std::to_string(2 * loops) + " loops, 0 wrong",
      "plugged parallel-for: " + std::to_string(loops / 10 + 1) + " loops, 0 wrong",
  };
  ASSERT_EQ(lines.size(), want.size() + 6) << out.out;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(lines[i], want[i]);
  // Every loop goes through the plug, and nested loops inside its bodies too.
  long plug_calls = 0;
  ASSERT_EQ(std::sscanf(lines[want.size()].c_str(), "plugged calls %ld", &plug_calls), 1)
      << lines[want.size()];
  EXPECT_GT(plug_calls, loops / 10);
  EXPECT_EQ(lines[want.size() + 1],
            "pool again: " + std::to_string(loops / 10 + 1) + " loops, 0 wrong");
  EXPECT_EQ(lines[want.size() + 2],
            tsan ? "fork child: not run under ThreadSanitizer"
                 : "fork child: " + std::to_string(loops / 10 + 1) + " loops, 0 wrong");
  long worker_chunks = 0;
  ASSERT_EQ(
      std::sscanf(lines[want.size() + 3].c_str(), "chunks run by workers %ld", &worker_chunks), 1);
  EXPECT_GT(worker_chunks, 0) << "the pool's workers ran nothing";
  // Extent 37 at 4 threads: 16 chunks; capped at 2: 8; at 1: one call on the caller (even with a
  // plug, which is not called); a new thread has no cap; the cap set is the one returned after.
  EXPECT_EQ(lines[want.size() + 4],
            "thread caps: 16 chunks uncapped, 8 at cap 2, 1 at cap 1 (0 off the caller), 16 on "
            "another thread, 1 plugged at cap 1 (0 plug calls), caps 0 then 1");
  EXPECT_EQ(lines.back(), "PASS");
}

TEST(RuntimeStandalone, TenThousandLoopsAtOneToFourThreadsAndFromTwoApplicationThreads) {
  expect_all_right(shell(quote(RUNTIME_STRESS) + " 10000"), 10000);
}

TEST(RuntimeStandalone, NoDataRaceUnderThreadSanitizer) {
  const std::string tsan = RUNTIME_STRESS_TSAN;
  if (tsan.empty())
    GTEST_SKIP() << "the C compiler has no -fsanitize=thread (or the build uses ASan)";
  // TSan slows every access tenfold: fewer loops, the same checks. halt_on_error makes a race fail.
  const auto out = shell("TSAN_OPTIONS=halt_on_error=1 " + quote(tsan) + " 500");
  expect_all_right(out, 500, true);
  EXPECT_EQ(out.err.find("ThreadSanitizer"), std::string::npos) << out.err;
}

TEST(RuntimeStandalone, DefaultThreadsAreTheCpusOfTheAffinityMask) {
  EXPECT_EQ(shell("taskset -c 0 " + quote(RUNTIME_STRESS) + " --default").out,
            "default_threads 1\n");
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  if (CPU_COUNT(&set) < 2) GTEST_SKIP() << "one CPU: no mask of two to try";
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  const std::string mask = std::to_string(cpus[0]) + "," + std::to_string(cpus[1]);
  EXPECT_EQ(shell("taskset -c " + mask + " " + quote(RUNTIME_STRESS) + " --default").out,
            "default_threads 2\n");
  EXPECT_EQ(shell(quote(RUNTIME_STRESS) + " --default").out,
            "default_threads " + std::to_string(CPU_COUNT(&set)) + "\n");
}

// Worker k is bound to the (k+2)-th CPU of the process's mask (the caller keeps the rest);
// ktune_set_thread_binding(0) gives every worker the whole mask again, and KTUNE_BIND_THREADS=0
// starts them unbound.
TEST(RuntimeStandalone, WorkersAreBoundToACpuOfTheirOwnUnlessTurnedOff) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  if (CPU_COUNT(&set) < 2) GTEST_SKIP() << "one CPU: no worker to bind";
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  const std::string a = std::to_string(cpus[0]), b = std::to_string(cpus[1]);
  const std::string taskset = "taskset -c " + a + "," + b + " ";
  // A loop's caller found on the worker's CPU is moved to the other (its mask kept as it was);
  // one whose mask is the worker's CPU alone stays there.
  const std::string caller = "caller from " + b + " ran on " + a + ", mask " + a + "," + b +
                             "; pinned there ran on " + b + ", mask " + b + "\n";
  EXPECT_EQ(shell(taskset + quote(RUNTIME_STRESS) + " --binding").out,
            "worker on " + b + "; unbound on " + a + "," + b + "; bound on " + b +
                "; returned 1 0\n" + caller);
  EXPECT_EQ(shell("KTUNE_BIND_THREADS=0 " + taskset + quote(RUNTIME_STRESS) + " --binding").out,
            "worker on " + a + "," + b + "; unbound on " + a + "," + b + "; bound on " + b +
                "; returned 0 0\n" + caller);
}

}  // namespace
