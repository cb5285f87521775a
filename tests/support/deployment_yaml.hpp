#pragma once
// What a user of a deployment (TLS, Sentinel, Cluster, Redlock) does with nothing but
// a config file: writes the YAML, runs flash_sale and the `dlock` command
// with it. The test fixtures build Config values; this renders the redis
// section of one as the YAML a user would write, and checks that the example
// and the command work unchanged from it.
#include <catch2/catch.hpp>

#include <algorithm>
#include <regex>
#include <string>

#include "cli_harness.hpp"
#include "dlock/config.hpp"
#include "shell_command.hpp"

namespace dlock::test {

inline std::string yaml_node_list(const std::vector<NodeAddress>& nodes) {
  std::string list = "[";
  for (const auto& node : nodes) list += (list.size() > 1 ? ", \"" : "\"") + to_string(node) + "\"";
  return list + "]";
}

// The `redis:` section (and logging at warn) for `redis`, as YAML.
inline std::string deployment_yaml(const RedisConfig& redis) {
  std::string yaml = "redis:\n  mode: " + std::string(mode_name(redis.mode)) + "\n";
  if (redis.mode == RedisMode::standalone) {
    yaml += "  host: " + redis.host + "\n  port: " + std::to_string(redis.port) + "\n";
  }
  if (redis.mode == RedisMode::sentinel) {
    yaml += "  sentinel:\n    master_name: " + redis.sentinel.master_name +
            "\n    nodes: " + yaml_node_list(redis.sentinel.nodes) + "\n";
    if (!redis.sentinel.password.empty()) yaml += "    password: \"" + redis.sentinel.password + "\"\n";
  }
  if (redis.mode == RedisMode::cluster) yaml += "  cluster:\n    nodes: " + yaml_node_list(redis.cluster.nodes) + "\n";
  if (redis.mode == RedisMode::redlock) {
    yaml += "  redlock:\n    nodes: " + yaml_node_list(redis.redlock.nodes) +
            "\n    restarted_node_delay_ms: " + std::to_string(redis.redlock.restarted_node_delay.count()) + "\n";
  }
  if (redis.tls.enabled) {
    yaml += "  tls:\n    enabled: true\n";
    if (!redis.tls.ca_file.empty()) yaml += "    ca_file: " + redis.tls.ca_file + "\n";
    if (!redis.tls.cert_file.empty()) yaml += "    cert_file: " + redis.tls.cert_file + "\n";
    if (!redis.tls.key_file.empty()) yaml += "    key_file: " + redis.tls.key_file + "\n";
  }
  yaml += "  connect_timeout_ms: " + std::to_string(redis.connect_timeout.count()) +
          "\n  command_timeout_ms: " + std::to_string(redis.command_timeout.count()) + "\n";
  return yaml + "logging:\n  level: warn\n";
}

inline long long printed_number(const std::string& output, const std::string& name) {
  std::smatch match;
  REQUIRE(std::regex_search(output, match, std::regex(name + "=(-?[0-9]+)")));
  return std::stoll(match[1]);
}

// The lines of a program's output that say what went wrong (its error, a warning logged), put
// first in a failure's report: a report may be cut short, and a sale's output is mostly its tally.
inline std::string trouble_lines(const std::string& output) {
  static const std::regex trouble("error|warn|unreachable|failed|exhausted|timed? ?out", std::regex::icase);
  std::string lines;
  std::size_t start = 0;
  while (start < output.size()) {
    const std::size_t end = std::min(output.find('\n', start), output.size());
    const std::string line = output.substr(start, end - start);
    if (std::regex_search(line, trouble)) lines += line + "\n";
    start = end + 1;
  }
  return lines.empty() ? "(no error or warning printed)" : lines;
}

#ifdef FLASH_SALE_BIN  // the examples are built
// flash_sale (2 processes) sells exactly its stock, and `dlock run` holds a
// lock that `dlock status` and `dlock list`, run inside it, both see — all
// from the YAML file at `config_path`.
inline void check_examples_and_cli(const std::string& config_path, const std::string& sku) {
  {
    const CommandResult sale = run_shell(std::string(FLASH_SALE_BIN) + " --config " + config_path + " --sku " + sku +
                                         " --stock 30 --buyers 40 --threads 4 --processes 2 --reset");
    INFO("single-SKU sale, what went wrong: " << trouble_lines(sale.output));
    INFO(sale.output);
    CHECK(sale.status == 0);
    CHECK(printed_number(sale.output, "final_stock") == 0);
    CHECK(printed_number(sale.output, "sold") == 30);
    CHECK(printed_number(sale.output, "oversold") == 0);
  }
  {
    // Orders of several SKUs under one multi-lock, whose keys fall on different nodes of a cluster.
    const CommandResult multi = run_shell(std::string(FLASH_SALE_BIN) + " --config " + config_path + " --sku " + sku +
                                          "-M --multi-sku --stock 10 --buyers 30 --threads 4 --processes 2 --reset");
    INFO("multi-SKU sale, what went wrong: " << trouble_lines(multi.output));
    INFO(multi.output);
    CHECK(multi.status == 0);
    CHECK(printed_number(multi.output, "torn") == 0);
    CHECK(printed_number(multi.output, "oversold") == 0);
  }

  const std::string dlock = std::string(DLOCK_CLI_BIN) + " ";
  const std::string key = "cli-job:" + sku;
  const CommandResult held =
      run_shell(dlock + "run " + key + " --config " + config_path + " -- sh -c '" + dlock + "status " + key +
                " --json --config " + config_path + " && " + dlock + "list \"cli-job:*\" --config " + config_path + "'");
  INFO(held.output);
  CHECK(held.status == 0);
  CHECK_THAT(held.output, Catch::Contains("\"held\":true"));
  CHECK_THAT(held.output, Catch::Contains("1 lock held"));
  const CommandResult after = run_shell(dlock + "status " + key + " --json --config " + config_path);
  INFO(after.output);
  CHECK_THAT(after.output, Catch::Contains("\"held\":false"));
}
#endif

}  // namespace dlock::test
