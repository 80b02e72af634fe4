// Tests of DevicePool: dispatch to free slots, stride-scheduled fairness with priorities, requeue
// of a lost worker's candidates, results delivered once, heartbeat expiry, deadlines of workers
// that heartbeat but never answer, flags, workers that cannot build, a worker's kUnsupported.
#include "rpc_runner/server/device_pool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "support/error.h"

namespace ktune::rpc_runner {
namespace {

// A worker whose "stream" is a vector of received candidates.
struct FakeWorker {
  std::string id;
  std::vector<rpc::Candidate> received;
  std::string closed;
};

// Attaches the worker and (unless `calibrate` is false) gives it a calibration at once.
std::string attach(DevicePool& pool, FakeWorker& w, const std::string& key, int slots,
                   bool can_build = true, bool calibrate = true) {
  WorkerInfo info;
  info.key = key;
  info.target = "llvm -mtriple=x86_64-linux-gnu";
  info.slots = slots;
  info.can_build = can_build;
  w.id = pool.attach(
      info, [&w](const rpc::Candidate& c) { w.received.push_back(c); },
      [&w](const std::string& reason, bool refused) {
        w.closed = (refused ? "refused: " : "lost: ") + reason;
      });
  if (calibrate) pool.calibrated(w.id, 100, 200, "");
  return w.id;
}

rpc::Candidate candidate(uint64_t index) {
  rpc::Candidate c;
  c.set_config_index(index);
  return c;
}

rpc::CandidateResult ok_result(uint64_t id, double cost) {
  rpc::CandidateResult r;
  r.set_id(id);
  r.add_costs(cost);
  return r;
}

// Collects results by job and config index.
struct Results {
  std::map<uint64_t, std::vector<std::pair<std::string, double>>>
      by_index;  // index -> (worker, cost)
  ResultCallback callback(uint64_t index) {
    return [this, index](const WorkerInfo& w, rpc::CandidateResult r) {
      by_index[index].emplace_back(w.worker_id, r.costs(0));
    };
  }
};

TEST(DevicePool, DispatchesUpToEachWorkersSlotsAndMoreWhenOneCompletes) {
  DevicePool pool;
  FakeWorker a, b;
  attach(pool, a, "x86", 2);
  attach(pool, b, "x86", 1);
  pool.open_job(1, "x86", 1);
  Results results;
  for (uint64_t i = 0; i < 5; ++i) pool.submit(1, candidate(i), results.callback(i));
  EXPECT_EQ(a.received.size(), 2u);
  EXPECT_EQ(b.received.size(), 1u);
  EXPECT_EQ(pool.measuring(1), 3);
  ASSERT_TRUE(pool.complete(b.id, ok_result(b.received[0].id(), 0.5)));
  EXPECT_EQ(b.received.size(), 2u);  // its slot is free again: the next candidate went there
  ASSERT_EQ(results.by_index.size(), 1u);
  EXPECT_EQ(results.by_index.begin()->second.front().first, b.id);
  EXPECT_DOUBLE_EQ(results.by_index.begin()->second.front().second, 0.5);
  // Every candidate went out once and in input order.
  std::vector<uint64_t> order;
  for (const auto& c : a.received) order.push_back(c.config_index());
  for (const auto& c : b.received) order.push_back(c.config_index());
  std::sort(order.begin(), order.end());
  EXPECT_EQ(order, (std::vector<uint64_t>{0, 1, 2, 3}));
}

TEST(DevicePool, CandidatesOfAnotherKeyWait) {
  DevicePool pool;
  FakeWorker arm;
  attach(pool, arm, "rk3399", 4);
  pool.open_job(1, "x86", 1);
  Results results;
  pool.submit(1, candidate(7), results.callback(7));
  EXPECT_TRUE(arm.received.empty());
  FakeWorker x86;
  attach(pool, x86, "x86", 1);
  ASSERT_EQ(x86.received.size(), 1u);  // dispatched at attach
  EXPECT_EQ(x86.received[0].config_index(), 7u);
}

TEST(DevicePool, PrioritiesShareTheDevicesByStride) {
  DevicePool pool;
  FakeWorker w;
  attach(pool, w, "x86", 1);
  pool.open_job(1, "x86", 1);
  pool.open_job(2, "x86", 2);
  Results results;
  // Both jobs keep plenty queued; the single slot is handed out 300 times.
  for (uint64_t i = 0; i < 300; ++i) {
    pool.submit(1, candidate(1000 + i), results.callback(1000 + i));
    pool.submit(2, candidate(2000 + i), results.callback(2000 + i));
  }
  std::map<int, int> served;
  for (int n = 0; n < 300; ++n) {
    ASSERT_FALSE(w.received.empty());
    const rpc::Candidate c = w.received.back();
    ++served[c.config_index() < 2000 ? 1 : 2];
    ASSERT_TRUE(pool.complete(w.id, ok_result(c.id(), 1.0)));
  }
  // Priority 2 gets two candidates for every one of priority 1 (within one of the ideal split).
  EXPECT_NEAR(served[2], 200, 2);
  EXPECT_NEAR(served[1], 100, 2);
}

TEST(DevicePool, ANewJobIsNotStarvedByAnOldOne) {
  DevicePool pool;
  FakeWorker w;
  attach(pool, w, "x86", 1);
  pool.open_job(1, "x86", 1);
  Results results;
  for (uint64_t i = 0; i < 200; ++i) pool.submit(1, candidate(i), results.callback(i));
  for (int n = 0; n < 100; ++n)
    ASSERT_TRUE(pool.complete(w.id, ok_result(w.received.back().id(), 1.0)));
  // Job 2 arrives after job 1 has had 100 dispatches: it must get a turn at once, not after 100.
  pool.open_job(2, "x86", 1);
  for (uint64_t i = 0; i < 10; ++i) pool.submit(2, candidate(5000 + i), results.callback(5000 + i));
  int job2 = 0;
  for (int n = 0; n < 10; ++n) {
    job2 += w.received.back().config_index() >= 5000;
    ASSERT_TRUE(pool.complete(w.id, ok_result(w.received.back().id(), 1.0)));
  }
  EXPECT_GE(job2, 4);
  EXPECT_LE(job2, 6);
}

TEST(DevicePool, ALostWorkersCandidatesGoToAnotherAndCompleteOnce) {
  DevicePool pool;
  FakeWorker a, b;
  attach(pool, a, "x86", 2);
  pool.open_job(1, "x86", 1);
  Results results;
  pool.submit(1, candidate(0), results.callback(0));
  pool.submit(1, candidate(1), results.callback(1));
  ASSERT_EQ(a.received.size(), 2u);
  attach(pool, b, "x86", 2);
  EXPECT_TRUE(b.received.empty());
  pool.detach(a.id, "killed");
  ASSERT_EQ(b.received.size(), 2u);
  EXPECT_EQ(b.received[0].config_index(), 0u);  // order kept
  EXPECT_EQ(b.received[1].config_index(), 1u);
  // The lost worker's late result is dropped; the new holder's is delivered.
  EXPECT_FALSE(pool.complete(a.id, ok_result(a.received[0].id(), 9.0)));
  EXPECT_TRUE(pool.complete(b.id, ok_result(b.received[0].id(), 1.0)));
  EXPECT_FALSE(pool.complete(b.id, ok_result(b.received[0].id(), 2.0)));  // twice: dropped
  ASSERT_EQ(results.by_index[0].size(), 1u);
  EXPECT_EQ(results.by_index[0][0].first, b.id);
  EXPECT_DOUBLE_EQ(results.by_index[0][0].second, 1.0);
  EXPECT_EQ(pool.workers().size(), 1u);
}

TEST(DevicePool, SilentWorkersExpireAndTheirStreamIsClosed) {
  DevicePool pool(0.2);
  FakeWorker quiet, alive;
  attach(pool, quiet, "x86", 1);
  attach(pool, alive, "x86", 1);
  pool.open_job(1, "x86", 1);
  Results results;
  pool.submit(1, candidate(0), results.callback(0));
  pool.submit(1, candidate(1), results.callback(1));
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    pool.touch(alive.id);
  }
  const auto gone = pool.expire();
  ASSERT_EQ(gone, std::vector<std::string>{quiet.id});
  EXPECT_NE(quiet.closed.find("no heartbeat"), std::string::npos);
  EXPECT_TRUE(alive.closed.empty());
  EXPECT_EQ(pool.measuring(1), 1);  // quiet's candidate waits for alive's slot
  ASSERT_TRUE(pool.complete(alive.id, ok_result(alive.received[0].id(), 1.0)));
  ASSERT_EQ(alive.received.size(), 2u);
}

// A candidate whose build and run timeouts add up to `budget_s`.
rpc::Candidate timed_candidate(uint64_t index, double budget_s) {
  rpc::Candidate c = candidate(index);
  c.mutable_measure()->set_build_timeout_s(budget_s / 2);
  c.mutable_measure()->set_run_timeout_s(budget_s / 2);
  return c;
}

void sleep_s(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

TEST(DevicePool, AWorkerPastACandidatesDeadlineIsDetachedAndTheCandidateGoesElsewhere) {
  DevicePool pool(60, 0.1);  // heartbeats never expire here; deadline = 0.1 s + the budget
  FakeWorker mute, honest;
  attach(pool, mute, "x86", 1);
  attach(pool, honest, "x86", 1);
  pool.open_job(1, "x86", 1);
  Results results;
  pool.submit(1, timed_candidate(0, 0.1), results.callback(0));
  pool.submit(1, timed_candidate(1, 0.1), results.callback(1));
  ASSERT_EQ(mute.received.size(), 1u);
  ASSERT_TRUE(pool.complete(honest.id, ok_result(honest.received[0].id(), 1.0)));
  EXPECT_TRUE(pool.expire().empty()) << "within its deadline";
  sleep_s(0.3);
  pool.touch(mute.id);  // it heartbeats: only the deadline can find it
  pool.touch(honest.id);
  ASSERT_EQ(pool.expire(), std::vector<std::string>{mute.id});
  EXPECT_NE(mute.closed.find("past their deadline"), std::string::npos) << mute.closed;
  ASSERT_EQ(honest.received.size(), 2u);
  EXPECT_EQ(honest.received[1].config_index(), mute.received[0].config_index());
  ASSERT_TRUE(pool.complete(honest.id, ok_result(honest.received[1].id(), 2.0)));
  EXPECT_EQ(results.by_index.size(), 2u);
  EXPECT_EQ(pool.measuring(1), 0);
}

TEST(DevicePool, TheDeadlineCountsOnlyTheTimeOnTheWorkerAndWhatItHoldsAhead) {
  DevicePool pool(60, 0.2);
  pool.open_job(1, "x86", 1);
  Results results;
  pool.submit(1, timed_candidate(0, 0.6), results.callback(0));
  pool.submit(1, timed_candidate(1, 0.6), results.callback(1));
  sleep_s(0.6);  // queued without a worker: not a timeout
  FakeWorker w;
  attach(pool, w, "x86", 2);
  ASSERT_EQ(w.received.size(), 2u);
  // Deadlines from here: the first 0.2 + 0.6 s, the second 0.2 + 0.6 + 0.6 s (it waits for the
  // first on the worker).
  sleep_s(0.5);
  pool.touch(w.id);
  EXPECT_TRUE(pool.expire().empty());
  ASSERT_TRUE(pool.complete(w.id, ok_result(w.received[0].id(), 1.0)));
  sleep_s(0.6);  // 1.1 s: past the first one's deadline, within the second's
  pool.touch(w.id);
  EXPECT_TRUE(pool.expire().empty());
  sleep_s(0.5);
  pool.touch(w.id);
  EXPECT_EQ(pool.expire(), std::vector<std::string>{w.id});
}

TEST(DevicePool, ACandidateThatMissesItsDeadlineOnThreeWorkersFailsAsWorkerLost) {
  DevicePool pool(60, 0.05);
  pool.open_job(1, "x86", 1);
  std::vector<rpc::CandidateResult> lost;
  pool.submit(1, timed_candidate(7, 0.05),
              [&](const WorkerInfo&, rpc::CandidateResult r) { lost.push_back(r); });
  std::vector<std::unique_ptr<FakeWorker>> workers;
  for (int attempt = 1; attempt <= DevicePool::kDeadlineAttempts; ++attempt) {
    workers.push_back(std::make_unique<FakeWorker>());
    FakeWorker& w = *workers.back();
    attach(pool, w, "x86", 1);
    ASSERT_EQ(w.received.size(), 1u) << "attempt " << attempt;
    EXPECT_TRUE(lost.empty());
    sleep_s(0.15);
    pool.touch(w.id);
    ASSERT_EQ(pool.expire(), std::vector<std::string>{w.id});
  }
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].error_kind(), "worker_lost");
  EXPECT_EQ(lost[0].costs_size(), 0);
  for (const auto& w : workers)
    EXPECT_NE(lost[0].error_message().find(w->id), std::string::npos) << lost[0].error_message();
  EXPECT_EQ(pool.measuring(1), 0);
  FakeWorker late;
  attach(pool, late, "x86", 1);
  EXPECT_TRUE(late.received.empty()) << "it failed: it is not sent again";
}

