// The docs' ```yaml blocks, as tests/docs/extract_snippets.py found them when
// this was built: each loads with parse_config as a reader's file would, or,
// marked `rejected`, is refused with the message its doc promises.
#include <cstdlib>
#include <regex>
#include <string>

#include <catch2/catch.hpp>
#include <dlock/dlock.hpp>
#include <yaml-cpp/yaml.h>

struct DocYamlBlock {
  const char* doc;       // README.md, docs/deployments.md
  int line;              // the opening fence's line
  const char* section;   // "" or the key dlock's settings are under (marker `section dlock`)
  const char* rejected;  // nullptr, or what the ConfigError must say (marker `rejected "..."`)
  bool not_dlock;        // another program's YAML (marker `not-dlock`): only parsed
  const char* text;
};
#include "doc_yaml_blocks.hpp"

using Catch::Matchers::Contains;

namespace {

// parse_config's messages name a line of the text they were given ("NAME:LINE: ...");
// with as many empty lines before it as the doc has above the block, that is
// the doc's own line.
std::string as_placed_in_its_doc(const DocYamlBlock& block) { return std::string(block.line, '\n') + block.text; }

// The docs keep secrets out of the file as ${VAR}, which a reader's environment
// sets; an unset one is a ConfigError, so each is given a placeholder here.
void set_the_variables_it_names(const std::string& text) {
  static const std::regex variable(R"(\$\{([A-Za-z_][A-Za-z0-9_]*)\})");
  for (auto match = std::sregex_iterator(text.begin(), text.end(), variable); match != std::sregex_iterator();
       ++match) {
    ::setenv((*match)[1].str().c_str(), "doc-placeholder", 0);
  }
}

}  // namespace

TEST_CASE("every yaml block of the docs loads with parse_config as its doc says") {
  // None at all would mean the extraction broke, not that the docs are right.
  REQUIRE(!doc_yaml_blocks.empty());
  for (const DocYamlBlock& block : doc_yaml_blocks) {
    INFO("the ```yaml block at " << block.doc << ":" << block.line);
    if (block.not_dlock) {
      CHECK_NOTHROW(YAML::Load(block.text));
      continue;
    }
    set_the_variables_it_names(block.text);
    if (block.rejected == nullptr) {
      CHECK_NOTHROW(dlock::parse_config(as_placed_in_its_doc(block), block.doc, block.section));
      continue;
    }
    try {
      dlock::parse_config(as_placed_in_its_doc(block), block.doc, block.section);
      FAIL_CHECK("it is marked rejected, but parse_config loaded it");
    } catch (const dlock::ConfigError& refusal) {
      CHECK_THAT(refusal.what(), Contains(block.rejected));
    }
  }
}
