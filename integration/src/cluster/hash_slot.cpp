// Hash slots: CRC16 of a key or its {hash tag} modulo 16384, and which argument routes a
// command (a script's first key, SCRIPT LOAD to every master, keyless commands anywhere).
#include "cluster/hash_slot.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>

namespace dlock::detail {
namespace {

constexpr std::array<std::uint16_t, 256> make_crc16_table() {
  std::array<std::uint16_t, 256> table{};
  for (std::uint32_t byte = 0; byte < 256; ++byte) {
    std::uint32_t crc = byte << 8;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1;
    table[byte] = static_cast<std::uint16_t>(crc);
  }
  return table;
}

constexpr std::array<std::uint16_t, 256> kCrc16 = make_crc16_table();

std::uint16_t crc16(std::string_view text) {
  std::uint16_t crc = 0;
  for (const char c : text) {
    crc = static_cast<std::uint16_t>((crc << 8) ^ kCrc16[((crc >> 8) ^ static_cast<unsigned char>(c)) & 0xff]);
  }
  return crc;
}

bool same_word(std::string_view text, std::string_view upper) {
  return text.size() == upper.size() && std::equal(text.begin(), text.end(), upper.begin(), [](char a, char b) {
           return std::toupper(static_cast<unsigned char>(a)) == b;
         });
}

// Commands dlock (or a user through it) may send whose argv[1] is no key.
constexpr std::array<std::string_view, 24> kKeyless{
    "PING",    "TIME",    "INFO",     "ROLE",  "WAIT",    "SCRIPT", "CLUSTER", "DBSIZE",
    "ECHO",    "COMMAND", "CLIENT",   "CONFIG", "ACL",    "LASTSAVE", "PUBLISH", "SCAN",
    "DEBUG",   "FUNCTION", "SLOWLOG", "LATENCY", "MEMORY", "FLUSHALL", "FLUSHDB", "HELLO"};

}  // namespace

std::uint16_t key_slot(std::string_view key) {
  const std::size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return static_cast<std::uint16_t>(crc16(key) % kSlotCount);
}

CommandRoute route_of(std::span<const std::string_view> argv) {
  if (argv.empty()) return {};
  const std::string_view name = argv[0];
  if (same_word(name, "EVALSHA") || same_word(name, "EVAL") || same_word(name, "EVALSHA_RO") ||
      same_word(name, "EVAL_RO") || same_word(name, "FCALL")) {
    std::size_t keys = 0;
    if (argv.size() < 4) return {};
    const auto [end, ec] = std::from_chars(argv[2].data(), argv[2].data() + argv[2].size(), keys);
    if (ec != std::errc() || end != argv[2].data() + argv[2].size() || keys == 0) return {};
    return {CommandKind::keyed, key_slot(argv[3])};
  }
  if (same_word(name, "SCRIPT") && argv.size() >= 2 && (same_word(argv[1], "LOAD") || same_word(argv[1], "FLUSH"))) {
    return {CommandKind::every_master, 0};
  }
  if (argv.size() < 2) return {};
  for (const std::string_view keyless : kKeyless) {
    if (same_word(name, keyless)) return {};
  }
  return {CommandKind::keyed, key_slot(argv[1])};
}

}  // namespace dlock::detail