TEST(DevicePool, AFlaggedWorkerShowsItsRefusals) {
  DevicePool pool;
  FakeWorker w;
  attach(pool, w, "x86", 1);
  EXPECT_EQ(pool.workers()[0].refused, 0u);
  EXPECT_EQ(pool.workers()[0].flagged, "");
  pool.flag(w.id, "a cost of nan s");
  pool.flag(w.id, "a build time of -1 s");
  pool.flag("w999", "unknown ids are ignored");
  ASSERT_EQ(pool.workers().size(), 1u);
  EXPECT_EQ(pool.workers()[0].refused, 2u);
  EXPECT_EQ(pool.workers()[0].flagged, "a build time of -1 s");
}

TEST(DevicePool, AWorkerThatCannotBuildTakesOnlyCandidatesWithTheirKernel) {
  DevicePool pool;
  FakeWorker board;
  attach(pool, board, "rk3399", 1, /*can_build=*/false);
  pool.open_job(1, "rk3399", 1);
  Results results;
  pool.submit(1, candidate(0), results.callback(0));
  EXPECT_TRUE(board.received.empty());
  pool.close_job(1);
  pool.open_job(2, "rk3399", 1);
  rpc::Candidate built = candidate(1);
  built.set_artifact("object bytes");
  pool.submit(2, built, results.callback(1));
  ASSERT_EQ(board.received.size(), 1u);
  EXPECT_EQ(board.received[0].artifact(), "object bytes");
}

