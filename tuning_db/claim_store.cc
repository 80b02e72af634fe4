// ClaimStore: claims of configs being measured, so that concurrent runs of a workload on one log
// never measure the same config twice.
#include "tuning_db/claim_store.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>

#include "support/error.h"
#include "tuning_db/database_impl.h"

namespace ktune::tuning_db {
namespace {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

// Whether process `pid` of this host is gone. A pid reused by another process looks alive:
// its claims then last until they expire.
bool process_gone(int64_t pid) {
  if (pid <= 0) return false;
  return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

ClaimOwner ClaimOwner::this_process() {
  static std::atomic<int64_t> runs{0};
  ClaimOwner owner;
  owner.host = host_name();
  owner.pid = getpid();
  const auto start = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  owner.id = owner.host + ":" + std::to_string(owner.pid) + ":" + std::to_string(start.count()) +
             ":" + std::to_string(runs.fetch_add(1));
  return owner;
}

ClaimStore::ClaimStore(Database& db) : impl_(*db.impl_) {}

std::vector<int64_t> ClaimStore::claim(std::string_view workload_key, const TargetKey& target,
                                       const std::vector<int64_t>& indices, const ClaimOwner& owner,
                                       double ttl_s, bool emulated) {
  if (owner.id.empty()) throw Error(ErrorKind::kInvalidArgument, "a claim needs an owner id");
  if (!std::isfinite(ttl_s) || ttl_s <= 0)
    throw Error(ErrorKind::kInvalidArgument, "a claim's time to live must be finite and > 0");
  std::vector<int64_t> granted;
  if (indices.empty()) return granted;
  const double now = now_seconds();
  // Immediate: the look at the records and claims and the insert are one step for every writer.
  // Run again after a lost connection, it grants this owner's claims again.
  sql::with_transaction(impl_.conn, sql::TransactionMode::kImmediate, [&](bool) {
    granted.clear();
    {
      auto s = impl_.use("DELETE FROM claims WHERE expires_at < ?1");
      s->bind(1, now);
      s->run();
    }
    const auto workload = impl_.workload_id(workload_key);
    const std::vector<int64_t> targets = impl_.target_ids(target);
    for (int64_t index : indices) {
      bool measured = false;
      for (size_t t = 0; workload && t < targets.size() && !measured; ++t) {
        auto s = impl_.use(
            "SELECT 1 FROM records r WHERE r.workload_id = ?1 AND r.target_id = ?2 AND "
            "r.config_index = ?3 "
            "AND r.emulated = ?4 LIMIT 1");
        s->bind(1, *workload).bind(2, targets[t]).bind(3, index).bind(4, int64_t{emulated});
        measured = s->step();
      }
      if (measured) continue;
      {
        auto s = impl_.use(
            "SELECT owner, host, pid FROM claims WHERE workload_key = ?1 AND target = ?2 AND "
            "emulated = ?4 "
            "AND config_index = ?3");
        s->bind(1, workload_key).bind(2, target.target).bind(3, index).bind(4, int64_t{emulated});
        if (s->step() && s->column_text(0) != owner.id &&
            !(s->column_text(1) == owner.host && process_gone(s->column_int(2))))
          continue;  // another live run measures it
      }
      auto s = impl_.use(
          "INSERT INTO claims(workload_key, target, config_index, owner, host, pid, expires_at, "
          "emulated) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
          "ON CONFLICT(workload_key, target, emulated, config_index) DO UPDATE SET "
          "owner = excluded.owner, host = excluded.host, pid = excluded.pid, "
          "expires_at = excluded.expires_at");
      s->bind(1, workload_key)
          .bind(2, target.target)
          .bind(3, index)
          .bind(4, owner.id)
          .bind(5, owner.host);
      s->bind(6, owner.pid).bind(7, now + ttl_s).bind(8, int64_t{emulated});
      s->run();
      granted.push_back(index);
    }
  });
  return granted;
}

void ClaimStore::release(const ClaimOwner& owner, std::string_view workload_key,
                         const TargetKey& target, const std::vector<int64_t>& indices) {
  if (indices.empty()) return;
  sql::with_transaction(impl_.conn, sql::TransactionMode::kImmediate, [&](bool) {
    for (int64_t index : indices) {
      auto s = impl_.use(
          "DELETE FROM claims WHERE workload_key = ?1 AND target = ?2 AND config_index = ?3 AND "
          "owner = ?4");
      s->bind(1, workload_key).bind(2, target.target).bind(3, index).bind(4, owner.id);
      s->run();
    }
  });
}

int64_t ClaimStore::release_all(const ClaimOwner& owner) {
  auto s = impl_.use("DELETE FROM claims WHERE owner = ?1");
  s->bind(1, owner.id);
  s->run();
  return impl_.conn.changes();
}

}  // namespace ktune::tuning_db
