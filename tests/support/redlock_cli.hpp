#pragma once
// Three Redlock nodes, a service over them, and the YAML an operator would
// pass to the dlock command: the CLI's Redlock cases start from this.

#include <memory>
#include <string>
#include <vector>

#include "cli_harness.hpp"
#include "deployment_yaml.hpp"
#include "redlock_nodes.hpp"

namespace dlock::test {

struct ThreeNodes {
  RedlockNodes nodes{3};
  dlock::Config config = nodes.config();
  std::shared_ptr<dlock::RedisLockService> service = dlock::make_lock_service(config);
  TempDir dir;
  std::string yaml = dir.write("redlock.yaml", deployment_yaml(config.redis));

  Result dlock(const std::vector<std::string>& args) const { return dlock_cli_with(dir, yaml, args); }
  // The acquisition id holding `key` on node `i`.
  std::string owner(std::size_t i, const std::string& key) { return nodes[i].run({"HKEYS", "dlock:{" + key + "}"}); }
};

}  // namespace dlock::test
