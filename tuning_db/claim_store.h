// Defines ClaimStore, the claims of configs being measured on a tuning log, and ClaimOwner.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tuning_db/database.h"

namespace ktune::tuning_db {

// Who claims configs before measuring them: one tuning run of one process. Two runs of the same
// workload on one log skip what the other holds (ClaimStore::claim).
struct ClaimOwner {
  std::string id;    // unique per run
  std::string host;  // this machine's host name: a claim of a dead process here is stale at once
  int64_t pid = 0;
  // A new owner for a run of this process: this host and pid, and an id no other run shares.
  static ClaimOwner this_process();
};

// The claims table of a log, on the Database's connection, so that concurrent runs of a workload
// never measure the same config twice. Claims see only records and claims of one emulated-ness
// (false: real devices), so a real run measures again what was only measured under emulation.
// Thread-safety: that of its Database (one thread). The Database must outlive the store.
class ClaimStore {
 public:
  explicit ClaimStore(Database& db);

  // Claims configs of the workload on the target for `owner` (one write transaction) and returns
  // the indices granted, in the order asked: those that no record of any toolchain (of this
  // emulated-ness) holds yet and that no other owner holds a live claim on (claims of emulated
  // and real runs are apart). A claim is stale, and taken over, once it expired
  // or when its owner is a process of this host that no longer exists; claiming again what one
  // holds renews it. ttl_s: seconds until the claims expire. Throws Error(kInvalidArgument) for
  // an empty owner id or a ttl that is not finite and > 0, Error(kDatabase).
  std::vector<int64_t> claim(std::string_view workload_key, const TargetKey& target,
                             const std::vector<int64_t>& indices, const ClaimOwner& owner,
                             double ttl_s, bool emulated = false);
  // Releases the owner's claims of these configs (of either emulated-ness). Throws
  // Error(kDatabase).
  void release(const ClaimOwner& owner, std::string_view workload_key, const TargetKey& target,
               const std::vector<int64_t>& indices);
  // Releases every claim of the owner (a run that ends). Returns how many. Throws Error(kDatabase).
  int64_t release_all(const ClaimOwner& owner);

 private:
  Database::Impl& impl_;
};

}  // namespace ktune::tuning_db
