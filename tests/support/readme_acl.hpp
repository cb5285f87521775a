#pragma once
// The documented minimal ACL, read from docs/operations.md itself, so the tests
// check the rights the docs tell operators to grant, not a copy that may drift.

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "redis_server.hpp"

namespace dlock::test {

// The rights after "ACL SETUSER dlock on >PASSWORD" in docs/operations.md's ACL section.
inline std::vector<std::string> readme_minimal_acl() {
  const std::string prefix = "ACL SETUSER dlock on >PASSWORD ";
  std::ifstream readme(source_dir() / "docs" / "operations.md");
  for (std::string line; std::getline(readme, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream words(line.substr(prefix.size()));
    std::vector<std::string> rights;
    for (std::string word; words >> word;) rights.push_back(word);
    return rights;
  }
  throw std::runtime_error("docs/operations.md has no line starting '" + prefix + "'");
}

}  // namespace dlock::test
