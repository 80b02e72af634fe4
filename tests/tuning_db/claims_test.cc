// Tests of ClaimStore::claim: configs claimed by one run are refused to another, measured configs
// are refused to all, expired claims and claims of dead processes are taken over, releases.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "tests/tuning_db/postgres_util.h"
#include "tests/tuning_db/test_util.h"
#include "tuning_db/claim_store.h"
#include "tuning_db/database.h"
#include "tuning_db/sql.h"

namespace ktune::tuning_db {
namespace {

using testing::kHost;
using testing::make_record;
using testing::matmul_key;
using testing::TempDir;

// Claims run on both backends.
class ClaimsOn : public testing::OnBothBackends {};
INSTANTIATE_TEST_SUITE_P(Backends, ClaimsOn, testing::kBothBackends, testing::backend_test_name);

ClaimOwner owner_named(const std::string& id, int64_t pid) {
  ClaimOwner o = ClaimOwner::this_process();
  o.id = id;
  o.pid = pid;
  return o;
}

TEST_P(ClaimsOn, OtherOwnersAreRefusedUntilReleased) {
  auto db = Database::open(fresh("t.db"));
  ClaimStore claims(db);
  const ClaimOwner a = ClaimOwner::this_process(), b = ClaimOwner::this_process();
  ASSERT_NE(a.id, b.id);
  EXPECT_EQ(claims.claim(matmul_key(8), kHost, {1, 2, 3}, a, 60), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(claims.claim(matmul_key(8), kHost, {3, 4, 2, 5}, b, 60), (std::vector<int64_t>{4, 5}));
  // The owner may claim its own again (a renewal); another workload or target is independent.
  EXPECT_EQ(claims.claim(matmul_key(8), kHost, {1}, a, 60), (std::vector<int64_t>{1}));
  EXPECT_EQ(claims.claim(matmul_key(9), kHost, {1, 2}, b, 60), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(
      claims.claim(matmul_key(8), TargetKey{"llvm -mtriple=aarch64-linux-gnu", ""}, {1}, b, 60),
      (std::vector<int64_t>{1}));
  EXPECT_EQ(db.stats().claims, 3 + 2 + 2 + 1);

  claims.release(a, matmul_key(8), kHost, {2});
  EXPECT_EQ(claims.claim(matmul_key(8), kHost, {1, 2, 3}, b, 60), (std::vector<int64_t>{2}));
  EXPECT_EQ(claims.release_all(a), 2);  // 1 and 3
  EXPECT_EQ(claims.claim(matmul_key(8), kHost, {1, 3}, b, 60), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(claims.release_all(b), 2 + 2 + 1 + 3);
  EXPECT_EQ(db.stats().claims, 0);
}

TEST_P(ClaimsOn, MeasuredConfigsAreRefusedToEveryone) {
  auto db = Database::open(fresh("t.db"));
  ClaimStore claims(db);
  db.add({make_record(8, 7, {1e-3})});
  // A query target without a toolchain also sees the record of 19.1.7.
  const ClaimOwner a = ClaimOwner::this_process();
  EXPECT_EQ(claims.claim(matmul_key(8), kHost, {6, 7, 8}, a, 60), (std::vector<int64_t>{6, 8}));
  EXPECT_EQ(claims.claim(matmul_key(8), TargetKey{kHost.target, ""}, {7}, a, 60),
            std::vector<int64_t>{});
}

TEST_P(ClaimsOn, ExpiredClaimsAndClaimsOfDeadProcessesAreTakenOver) {
  const std::string location = fresh("t.db");
  auto db = Database::open(location);
  ClaimStore claims(db);
  const ClaimOwner me = ClaimOwner::this_process();
  // A live process of this host (this one) whose claim expires in 0.2 s.
  const ClaimOwner live = owner_named("live-run", ::getpid());
  EXPECT_EQ(claims.claim(matmul_key(8), kHost, {1}, live, 0.2), (std::vector<int64_t>{1}));
  EXPECT_EQ(claims.claim(matmul_key(8), kHost, {1}, me, 60), std::vector<int64_t>{});
  ::usleep(300 * 1000);
  EXPECT_EQ(claims.claim(matmul_key(8), kHost, {1}, me, 60), (std::vector<int64_t>{1}));

  // A process that has exited: its claim, though far from expiry, is stale at once.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const ClaimOwner dead = owner_named("dead-run", child);
  {
    // Written directly, as the dead run would have: claim() with its owner would take it anyway.
    auto db2 = Database::open(location);
    EXPECT_EQ(ClaimStore(db2).claim(matmul_key(8), kHost, {2}, dead, 3600),
              (std::vector<int64_t>{2}));
  }
  // The same pid on another host is not known dead here: its claim holds until it expires.
  ClaimOwner remote = owner_named("remote-run", child);
  remote.host = "another-host";
  EXPECT_EQ(claims.claim(matmul_key(8), kHost, {3}, remote, 3600), (std::vector<int64_t>{3}));
  EXPECT_EQ(claims.claim(matmul_key(8), kHost, {2, 3}, me, 60), (std::vector<int64_t>{2}));
}

TEST_P(ClaimsOn, TwoConnectionsClaimingOneWorkloadNeverGetTheSameConfig) {
  const std::string location = fresh("t.db");
  Database::open(location);  // the schema, before the two race
  constexpr int64_t kConfigs = 120;
  std::vector<int64_t> got[2];
  std::atomic<int> ready{0};
  auto run = [&](int who) {
    Database db = Database::open(location);
    ClaimStore claims(db);
    const ClaimOwner owner = ClaimOwner::this_process();
    // Both connections are open before either claims.
    ready.fetch_add(1);
    while (ready.load() < 2) std::this_thread::yield();
    // Both ask for every config, in small batches, the second from the other end.
    for (int64_t at = 0; at < kConfigs; at += 4) {
      std::vector<int64_t> ask;
      for (int64_t i = at; i < at + 4; ++i) ask.push_back(who == 0 ? i : kConfigs - 1 - i);
      for (int64_t index : claims.claim(matmul_key(8), kHost, ask, owner, 60))
        got[who].push_back(index);
    }
  };
  std::thread first(run, 0), second(run, 1);
  first.join();
  second.join();
  std::vector<int64_t> all = got[0];
  all.insert(all.end(), got[1].begin(), got[1].end());
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), static_cast<size_t>(kConfigs)) << "a config was granted twice or never";
  for (int64_t i = 0; i < kConfigs; ++i) EXPECT_EQ(all[static_cast<size_t>(i)], i);
}

TEST_P(ClaimsOn, BadArgumentsAreRefused) {
  auto db = Database::open(fresh("t.db"));
  ClaimStore claims(db);
  ClaimOwner nobody;
  EXPECT_THROW(claims.claim(matmul_key(8), kHost, {1}, nobody, 60), Error);
  EXPECT_THROW(claims.claim(matmul_key(8), kHost, {1}, ClaimOwner::this_process(), 0), Error);
  EXPECT_THROW(claims.claim(matmul_key(8), kHost, {1}, ClaimOwner::this_process(), -1), Error);
}

}  // namespace
}  // namespace ktune::tuning_db