TEST(DevicePool, ResultsOfAClosedJobAreDropped) {
  DevicePool pool;
  FakeWorker w;
  attach(pool, w, "x86", 1);
  pool.open_job(1, "x86", 1);
  Results results;
  pool.submit(1, candidate(0), results.callback(0));
  pool.submit(1, candidate(1), results.callback(1));
  pool.close_job(1);
  EXPECT_FALSE(pool.complete(w.id, ok_result(w.received[0].id(), 1.0)));
  EXPECT_TRUE(results.by_index.empty());
  EXPECT_EQ(w.received.size(), 1u);  // the queued one was dropped with the job
  EXPECT_THROW(pool.submit(1, candidate(2), results.callback(2)), Error);
}

rpc::CandidateResult unsupported_result(uint64_t id) {
  rpc::CandidateResult r;
  r.set_id(id);
  r.set_error_kind(std::string(to_string(ErrorKind::kUnsupported)));
  r.set_error_message("target 'llvm -mtriple=aarch64-linux-gnu' cannot run on this host");
  return r;
}

// Every result delivered, in order: (config index, worker, error kind, message).
struct Answers {
  std::vector<std::tuple<uint64_t, std::string, std::string, std::string>> got;
  ResultCallback callback(uint64_t index) {
    return [this, index](const WorkerInfo& w, rpc::CandidateResult r) {
      got.emplace_back(index, w.worker_id, r.error_kind(), r.error_message());
    };
  }
};

