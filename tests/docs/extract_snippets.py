#!/usr/bin/env python3
"""Extracts the ```cpp and ```yaml blocks of the docs, so the suite can prove
that every snippet a reader copies compiles and every YAML block loads.

    extract_snippets.py list ROOT DOC...           one line per cpp block, for CMake:
                                                   NAME<TAB>compile|compile-fail<TAB>REGEX
    extract_snippets.py generate ROOT OUTDIR DOC...
        OUTDIR/NAME.cpp per cpp block (rewritten only when its text changed, so
        editing one doc recompiles only its blocks), OUTDIR/doc_yaml_blocks.hpp,
        the YAML blocks as data for test_doc_yaml.cpp, and OUTDIR/snippets.stamp
        (always touched: the build's record that the docs were read).

DOC paths are relative to ROOT (README.md, docs/locks.md); NAME is the doc's
path with '/' as '_' and without '.md', then the block's ordinal among the
doc's cpp blocks: docs_locks_1. Each generated file carries #line directives,
so a compiler error names the doc and the line in it.

A cpp block is compiled at file scope after tests/docs/snippet_prelude.hpp
(<dlock/dlock.hpp>, std::chrono's literals, and declarations of the reader's
own functions the docs call, such as write_stock or pay: a snippet that calls a
new one declares it there). A YAML block is loaded by dlock::parse_config.

The marker, an HTML comment on the line right before a fence (invisible on
GitHub), changes that; its words are read as a shell would split them:

  <!-- snippet: inside-function -->    cpp: the block is the body of
        void f(std::shared_ptr<dlock::RedisLockService> service)
  <!-- snippet: inside-coroutine -->   cpp: the body of
        asio::awaitable<void> f(std::shared_ptr<dlock::RedisLockService> service),
        with <dlock/asio.hpp> included
  <!-- snippet: compile-fail "REGEX" -->   cpp: must not compile, and the
        compiler's output must match REGEX (CMake's syntax; no ';', brackets paired). May follow
        inside-function or inside-coroutine in the same marker.
  <!-- snippet: section dlock -->       yaml: dlock's settings are under this
        key (a dotted path works), as with load_config(file, "dlock")
  <!-- snippet: rejected "TEXT" -->     yaml: parse_config must throw
        ConfigError, with TEXT in its message
  <!-- snippet: not-dlock -->           yaml: not a dlock config (a Prometheus
        scrape job, a compose file): only checked to be well-formed YAML
"""

import os
import re
import shlex
import sys

PRELUDE = "snippet_prelude.hpp"
YAML_HEADER = "doc_yaml_blocks.hpp"
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)(.*)$")
MARKER = re.compile(r"^\s*<!--\s*snippet:(.*?)-->\s*$")
RAW_DELIMITER = "dlock_doc"


class Block:
    def __init__(self, doc, line, language, text, marker):
        self.doc = doc  # path relative to ROOT
        self.line = line  # the fence's line, 1-based
        self.language = language
        self.text = text
        self.context = "file"  # file | inside-function | inside-coroutine
        self.compile_fail = None
        self.section = ""
        self.rejected = None
        self.not_dlock = False
        self.read_marker(marker)

    def fail(self, what):
        sys.exit(f"{self.doc}:{self.line - 1}: snippet marker: {what} (the markers are listed at the top of {__file__})")

    def read_marker(self, marker):
        words = shlex.split(marker) if marker else []
        cpp_words = {"inside-function", "inside-coroutine", "compile-fail"}
        yaml_words = {"section", "rejected", "not-dlock"}
        allowed = cpp_words if self.language == "cpp" else yaml_words
        while words:
            word = words.pop(0)
            if word not in allowed:
                self.fail(f"'{word}' is not a marker for a {self.language} block; use one of {sorted(allowed)}")
            if word in ("inside-function", "inside-coroutine"):
                self.context = word
            elif word == "not-dlock":
                self.not_dlock = True
            else:
                if not words:
                    self.fail(f"'{word}' needs a value after it, in quotes if it has spaces")
                value = words.pop(0)
                if word == "compile-fail":
                    # The listing reaches CMake as a list: a ';' splits it, an unpaired bracket joins lines.
                    if ";" in value or value.count("[") != value.count("]"):
                        self.fail("a compile-fail regular expression cannot hold ';' or unpaired brackets")
                    self.compile_fail = value
                elif word == "section":
                    self.section = value
                else:
                    self.rejected = value


