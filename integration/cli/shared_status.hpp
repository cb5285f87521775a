#pragma once
// A key's read-write lock and semaphore beside its lock, as `dlock status`
// and `dlock list` show them — who writes, who reads, how many permits are
// held of how many, and by whom — read in one atomic step (a script). Each
// part is read, or refused, on its own: a right the user lacks for one part
// leaves the other readable.

#include <optional>
#include <string>
#include <vector>

#include "cli_script.hpp"
#include "dlock/config.hpp"
#include "holders.hpp"
#include "redis_refusal.hpp"

namespace dlock::cli {

struct RecordHolder {
  Holder holder;  // hold_count: re-entry depth (read-write), or permits held (semaphore)
  std::optional<long long> lease_ms;
};

struct ReadWriteStatus {
  std::optional<RecordHolder> writer;
  std::vector<RecordHolder> readers;
  std::optional<long long> waiters;        // in its line; none if Redis would not say
  std::optional<long long> fencing_token;  // the last writer's (P{K}:rw:fence); none if never written
  Refusal refusal;                         // set: the rest is unknown

  bool held() const { return writer || !readers.empty(); }
};

struct SemaphoreStatus {
  std::optional<long long> permits;  // its count; none if it has none
  long long in_use = 0;
  std::vector<RecordHolder> holders;
  std::optional<long long> waiters;  // in its line; none if Redis would not say
  Refusal refusal;                   // set: the rest is unknown

  bool exists() const { return permits || !holders.empty(); }
};

struct SharedStatus {
  ReadWriteStatus read_write;
  SemaphoreStatus semaphore;
};

// The script that reads them for CliScript is scripts/shared_status.lua
// (lua::shared_status, embedded at build time).
SharedStatus read_shared_status(CliScript& script, HolderDirectory& holders, const std::string& endpoint,
                                const LockConfig& config, const std::string& key);

// Lines to print after the lock's own ("KEY (read-write): ...", "KEY (semaphore): ..."), none for a part that
// does not exist.
std::string shared_status_text(const std::string& key, const SharedStatus& status, long long now_ms);

// ,"read_write":{...}|{"error":...}|null,"semaphore":{...}|{"error":...}|null, to append to the key's JSON object.
std::string shared_status_json(const SharedStatus& status);

}  // namespace dlock::cli