// One worker's kUnsupported is its own: the candidate goes to the key's other worker (the refusing
// one takes the next candidate behind it meanwhile), and a candidate fails kUnsupported only once
// every worker of the key has said so, naming them.
TEST(DevicePool, AWorkersUnsupportedGoesToAnotherWorkerOfTheKey) {
  DevicePool pool;
  FakeWorker a, b;
  attach(pool, a, "x86", 1);
  attach(pool, b, "x86", 1);
  pool.open_job(1, "x86", 1);
  Answers answers;
  for (uint64_t i = 0; i < 3; ++i) pool.submit(1, candidate(i), answers.callback(i));
  ASSERT_EQ(a.received.size(), 1u);
  ASSERT_EQ(b.received.size(), 1u);
  EXPECT_EQ(a.received[0].config_index(), 0u);
  EXPECT_EQ(b.received[0].config_index(), 1u);
  // a cannot run 0: b is busy, so 0 waits at the front and a takes 2.
  EXPECT_TRUE(pool.complete(a.id, unsupported_result(a.received[0].id())));
  EXPECT_TRUE(answers.got.empty());
  ASSERT_EQ(a.received.size(), 2u);
  EXPECT_EQ(a.received[1].config_index(), 2u);
  // b finishes 1 and takes 0, which it runs.
  EXPECT_TRUE(pool.complete(b.id, ok_result(b.received[0].id(), 1.0)));
  ASSERT_EQ(b.received.size(), 2u);
  EXPECT_EQ(b.received[1].config_index(), 0u);
  EXPECT_TRUE(pool.complete(b.id, ok_result(b.received[1].id(), 2.0)));
  ASSERT_EQ(answers.got.size(), 2u);
  EXPECT_EQ(answers.got[1], std::make_tuple(uint64_t{0}, b.id, std::string(), std::string()));
  // Both cannot run 2: then it fails, once, with both named.
  EXPECT_TRUE(pool.complete(a.id, unsupported_result(a.received[1].id())));
  ASSERT_EQ(b.received.size(), 3u);
  EXPECT_EQ(b.received[2].config_index(), 2u);
  EXPECT_TRUE(pool.complete(b.id, unsupported_result(b.received[2].id())));
  ASSERT_EQ(answers.got.size(), 3u);
  EXPECT_EQ(std::get<0>(answers.got[2]), 2u);
  EXPECT_EQ(std::get<2>(answers.got[2]), "unsupported");
  EXPECT_NE(std::get<3>(answers.got[2]).find("no worker of key x86 can: " + a.id + ", " + b.id),
            std::string::npos)
      << std::get<3>(answers.got[2]);
  EXPECT_EQ(a.received.size(), 2u);  // never sent back to a worker that said so
}