def read_blocks(root, doc):
    """The doc's cpp and yaml blocks, in order. Fences inside other fences are text."""
    lines = open(os.path.join(root, doc), encoding="utf-8").read().split("\n")
    blocks = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            if MARKER.match(lines[index]) and not (index + 1 < len(lines) and FENCE.match(lines[index + 1])):
                sys.exit(f"{doc}:{index + 1}: a snippet marker must be the line right before a ```cpp or ```yaml fence")
            index += 1
            continue
        indent, ticks, language = opening.group(1), opening.group(2), opening.group(3)
        end = index + 1
        while end < len(lines) and not re.match(r"^\s*" + re.escape(ticks[0]) + "{" + str(len(ticks)) + r",}\s*$",
                                                  lines[end]):
            end += 1
        if end == len(lines):
            sys.exit(f"{doc}:{index + 1}: this fence is never closed")
        marker = MARKER.match(lines[index - 1]) if index > 0 else None
        if language in ("cpp", "yaml"):
            body = [line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[index + 1:end]]
            blocks.append(Block(doc, index + 1, language, "\n".join(body) + "\n", marker.group(1) if marker else ""))
        elif marker:
            sys.exit(f"{doc}:{index}: a snippet marker before a ```{language} fence: only cpp and yaml blocks are checked")
        index = end + 1
    return blocks


def cpp_blocks(root, docs):
    """(NAME, block) for every cpp block of the docs."""
    named = []
    for doc in docs:
        stem = re.sub(r"\.md$", "", doc).replace("/", "_").replace("\\", "_")
        ordinal = 0
        for block in read_blocks(root, doc):
            if block.language == "cpp":
                ordinal += 1
                named.append((f"{stem}_{ordinal}", block))
    return named


def cpp_source(root, out_path, block):
    doc_path = os.path.join(os.path.abspath(root), block.doc)
    lines = [f"// Generated by tests/docs/extract_snippets.py from {block.doc}:{block.line}; edit the doc, not this.",
             f'#include "{PRELUDE}"']
    if block.context == "inside-coroutine":
        lines.append("#include <dlock/asio.hpp>")
    # The block is a scope of its own inside the function, so a snippet may
    # declare a `service` of its own, as a reader's function would.
    if block.context == "inside-function":
        lines.append("[[maybe_unused]] static void snippet(std::shared_ptr<dlock::RedisLockService> service) { {")
    elif block.context == "inside-coroutine":
        lines.append("[[maybe_unused]] static asio::awaitable<void> snippet("
                     "std::shared_ptr<dlock::RedisLockService> service) { {")
    lines.append(f'#line {block.line + 1} "{doc_path}"')
    lines.extend(block.text.rstrip("\n").split("\n"))
    # The wrapper's closing lines are the generated file's own again (a #line
    # directive numbers the line after it).
    lines.append(f'#line {len(lines) + 2} "{out_path}"')
    if block.context == "inside-function":
        lines.append("} }")
    elif block.context == "inside-coroutine":
        lines.append("} co_return; }")
    return "\n".join(lines) + "\n"


def c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def yaml_header(root, docs):
    entries = []
    for doc in docs:
        for block in read_blocks(root, doc):
            if block.language != "yaml":
                continue
            if f"){RAW_DELIMITER}\"" in block.text:
                sys.exit(f"{doc}:{block.line}: the yaml block holds ){RAW_DELIMITER}\", the generated raw string's end")
            rejected = c_string(block.rejected) if block.rejected is not None else "nullptr"
            entries.append(f"    DocYamlBlock{{{c_string(doc)}, {block.line}, {c_string(block.section)}, {rejected}, "
                           f"{'true' if block.not_dlock else 'false'},\n"
                           f'                 R"{RAW_DELIMITER}({block.text}){RAW_DELIMITER}"}},')
    # std::array, so that docs without a yaml block still compile (and the test says so).
    lines = ["// Generated by tests/docs/extract_snippets.py from the docs' ```yaml blocks; edit the docs, not this.",
             "#pragma once",
             "",
             "#include <array>",
             "",
             "// {doc, fence line, section, expected ConfigError text or nullptr, not a dlock config, text}",
             f"inline constexpr std::array<DocYamlBlock, {len(entries)}> doc_yaml_blocks{{",
             *entries,
             "};"]
    return "\n".join(lines) + "\n"


def write_if_changed(path, text):
    if os.path.exists(path) and open(path, encoding="utf-8").read() == text:
        return
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)


def main(argv):
    if len(argv) >= 3 and argv[1] == "list":
        root, docs = argv[2], argv[3:]
        for name, block in cpp_blocks(root, docs):
            kind = "compile-fail" if block.compile_fail is not None else "compile"
            print(f"{name}\t{kind}\t{block.compile_fail or ''}")
        return
    if len(argv) >= 4 and argv[1] == "generate":
        root, out_dir, docs = argv[2], argv[3], argv[4:]
        os.makedirs(out_dir, exist_ok=True)
        for name, block in cpp_blocks(root, docs):
            out_path = os.path.join(os.path.abspath(out_dir), name + ".cpp")
            write_if_changed(out_path, cpp_source(root, out_path, block))
        write_if_changed(os.path.join(out_dir, YAML_HEADER), yaml_header(root, docs))
        with open(os.path.join(out_dir, "snippets.stamp"), "w", encoding="utf-8"):
            pass
        return
    sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
