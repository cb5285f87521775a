#pragma once
// `dlock status KEY`: the read-write lock and the semaphore of the same name
// beside the lock — who writes, who reads, how many permits are held of how
// many, and by whom — read in one atomic step (a script).

#include <optional>
#include <string>
#include <vector>

#include "cli_script.hpp"
#include "dlock/config.hpp"
#include "holders.hpp"

namespace dlock::cli {

struct RecordHolder {
  Holder holder;  // hold_count: re-entry depth (read-write), or permits held (semaphore)
  std::optional<long long> lease_ms;
};

struct SharedStatus {
  std::optional<RecordHolder> writer;
  std::vector<RecordHolder> readers;
  std::optional<long long> permits;      // the semaphore's count; none if it has none
  long long permits_in_use = 0;
  std::vector<RecordHolder> permit_holders;
  std::string error;  // Redis refused the read, or a name holds another type
  bool refused_for_now = false;  // ... with "not now" (LOADING, TRYAGAIN, ...)

  bool has_read_write() const { return writer || !readers.empty(); }
  bool has_semaphore() const { return permits || !permit_holders.empty(); }
};

// The script that reads a key's read-write lock and semaphore for CliScript is
// scripts/shared_status.lua (lua::shared_status, embedded at build time).

SharedStatus read_shared_status(CliScript& script, HolderDirectory& holders, const std::string& endpoint,
                                const LockConfig& config, const std::string& key);

// Lines to print after the lock's own ("KEY (read-write): ...", "KEY (semaphore): ..."), none if neither exists.
std::string shared_status_text(const std::string& key, const SharedStatus& status, long long now_ms);

// ,"read_write":{...}|null,"semaphore":{...}|null, to append to the key's JSON object.
std::string shared_status_json(const SharedStatus& status);

}  // namespace dlock::cli