// A candidate waiting for the key's other worker fails kUnsupported when that worker leaves
// without taking it (no worker attached can run it); the leaving worker's own candidate goes
// to the refusing one.
TEST(DevicePool, AnUnsupportedCandidateFailsWhenTheLastOtherWorkerLeaves) {
  DevicePool pool;
  FakeWorker a, b;
  attach(pool, a, "x86", 1);
  attach(pool, b, "x86", 1);
  pool.open_job(1, "x86", 1);
  Answers answers;
  pool.submit(1, candidate(0), answers.callback(0));
  pool.submit(1, candidate(1), answers.callback(1));
  EXPECT_TRUE(pool.complete(a.id, unsupported_result(a.received[0].id())));
  EXPECT_TRUE(answers.got.empty());
  EXPECT_EQ(a.received.size(), 1u);  // it waits for b
  pool.detach(b.id, "killed");
  ASSERT_EQ(answers.got.size(), 1u);
  EXPECT_EQ(std::get<0>(answers.got[0]), 0u);
  EXPECT_EQ(std::get<1>(answers.got[0]), a.id);
  EXPECT_EQ(std::get<2>(answers.got[0]), "unsupported");
  ASSERT_EQ(a.received.size(), 2u);
  EXPECT_EQ(a.received[1].config_index(), 1u);
}

}  // namespace
}  // namespace ktune::rpc_runner

namespace ktune::rpc_runner {
namespace {

// A worker takes no job candidate before its calibration: its direct candidates go to it at once,
// their result to their own callback (no job's); calibrated, it takes the queued work; refused,
// its stream is closed as refused and it is gone.
TEST(DevicePool, AWorkerTakesJobsOnlyOnceCalibrated) {
  DevicePool pool;
  FakeWorker w, other;
  attach(pool, w, "x86", 2, true, /*calibrate=*/false);
  pool.open_job(1, "x86", 1);
  Results results;
  pool.submit(1, candidate(7), results.callback(7));
  EXPECT_TRUE(w.received.empty());
  std::vector<double> calibration;
  pool.send_direct(w.id, candidate(100), [&](const WorkerInfo& info, rpc::CandidateResult r) {
    EXPECT_EQ(info.worker_id, w.id);
    calibration.push_back(r.costs(0));
  });
  ASSERT_EQ(w.received.size(), 1u);
  EXPECT_EQ(w.received[0].config_index(), 100u);
  EXPECT_TRUE(pool.complete(w.id, ok_result(w.received[0].id(), 0.5)));
  EXPECT_EQ(calibration, std::vector<double>{0.5});
  EXPECT_TRUE(results.by_index.empty());
  EXPECT_EQ(w.received.size(), 1u);  // still not calibrated
  pool.calibrated(w.id, 150, 290, "");
  ASSERT_EQ(w.received.size(), 2u);
  EXPECT_EQ(w.received[1].config_index(), 7u);
  const auto workers = pool.workers();
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_DOUBLE_EQ(workers[0].core_gflops, 150);
  EXPECT_DOUBLE_EQ(workers[0].all_gflops, 290);

  attach(pool, other, "x86", 1, true, /*calibrate=*/false);
  pool.refuse(other.id, "its calibration runs 9e9 GFLOP/s");
  EXPECT_EQ(other.closed, "refused: its calibration runs 9e9 GFLOP/s");
  EXPECT_EQ(pool.workers().size(), 1u);
  EXPECT_EQ(pool.workers_of("x86"), 1);
}

}  // namespace
}  // namespace ktune::rpc_runner
